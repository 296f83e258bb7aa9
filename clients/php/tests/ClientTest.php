<?php

declare(strict_types=1);

namespace Queen\Tests;

use PHPUnit\Framework\TestCase;
use Queen\Client;
use Queen\Exception\AuthException;
use Queen\Exception\BadRequestException;
use Queen\Exception\PreconditionFailedException;
use Queen\Exception\QueenException;
use Queen\Exception\TransportException;
use Queen\Expiry;
use Queen\Json;
use Queen\Number;

/**
 * The PHP client's own tests against real brokers: the idiom around the
 * calls (arrays by default, Number for exact numbers, exception classes,
 * the scan generator, the builder), timeouts against a silent peer, the
 * bearer token on an authenticated broker, and the consume loop's stops.
 */
final class ClientTest extends TestCase
{
    private const SECRET = 'php-client-secret-9d27';

    private static function client(array $o = [], ?string $url = null): Client
    {
        return new Client($url ?? Harness::get()->mainUrl(), $o + ['backoffMs' => 10]);
    }

    private static function ns(): string
    {
        return 'php-' . Harness::token();
    }

    private static function mint(string $secret, string $role, ?string $tenant = null): string
    {
        $b64 = fn (string $s) => rtrim(strtr(base64_encode($s), '+/', '-_'), '=');
        $head = $b64('{"alg":"HS256","typ":"JWT"}');
        $claims = ['sub' => 'php-test', 'role' => $role, 'exp' => time() + 600];
        if ($tenant !== null) {
            $claims['tenant'] = $tenant;
        }
        $body = $b64(json_encode($claims));
        return "$head.$body." . $b64(hash_hmac('sha256', "$head.$body", $secret, true));
    }

    public function testResultsAreArraysWithExactNumbers(): void
    {
        $c = self::client();
        $ns = self::ns();
        $put = $c->kvPut($ns, 'k', ['big' => new Number('12345678901234567890'), 'tenth' => 0.1], Expiry::forever());
        $this->assertTrue($put['applied']);
        $got = $c->kvGet($ns, 'k');
        $this->assertTrue($got['found']);
        $this->assertSame(0.1, $got['value']['tenth']);
        $this->assertEquals(new Number('12345678901234567890'), $got['value']['big']);
        $this->assertSame($put['version'], $got['version']);
        $this->assertNull($got['expiresAt']);
        $this->assertSame(['found' => false], array_intersect_key($c->kvGet($ns, 'none'), ['found' => 1]));
    }

    public function testLostRequiredWriteIsItsOwnException(): void
    {
        $c = self::client();
        $ns = self::ns();
        $v1 = $c->kvPut($ns, 'k', 'a', Expiry::ttl(600))['version'];
        try {
            $c->kvPut($ns, 'k', 'b', Expiry::forever(), expect: 0, required: true);
            $this->fail('a lost required put did not throw');
        } catch (PreconditionFailedException $e) {
            $this->assertSame(200, $e->status);
            $this->assertSame('kv_precondition', $e->errorCode);
            $this->assertSame('exists', $e->kvReason);
            $this->assertSame(0, $e->failedIndex);
            $this->assertSame($v1, $e->version);
            $this->assertSame('a', $e->value);
        }
        $lost = $c->kvPut($ns, 'k', 'b', Expiry::forever(), expect: 0);
        $this->assertFalse($lost['applied']);
        $this->assertSame('exists', $lost['reason']);
    }

    /** clients/API.md, "Expiry": there is no Expiry::none(); a ttl of 0 or below never leaves the client. */
    public function testBadTtlNeverLeavesTheClient(): void
    {
        $this->assertFalse(method_exists(Expiry::class, 'none'));
        foreach ([0, -1, -5] as $bad) {
            try {
                Expiry::ttl($bad);
                $this->fail("ttl $bad was accepted");
            } catch (BadRequestException $e) {
                $this->assertSame([0, 'bad_argument', 'bad_request'], [$e->status, $e->errorCode, $e->kind()]);
                $this->assertStringContainsString('expiry: give ttl (seconds > 0) or forever', $e->getMessage());
            }
        }
    }

    public function testTransactionTakesMessagesAndTypedKvOps(): void
    {
        $c = self::client();
        $ns = self::ns();
        $q = 'php-tx-' . bin2hex(random_bytes(5));
        $c->push([['queue' => $q, 'payload' => 1, 'transactionId' => 't1']]);
        $popped = $c->pop($q, wait: true, timeoutMs: 5000);
        $m = $popped['messages'][0];
        $r = $c->transaction()->ack($m)->kvPutIfAbsent($ns, 'done', true, Expiry::forever())
            ->kvIncr($ns, 'n', 2, Expiry::ttl(3600), max: 10)->kvPut($ns, 'p', 'x', Expiry::forever())
            ->kvDelete($ns, 'nothing')->commit();
        $this->assertTrue($r['success'], Json::encode($r));
        $this->assertSame(2, $c->kvGet($ns, 'n')['value']);
        try {
            $c->kvPutIfAbsent($ns, 'done', 1, Expiry::forever(), true);
            $this->fail('a lost required put did not throw');
        } catch (PreconditionFailedException $e) {
            $this->assertSame('kv precondition failed at op 0: exists', $e->getMessage());
            $this->assertSame('precondition', $e->kind());
        }
    }

    public function testQueenUrlAndTheRetryHook(): void
    {
        $seen = [];
        putenv('QUEEN_URL=' . Harness::get()->deadUrl() . ', ' . Harness::get()->mainUrl());
        try {
            $c = new Client(null, ['onRetry' => function (int $n, QueenException $e, int $wait) use (&$seen) {
                $seen[] = [$n, $e->errorCode];
            }]);
            $c->health();
            $this->assertSame([[1, 'unreachable']], $seen);
            putenv('QUEEN_URL');
            $this->expectException(\InvalidArgumentException::class);
            new Client();
        } finally {
            putenv('QUEEN_URL');
        }
    }

    public function testRefusalsMapToClasses(): void
    {
        $c = self::client();
        try {
            $c->kvPut('Bad NS', 'k', 1, Expiry::forever());
            $this->fail('a bad namespace was accepted');
        } catch (BadRequestException $e) {
            $this->assertSame(400, $e->status);
            $this->assertSame('bad_request', $e->kind());
            $this->assertSame(1, $e->attempts);
        }
        $dead = self::client(['maxAttempts' => 2], Harness::get()->deadUrl());
        try {
            $dead->health();
            $this->fail('a dead URL answered');
        } catch (TransportException $e) {
            $this->assertSame(0, $e->status);
            $this->assertSame('unreachable', $e->errorCode);
            $this->assertSame(2, $e->attempts);
        }
    }

    public function testSilentPeerTimesOutAndOnlyReadsRetry(): void
    {
        // A listener that never answers: the kernel accepts, nobody reads.
        $server = stream_socket_server('tcp://127.0.0.1:0');
        $url = 'http://' . stream_socket_get_name($server, false);
        $c = self::client(['timeoutMs' => 300, 'maxAttempts' => 2], $url);
        try {
            $c->kvGet('ns', 'k');
            $this->fail('a silent peer answered');
        } catch (TransportException $e) {
            $this->assertSame('timeout', $e->errorCode);
            $this->assertSame(2, $e->attempts);
        }
        $before = $c->retries();
        try {
            $c->kvIncr('ns', 'n', 1, Expiry::forever());
            $this->fail('a silent peer answered');
        } catch (TransportException $e) {
            $this->assertSame('timeout', $e->errorCode);
            $this->assertSame(0, $c->retries() - $before); // an incr might have applied: never repeated
        }
        fclose($server);
    }

    public function testWithTimeoutBoundsOneCall(): void
    {
        $server = stream_socket_server('tcp://127.0.0.1:0');
        $url = 'http://' . stream_socket_get_name($server, false);
        $c = self::client(['timeoutMs' => 60000, 'maxAttempts' => 1], $url);
        $t0 = microtime(true);
        try {
            $c->withTimeout(200)->kvGet('ns', 'k');
            $this->fail('a silent peer answered');
        } catch (TransportException $e) {
            $this->assertSame('timeout', $e->errorCode);
        }
        $this->assertLessThan(10, microtime(true) - $t0);
        fclose($server);
    }

    public function testBearerTokenOnAnAuthenticatedBroker(): void
    {
        $b = Harness::get()->start(['QUEEN_AUTH=jwt', 'QUEEN_JWT_SECRET=' . self::SECRET, 'QUEEN_JWT_DEFAULT_TENANT=1']);
        try {
            $ns = self::ns();
            // With tokens tenancy is on: the test's own tenant, with its kv grant (the default
            // tenant's grant is another suite's business, so this test does not lean on it).
            $h = bin2hex(random_bytes(16));
            $tenant = sprintf('%s-%s-4%s-a%s-%s', substr($h, 0, 8), substr($h, 8, 4), substr($h, 13, 3),
                              substr($h, 17, 3), substr($h, 20, 12));
            Harness::get()->sql("INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ('$tenant', true)");
            $admin = self::client(['token' => self::mint(self::SECRET, 'admin', $tenant)], $b['url']);
            $this->assertTrue($admin->kvPut($ns, 'k', 1, Expiry::forever())['applied']);
            $this->assertSame(1, $admin->kvGet($ns, 'k')['value']);
            foreach ([null, self::mint('not-the-secret', 'admin')] as $token) {
                try {
                    self::client(['token' => $token], $b['url'])->kvGet($ns, 'k');
                    $this->fail('served without a valid token');
                } catch (AuthException $e) {
                    $this->assertSame(401, $e->status);
                    $this->assertSame(1, $e->attempts);
                }
            }
            $this->expectException(AuthException::class);
            self::client(['token' => self::mint(self::SECRET, 'read', $tenant)], $b['url'])->kvPut($ns, 'k', 2, Expiry::forever());
        } finally {
            Harness::get()->stop($b['id']);
            if (isset($tenant)) {
                Harness::get()->sql("DELETE FROM queen.kv_quota WHERE tenant_id = '$tenant'");
            }
        }
    }

    public function testScanIsAGeneratorReturningItsPages(): void
    {
        $c = self::client();
        $ns = self::ns();
        $c->kvApply(array_map(fn ($i) => ['op' => 'put', 'ns' => $ns, 'key' => "p/$i", 'value' => $i, 'forever' => true], range(0, 4)));
        $rows = $c->kvScan($ns, 'p/', 2);
        $keys = [];
        foreach ($rows as $row) {
            $keys[] = $row['key'];
        }
        $this->assertSame(['p/0', 'p/1', 'p/2', 'p/3', 'p/4'], $keys);
        $this->assertSame(3, $rows->getReturn());
    }

    public function testBuilderSharesOnePushOperation(): void
    {
        $tx = self::client()->transaction()
            ->push('q', 0.1)
            ->push('q', new Number('12345678901234567890'), 'p', 'id-2')
            ->kv(['op' => 'get', 'ns' => 'n', 'key' => 'k']);
        $b = $tx->bundle();
        $this->assertCount(1, $b['operations']);
        $this->assertCount(2, $b['operations'][0]['items']);
        $this->assertSame('{"operations":[{"type":"push","items":[{"queue":"q","payload":0.1},'
            . '{"queue":"q","partition":"p","payload":12345678901234567890,"transactionId":"id-2"}]}],'
            . '"kv":[{"op":"get","ns":"n","key":"k"}]}', \Queen\Json::encode($b));
    }

    public function testConsumeFailsAThrowingHandlerAndStopsOnSigterm(): void
    {
        $c = self::client();
        $q = 'q-' . Harness::token();
        $ns = self::ns();
        $c->push([['queue' => $q, 'payload' => ['n' => 1], 'transactionId' => "m-$ns"]]);
        $calls = 0;
        $data = [];
        $deadline = microtime(true) + 30;
        // The handler records and the test asserts afterwards: an assertion
        // thrown inside would only fail the delivery. The deadline ends the
        // loop if the stop under test never comes.
        $c->consume($q, function (array $m, $tx) use (&$calls, &$data, $ns): bool {
            $data[] = $m['data'];
            if (++$calls === 1) {
                throw new \RuntimeException('the first delivery fails');
            }
            $tx->kv(['op' => 'incr', 'ns' => $ns, 'key' => 'effect', 'delta' => 1, 'forever' => true]);
            posix_kill(posix_getpid(), SIGTERM); // a clean stop: this message still settles
            return true;
        }, ['pollMs' => 200, 'stop' => fn () => microtime(true) > $deadline]);
        $this->assertLessThan($deadline, microtime(true), 'SIGTERM did not stop the loop');
        $this->assertSame([['n' => 1], ['n' => 1]], $data);
        $this->assertSame(2, $calls);
        $this->assertSame(1, $c->kvGet($ns, 'effect')['value']);
        $this->assertNull($c->pop($q));
        // The loop's SIGTERM handler is gone again.
        $this->assertSame(SIG_DFL, pcntl_signal_get_handler(SIGTERM));
    }

    public function testConsumeThrowsARefusedPop(): void
    {
        $this->expectException(BadRequestException::class);
        self::client()->consume(str_repeat('x', 300), fn () => true, ['pollMs' => 100]);
    }

    public function testExampleConsumerCountsEachOrderOnce(): void
    {
        $c = self::client();
        $q = 'orders-' . Harness::token();
        $count = fn () => $c->kvGet('orders', 'count')['value'] ?? 0;
        $before = $count();
        $c->push([['queue' => $q, 'payload' => ['order' => 1], 'transactionId' => "$q-1"],
                  ['queue' => $q, 'payload' => ['order' => 0.1], 'transactionId' => "$q-2"]]);
        // timeout: a consumer that never stops fails the test instead of hanging it.
        $cmd = ['timeout', '60', PHP_BINARY, dirname(__DIR__) . '/examples/consumer.php', Harness::get()->mainUrl(), $q, '2'];
        $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        $this->assertSame(0, proc_close($proc), $err);
        $this->assertStringContainsString("$q-1 {\"order\":1}", $out);
        $this->assertStringContainsString("$q-2 {\"order\":0.1}", $out);
        $this->assertSame($before + 2, $count());
    }
}
