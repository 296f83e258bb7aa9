<?php

declare(strict_types=1);

namespace Queen\Tests;

use PHPUnit\Framework\TestCase;
use Queen\Client;
use Queen\Exception\QueenException;
use Queen\Expiry;
use Queen\Json;
use Queen\Number;

/**
 * The conformance runner of the PHP client: every scenario of
 * clients/conformance/scenarios (that folder's README is the contract), one
 * test each, through Queen\Client against real brokers from the harness.
 * Scenarios and results are decoded losslessly (objects as stdClass,
 * numbers that a native type would change as Queen\Number), so number
 * patterns compare decimal texts and "$raw" sees the exact number text.
 */
final class ConformanceTest extends TestCase
{
    /** @var list<int> brokers started for the running scenario */
    private array $brokers = [];
    private ?string $tenant = null;

    public static function scenarios(): array
    {
        $dir = getenv('QUEEN_CONFORMANCE_DIR') ?: dirname(__DIR__, 2) . '/conformance/scenarios';
        $files = glob("$dir/*.json");
        sort($files, SORT_STRING);
        $out = [];
        foreach ($files as $f) {
            foreach (Json::decode(file_get_contents($f), false)->scenarios as $sc) {
                $out[$sc->name] = [$sc];
            }
        }
        return $out;
    }

    protected function tearDown(): void
    {
        foreach ($this->brokers as $id) {
            Harness::get()->stop($id);
        }
        $this->brokers = [];
        if ($this->tenant !== null) {
            Harness::get()->sql("DELETE FROM queen.kv_quota WHERE tenant_id = '{$this->tenant}'");
            $this->tenant = null;
        }
    }

    /** @dataProvider scenarios */
    public function testScenario(\stdClass $sc): void
    {
        $urls = $this->world($sc->needs ?? null);
        $co = $sc->client ?? new \stdClass();
        $client = new Client($urls, [
            'maxAttempts' => $co->max_attempts ?? 3,
            'backoffMs' => $co->backoff_ms ?? 50,
            'maxBackoffMs' => $co->max_backoff_ms ?? 2000,
            'timeoutMs' => $co->timeout_ms ?? 10000,
            'assoc' => false,
        ]);
        $vars = ['run' => Harness::token()];
        if ($this->tenant !== null) {
            $vars['tenant'] = $this->tenant;
        }
        foreach ($sc->steps as $i => $step) {
            if (isset($step->harness)) {
                $b = $step->broker ?? 0;
                $this->assertTrue($step->harness === 'stop_broker' && isset($this->brokers[$b]),
                    "step $i: harness {$step->harness} broker $b is not something this runner can do");
                Harness::get()->stop($this->brokers[$b]);
                continue;
            }
            $where = "step $i ({$step->call})";
            $args = self::subst($step->args ?? new \stdClass(), $vars);
            $expect = self::subst($step->expect ?? new \stdClass(), $vars);
            $before = $client->retries();
            $failed = false;
            try {
                $got = $this->call($client, $step->call, $args);
            } catch (QueenException $e) {
                $failed = true;
                $got = (object) $e->toArray();
            }
            $retries = $client->retries() - $before;
            $text = Json::encode($got);
            if (property_exists($expect, 'error')) {
                $this->assertTrue($failed, "$where: succeeded with $text, expected an error");
                $why = self::match($expect->error, $got, true, '');
                $this->assertSame('', $why, "$where: error $why: $text");
            } else {
                $this->assertFalse($failed, "$where: failed with $text");
                if (property_exists($expect, 'result')) {
                    $why = self::match($expect->result, $got, true, '');
                    $this->assertSame('', $why, "$where: result $why: $text");
                }
            }
            if (isset($step->retries)) {
                $this->assertSame($step->retries, $retries, "$where: retries");
            }
            foreach ((array) ($step->save ?? []) as $name => $pointer) {
                [$found, $v] = self::pointer($got, $pointer);
                $this->assertTrue($found, "$where: save $name: nothing at $pointer in $text");
                $vars[$name] = $v;
            }
        }
    }

    // ---- needs ----------------------------------------------------------------------------

    /** @return list<string> the client's URLs */
    private function world(?\stdClass $needs): array
    {
        $h = Harness::get();
        if ($needs === null) {
            return [$h->mainUrl()];
        }
        if (isset($needs->noBroker)) {
            return [$h->deadUrl()];
        }
        if (isset($needs->saturated)) {
            $b = $h->command('saturate');
            $this->brokers[] = $b['id'];
            return [$b['url']];
        }
        if (isset($needs->quota)) {
            // A fresh tenant per scenario: its quota row is its own.
            $this->tenant = '00000000-0000-4000-8000-' . bin2hex(random_bytes(6));
            $cols = $vals = '';
            foreach ((array) $needs->quota as $col => $v) {
                $cols .= ", $col";
                $vals .= ', ' . Json::encode($v);
            }
            $h->sql("INSERT INTO queen.kv_quota (tenant_id, enabled$cols) VALUES ('{$this->tenant}', true$vals)");
            $b = $h->start(['QUEEN_TENANCY_HEADER=1', 'QUEEN_TRUSTED_PROXY=1']);
            $this->brokers[] = $b['id'];
            return [$b['url']];
        }
        $urls = isset($needs->deadUrlFirst) ? [$h->deadUrl()] : [];
        $n = $needs->brokers ?? 0;
        for ($i = 0; $i < $n; $i++) {
            $b = $h->start();
            $this->brokers[] = $b['id'];
            $urls[] = $b['url'];
        }
        return $n > 0 ? $urls : [...$urls, $h->mainUrl()];
    }

    // ---- variables -------------------------------------------------------------------------

    private static function varText(mixed $v): string
    {
        return is_string($v) ? $v : Json::encode($v);
    }

    private static function substString(string $s, array $vars): mixed
    {
        if (preg_match('/\A\$\{([^}]*)\}\z/', $s, $m) === 1) {
            self::assertArrayHasKey($m[1], $vars, "unknown variable $s");
            return $vars[$m[1]];
        }
        return preg_replace_callback('/\$\{([^}]*)\}/', function (array $m) use ($vars, $s): string {
            self::assertArrayHasKey($m[1], $vars, "unknown variable in $s");
            return self::varText($vars[$m[1]]);
        }, $s);
    }

    private static function subst(mixed $v, array $vars): mixed
    {
        if (is_string($v)) {
            return self::substString($v, $vars);
        }
        if (is_array($v)) {
            return array_map(fn ($x) => self::subst($x, $vars), $v);
        }
        if ($v instanceof \stdClass) {
            $o = new \stdClass();
            foreach ((array) $v as $k => $x) {
                $o->{self::varText(self::substString((string) $k, $vars))} = self::subst($x, $vars);
            }
            return $o;
        }
        return $v;
    }

    // ---- patterns --------------------------------------------------------------------------

    private static function isNumber(mixed $v): bool
    {
        return is_int($v) || is_float($v) || $v instanceof Number;
    }

    private static function typeName(mixed $v): string
    {
        return match (true) {
            $v === null => 'null',
            is_bool($v) => 'boolean',
            self::isNumber($v) => 'number',
            is_string($v) => 'string',
            is_array($v) => 'array',
            default => 'object',
        };
    }

    private static function equal(mixed $a, mixed $b): bool
    {
        if (self::typeName($a) !== self::typeName($b)) {
            return false;
        }
        if (self::isNumber($a)) {
            return Json::numbersEqual(Json::encode($a), Json::encode($b));
        }
        if (is_array($a)) {
            if (count($a) !== count($b)) {
                return false;
            }
            foreach ($a as $i => $x) {
                if (!self::equal($x, $b[$i])) {
                    return false;
                }
            }
            return true;
        }
        if ($a instanceof \stdClass) {
            $a = (array) $a;
            $b = (array) $b;
            if (count($a) !== count($b)) {
                return false;
            }
            foreach ($a as $k => $x) {
                if (!array_key_exists($k, $b) || !self::equal($x, $b[$k])) {
                    return false;
                }
            }
            return true;
        }
        return $a === $b;
    }

    /** '' when pattern $p matches $v ($present false: the member is absent), else why not. */
    private static function match(mixed $p, mixed $v, bool $present, string $path): string
    {
        $at = fn (string $m) => 'at ' . ($path === '' ? '/' : $path) . ": $m";
        if ($p instanceof \stdClass && count((array) $p) === 1 && str_starts_with((string) array_key_first((array) $p), '$')) {
            $m = (string) array_key_first((array) $p);
            $arg = ((array) $p)[$m];
            if ($m === '$absent') {
                return $present ? $at('present, expected absent') : '';
            }
            if (!$present) {
                return $at('absent');
            }
            return match ($m) {
                '$any' => '',
                '$type' => $arg === self::typeName($v)
                    || ($arg === 'integer' && (is_int($v) || ($v instanceof Number && $v->isInteger())))
                    ? '' : $at(self::typeName($v) . ", expected $arg"),
                '$raw' => self::isNumber($v) && Json::encode($v) === $arg
                    ? '' : $at('raw text ' . Json::encode($v) . ", expected $arg"),
                '$len' => is_array($v) && Json::numbersEqual((string) count($v), Json::encode($arg))
                    ? '' : $at(Json::encode($v) . ' , expected length ' . Json::encode($arg)),
                '$ne' => !self::equal($arg, $v) ? '' : $at('equal to ' . Json::encode($v)),
                default => $at("unknown matcher $m"),
            };
        }
        if (!$present) {
            return $at('absent, expected ' . Json::encode($p));
        }
        if ($p instanceof \stdClass) {
            if (!$v instanceof \stdClass) {
                return $at(self::typeName($v) . ', expected an object');
            }
            foreach ((array) $p as $k => $x) {
                $why = self::match($x, $v->$k ?? null, property_exists($v, (string) $k), "$path/$k");
                if ($why !== '') {
                    return $why;
                }
            }
            return '';
        }
        if (is_array($p)) {
            if (!is_array($v) || count($v) !== count($p)) {
                return $at(Json::encode($v) . ', expected ' . count($p) . ' elements');
            }
            foreach ($p as $i => $x) {
                $why = self::match($x, $v[$i], true, "$path/$i");
                if ($why !== '') {
                    return $why;
                }
            }
            return '';
        }
        return self::equal($p, $v) ? '' : $at(Json::encode($v) . ', expected ' . Json::encode($p));
    }

    /** RFC 6901: [found, value]. */
    private static function pointer(mixed $v, string $ptr): array
    {
        if ($ptr === '') {
            return [true, $v];
        }
        foreach (array_slice(explode('/', $ptr), 1) as $tok) {
            $tok = str_replace(['~1', '~0'], ['/', '~'], $tok);
            if ($v instanceof \stdClass && property_exists($v, $tok)) {
                $v = $v->$tok;
            } elseif (is_array($v) && ctype_digit($tok) && array_key_exists((int) $tok, $v)) {
                $v = $v[(int) $tok];
            } else {
                return [false, null];
            }
        }
        return [true, $v];
    }

    // ---- the calls ------------------------------------------------------------------------

    /** The scenario's expiry. Neither, or both, has no Expiry value: Expiry::ttl(0)'s refusal, as every client's. */
    private static function expiry(\stdClass $a): Expiry
    {
        $forever = ($a->forever ?? false) === true;
        if ($forever && !isset($a->ttlSeconds)) {
            return Expiry::forever();
        }
        return Expiry::ttl(!$forever && isset($a->ttlSeconds) ? (int) $a->ttlSeconds : 0);
    }

    private function call(Client $c, string $call, \stdClass $a): mixed
    {
        $t = $a->tenant ?? null;
        $req = ($a->required ?? false) === true;
        switch ($call) {
            case 'health':
                return $c->health();
            case 'kv_get':
                return $c->kvGet($a->ns, $a->key, $t);
            case 'kv_put':
                return $c->kvPut($a->ns, $a->key, $a->value ?? null, self::expiry($a), $a->expect ?? null, $req, $t);
            case 'kv_put_if_absent':
                return $c->kvPutIfAbsent($a->ns, $a->key, $a->value ?? null, self::expiry($a), $req, $t);
            case 'kv_delete':
                return $c->kvDelete($a->ns, $a->key, $a->expect ?? null, $req, $t);
            case 'kv_incr':
                return $c->kvIncr($a->ns, $a->key, $a->delta, self::expiry($a), $a->min ?? null, $a->max ?? null, $req, $t);
            case 'kv_get_many':
                return $c->kvGetMany($a->ns, $a->keys, $t);
            case 'kv_get_prefix':
                return $c->kvGetPrefix($a->ns, $a->prefix, $a->after ?? null, $a->limit ?? null, ($a->keysOnly ?? false) === true, $t);
            case 'kv_scan':
                $rows = $c->kvScan($a->ns, $a->prefix, $a->limit ?? null, false, $t);
                $keys = [];
                foreach ($rows as $row) {
                    $keys[] = $row->key;
                }
                return (object) ['keys' => $keys, 'pages' => $rows->getReturn()];
            case 'kv_apply':
                return $c->kvApply($a->ops, $t);
            case 'kv_namespaces':
                return $c->kvNamespaces($t);
            case 'push':
                return $c->push($a->items, $t);
            case 'pop':
                return $c->pop($a->queue, $a->partition ?? null, $a->group ?? null, $a->batch ?? null,
                    ($a->wait ?? false) === true, $a->timeoutMs ?? null, $a->leaseSeconds ?? null,
                    ($a->autoAck ?? false) === true, $t);
            case 'ack':
                return $c->ack($a->acks, $a->group ?? null, $t);
            case 'lease_extend':
                return $c->leaseExtend($a->leaseId, $a->seconds ?? 60, $t);
            case 'configure':
                return $c->configure($a->queue, $a->options ?? null, $a->namespace ?? null, $a->task ?? null, $t);
            case 'queues':
                return $c->queues($t);
            case 'queue_delete':
                return $c->queueDelete($a->queue, $t);
            case 'transaction':
                $tx = $c->transaction();
                foreach ($a->ops as $op) {
                    if (isset($op->ack)) {
                        $x = $op->ack;
                        $tx->ack($x->transactionId, $x->partitionId, $x->leaseId ?? null, $x->status ?? null, $x->consumerGroup ?? null);
                    } elseif (isset($op->push)) {
                        $x = $op->push;
                        $tx->push($x->queue, $x->payload ?? null, $x->partition ?? null, $x->transactionId ?? null);
                    } elseif (isset($op->kv)) {
                        $tx->kv($op->kv);
                    } else {
                        $this->fail('unknown transaction op ' . Json::encode($op));
                    }
                }
                foreach ($a->requiredLeases ?? [] as $l) {
                    $tx->requireLease($l);
                }
                return $tx->commit($t);
            case 'consume':
                return $this->consume($c, $a);
        }
        $this->fail("unknown call $call");
    }

    /**
     * The runner's handler. With concurrency the loop's workers are
     * processes, so what the handler counts goes through a shared file
     * (appended under a lock): "D <id>" per delivery, "H" handled, "F" failed.
     */
    private function consume(Client $c, \stdClass $a): \stdClass
    {
        $log = tempnam(sys_get_temp_dir(), 'queen-consume-');
        $h = $a->handler ?? new \stdClass();
        $stopAfter = $a->stopAfter ?? 1;
        $deadline = microtime(true) + ($a->timeoutMs ?? 30000) / 1000;
        $lines = function () use ($log): array {
            return file($log, FILE_IGNORE_NEW_LINES) ?: [];
        };
        $record = function (string $line) use ($log, $lines): array {
            $f = fopen($log, 'c+');
            flock($f, LOCK_EX);
            $before = $lines();
            fseek($f, 0, SEEK_END);
            fwrite($f, "$line\n");
            fflush($f);
            flock($f, LOCK_UN);
            fclose($f);
            return [...$before, $line];
        };
        $handler = function ($m, $tx) use ($record, $h): bool {
            $all = $record('D ' . $m->transactionId);
            $delivery = count(array_keys($all, 'D ' . $m->transactionId, true));
            if (isset($h->sleepMs)) {
                usleep($h->sleepMs * 1000); // the handler's work, not a wait for a condition
            }
            if (($h->failFirst ?? false) === true && $delivery === 1) {
                $record('F');
                return false;
            }
            if (isset($h->effect)) {
                $tx->kv($h->effect);
            }
            $record('H');
            return true;
        };
        $stop = function () use ($lines, $stopAfter, $deadline): bool {
            return count(array_keys($lines(), 'H', true)) >= $stopAfter || microtime(true) > $deadline;
        };
        try {
            $c->consume($a->queue, $handler, [
                'group' => $a->group ?? null,
                'tenant' => $a->tenant ?? null,
                'concurrency' => $a->concurrency ?? 1,
                'batch' => $a->batch ?? 1,
                'leaseSeconds' => $a->leaseSeconds ?? 30,
                'pollMs' => 300,
                'stop' => $stop,
            ]);
            $all = $lines();
        } finally {
            unlink($log);
        }
        $this->assertLessThanOrEqual($deadline, microtime(true), "consume did not stop within {$a->timeoutMs} ms");
        $deliveries = new \stdClass();
        foreach ($all as $l) {
            if (str_starts_with($l, 'D ')) {
                $id = substr($l, 2);
                $deliveries->$id = ($deliveries->$id ?? 0) + 1;
            }
        }
        return (object) [
            'handled' => count(array_keys($all, 'H', true)),
            'failed' => count(array_keys($all, 'F', true)),
            'deliveries' => $deliveries,
        ];
    }
}
