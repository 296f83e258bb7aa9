<?php

declare(strict_types=1);

namespace Queen;

use Queen\Exception\TransportException;

/**
 * The PHP client of Queen: KV with explicit expiry and CAS, batches,
 * prefix paging, messages (push, pop, ack, lease renewal), the
 * transaction builder and a consume loop, over HTTP to one or more brokers.
 *
 * The client validates nothing the broker validates: it shapes each call,
 * sends it, and hands back what the broker answered, decoded by
 * Queen\Json (numbers exact: 0.1 stays 0.1, 12345678901234567890 comes
 * back as a Queen\Number). Failures throw Queen\Exception\QueenException
 * subclasses mirroring the error envelope.
 *
 * Retries (only where a repeat is safe), failover across URLs, the bearer
 * token and timeouts follow clients/conformance/README.md.
 */
final class Client
{
    private Transport $transport;
    private bool $assoc;
    private ?string $tenant;
    /** withTimeout's bound on each attempt; null: the timeoutMs option. */
    private ?int $timeoutMs = null;

    /**
     * @param string|list<string>|null $urls broker base URLs, tried in order for failover; null: QUEEN_URL
     *   (a comma-separated list), as every Queen client reads it
     * @param array{token?: ?string, maxAttempts?: int, backoffMs?: int, maxBackoffMs?: int,
     *              timeoutMs?: int, connectTimeoutMs?: int, tenant?: ?string, assoc?: bool} $options
     *   token: sent as Authorization: Bearer; maxAttempts per call, the first included (3);
     *   backoffMs (50) and maxBackoffMs (5000): the jittered backoff and the cap of one wait;
     *   timeoutMs (30000): one attempt (a long poll adds its wait); connectTimeoutMs (3000);
     *   tenant: the default x-queen-tenant; assoc (true): objects as arrays, false: as stdClass;
     *   onRetry: callable(int $attempt, QueenException $e, int $waitMs) called before every retry.
     */
    public function __construct(string|array|null $urls = null, array $options = [])
    {
        $urls = $urls ?? array_filter(array_map('trim', explode(',', (string) getenv('QUEEN_URL'))), fn ($u) => $u !== '');
        $urls = array_values((array) $urls);
        $this->transport = new Transport(
            array_map(fn (string $u) => rtrim($u, '/'), $urls),
            $options['token'] ?? null,
            max(1, (int) ($options['maxAttempts'] ?? 3)),
            max(1, (int) ($options['backoffMs'] ?? 50)),
            max(1, (int) ($options['maxBackoffMs'] ?? 5000)),
            max(1, (int) ($options['timeoutMs'] ?? 30000)),
            max(1, (int) ($options['connectTimeoutMs'] ?? 3000)),
            $options['onRetry'] ?? null,
        );
        $this->assoc = (bool) ($options['assoc'] ?? true);
        $this->tenant = $options['tenant'] ?? null;
    }

    /**
     * This client, its connection and options shared, with each attempt of its calls bounded by $ms
     * instead of the timeoutMs option (a long poll adds its wait): a deadline for one call,
     * $c->withTimeout(2000)->kvGet($ns, $key). Past it the call throws TransportException timeout,
     * retried only when safe.
     */
    public function withTimeout(int $ms): static
    {
        $view = clone $this;
        $view->timeoutMs = max(1, $ms);
        return $view;
    }

    /** HTTP attempts beyond the first made by every call of this client so far. */
    public function retries(): int
    {
        return $this->transport->retries();
    }

    /** @internal the consume loop's forked processes */
    public function dropConnection(): void
    {
        $this->transport->dropConnection();
    }

    /** GET /health's body. */
    public function health(): mixed
    {
        return $this->send('GET', '/health', null, null, true);
    }

    // ---- KV -------------------------------------------------------------------------------

    /** The get element: found, and with a live key value, version and expiresAt. */
    public function kvGet(string $ns, string $key, ?string $tenant = null): mixed
    {
        return $this->kvAnswer($this->send('GET', self::keyPath($ns, $key), null, $tenant, true));
    }

    /**
     * @param ?int $expect the version the key must hold (0: absent); a lost
     *   condition answers applied=false, or with $required throws
     *   PreconditionFailedException. Never retried with $expect.
     */
    public function kvPut(string $ns, string $key, mixed $value, Expiry $expiry, ?int $expect = null,
                          bool $required = false, ?string $tenant = null): mixed
    {
        $body = ['value' => $value] + $expiry->members();
        if ($expect !== null) {
            $body['expect'] = $expect;
        }
        if ($required) {
            $body['required'] = true;
        }
        return $this->kvAnswer($this->send('PUT', self::keyPath($ns, $key), Json::encode($body), $tenant, $expect === null));
    }

    public function kvPutIfAbsent(string $ns, string $key, mixed $value, Expiry $expiry, bool $required = false,
                                  ?string $tenant = null): mixed
    {
        return $this->oneOp(self::writeOp('putIfAbsent', $ns, $key, $value, $expiry, null, $required), false, $tenant);
    }

    public function kvDelete(string $ns, string $key, ?int $expect = null, bool $required = false,
                             ?string $tenant = null): mixed
    {
        $body = [];
        if ($expect !== null) {
            $body['expect'] = $expect;
        }
        if ($required) {
            $body['required'] = true;
        }
        $text = $body === [] ? null : Json::encode($body);
        return $this->kvAnswer($this->send('DELETE', self::keyPath($ns, $key), $text, $tenant, $expect === null));
    }

    /** Adds delta (within min and max: applied=false, reason limit, past them). Never retried. */
    public function kvIncr(string $ns, string $key, int|float|Number $delta, Expiry $expiry,
                           int|float|Number|null $min = null, int|float|Number|null $max = null,
                           bool $required = false, ?string $tenant = null): mixed
    {
        return $this->oneOp(self::incrOp($ns, $key, $delta, $expiry, $min, $max, $required), false, $tenant);
    }

    /** @internal the wire ops the one-op calls and the transaction builder share */
    public static function writeOp(string $op, string $ns, string $key, mixed $value, Expiry $expiry, ?int $expect,
                                   bool $required): array
    {
        $o = ['op' => $op, 'ns' => $ns, 'key' => $key, 'value' => $value] + $expiry->members();
        if ($expect !== null) {
            $o['expect'] = $expect;
        }
        return $o + ($required ? ['required' => true] : []);
    }

    /** @internal */
    public static function incrOp(string $ns, string $key, int|float|Number $delta, Expiry $expiry,
                                  int|float|Number|null $min, int|float|Number|null $max, bool $required): array
    {
        $op = ['op' => 'incr', 'ns' => $ns, 'key' => $key, 'delta' => $delta];
        if ($min !== null) {
            $op['min'] = $min;
        }
        if ($max !== null) {
            $op['max'] = $max;
        }
        $op += $expiry->members();
        return $op + ($required ? ['required' => true] : []);
    }

    /** @param list<string> $keys  the getMany element: rows and missing. */
    public function kvGetMany(string $ns, array $keys, ?string $tenant = null): mixed
    {
        return $this->oneOp(['op' => 'getMany', 'ns' => $ns, 'keys' => array_values($keys)], true, $tenant);
    }

    /** One page: the getPrefix element (rows, truncated, nextAfter). */
    public function kvGetPrefix(string $ns, string $prefix, ?string $after = null, ?int $limit = null,
                                bool $keysOnly = false, ?string $tenant = null): mixed
    {
        $op = ['op' => 'getPrefix', 'ns' => $ns, 'prefix' => $prefix];
        if ($after !== null) {
            $op['after'] = $after;
        }
        if ($limit !== null) {
            $op['limit'] = $limit;
        }
        if ($keysOnly) {
            $op['keysOnly'] = true;
        }
        return $this->oneOp($op, true, $tenant);
    }

    /**
     * Every row under prefix in key order, page after page until a page is
     * not truncated. The generator's return value is the number of pages read.
     * @return \Generator<int, mixed, mixed, int>
     */
    public function kvScan(string $ns, string $prefix, ?int $pageLimit = null, bool $keysOnly = false,
                           ?string $tenant = null): \Generator
    {
        $after = null;
        for ($pages = 1;; $pages++) {
            $page = $this->kvGetPrefix($ns, $prefix, $after, $pageLimit, $keysOnly, $tenant);
            foreach (self::member($page, 'rows') ?? [] as $row) {
                yield $row;
            }
            $after = self::member($page, 'nextAfter');
            if (self::member($page, 'truncated') !== true || !is_string($after)) {
                return $pages;
            }
        }
    }

    /**
     * A batch in one transaction: the results, one per op, in order. A
     * required op that loses throws PreconditionFailedException (nothing of
     * the batch is written). Retried only when every op is a read or a put
     * or delete without expect.
     */
    public function kvApply(array $ops, ?string $tenant = null): array
    {
        $safe = true;
        foreach ($ops as $op) {
            $name = self::member($op, 'op');
            $safe = $safe && (in_array($name, ['get', 'getMany', 'getPrefix'], true)
                || (in_array($name, ['put', 'delete'], true) && self::member($op, 'expect') === null));
        }
        return $this->batch(Json::encode(array_values($ops)), $safe, $tenant);
    }

    public function kvNamespaces(?string $tenant = null): mixed
    {
        return $this->send('GET', '/api/v1/resources/kv/namespaces', null, $tenant, true);
    }

    // ---- messages ------------------------------------------------------------------------

    /**
     * @param list<array> $items push items (queue, partition?, payload, transactionId?)
     * Retried only when every item carries a transactionId (the broker answers a repeat "duplicate").
     */
    public function push(array $items, ?string $tenant = null): array
    {
        $safe = $items !== [];
        foreach ($items as $it) {
            $id = self::member($it, 'transactionId');
            $safe = $safe && is_string($id) && $id !== '';
        }
        return $this->send('POST', '/api/v1/push', Json::encode(['items' => array_values($items)]), $tenant, $safe);
    }

    /**
     * The pop body (messages, leaseId, partitionId), or null when nothing
     * was available. With $wait the call long-polls up to $timeoutMs.
     * Never retried: a lost answer's lease expires and the message returns.
     */
    public function pop(string $queue, ?string $partition = null, ?string $group = null, ?int $batch = null,
                        bool $wait = false, ?int $timeoutMs = null, ?int $leaseSeconds = null,
                        bool $autoAck = false, ?string $tenant = null): mixed
    {
        $path = '/api/v1/pop/queue/' . rawurlencode($queue);
        if ($partition !== null) {
            $path .= '/partition/' . rawurlencode($partition);
        }
        $q = [];
        if ($group !== null) {
            $q['consumerGroup'] = $group;
        }
        if ($batch !== null) {
            $q['batch'] = $batch;
        }
        if ($leaseSeconds !== null) {
            $q['leaseSeconds'] = $leaseSeconds;
        }
        if ($autoAck) {
            $q['autoAck'] = 'true';
        }
        $waitMs = 0;
        if ($wait) {
            $waitMs = $timeoutMs ?? 30000;
            $q['wait'] = 'true';
            $q['timeout'] = $waitMs;
        }
        if ($q !== []) {
            $path .= '?' . http_build_query($q, '', '&', PHP_QUERY_RFC3986);
        }
        [$status, $text] = $this->transport->call('GET', $path, null, $tenant ?? $this->tenant, false, $waitMs,
                                                   $this->timeoutMs);
        if ($status === 204 || $text === '') {
            return null;
        }
        return $this->decode($text);
    }

    /** @param list<array> $acks ack items (transactionId, partitionId, leaseId, status?, error?) */
    public function ack(array $acks, ?string $group = null, ?string $tenant = null): array
    {
        $body = ['acknowledgments' => array_values($acks)];
        if ($group !== null) {
            $body['consumerGroup'] = $group;
        }
        return $this->send('POST', '/api/v1/ack/batch', Json::encode($body), $tenant, true);
    }

    public function leaseExtend(string $leaseId, int $seconds, ?string $tenant = null): mixed
    {
        return $this->send('POST', '/api/v1/lease/' . rawurlencode($leaseId) . '/extend',
            Json::encode(['seconds' => $seconds]), $tenant, true);
    }

    public function configure(string $queue, array|\stdClass|null $options = null, ?string $namespace = null,
                              ?string $task = null, ?string $tenant = null): mixed
    {
        $body = ['queue' => $queue];
        if ($options !== null) {
            $body['options'] = $options === [] ? new \stdClass() : $options;
        }
        if ($namespace !== null) {
            $body['namespace'] = $namespace;
        }
        if ($task !== null) {
            $body['task'] = $task;
        }
        return $this->send('POST', '/api/v1/configure', Json::encode($body), $tenant, true);
    }

    public function queues(?string $tenant = null): mixed
    {
        return $this->send('GET', '/api/v1/resources/queues', null, $tenant, true);
    }

    public function queueDelete(string $queue, ?string $tenant = null): mixed
    {
        return $this->send('DELETE', '/api/v1/resources/queues/' . rawurlencode($queue), null, $tenant, true);
    }

    // ---- transactions and the consume loop ------------------------------------------------------

    /** A builder whose acks, pushes and kv ops commit together or not at all. */
    public function transaction(): Transaction
    {
        return new Transaction($this);
    }

    /**
     * Sends a bundle; the broker's 200 body (success true, or false when it
     * rolled back whole: not an exception). Retried only when it carries a
     * transactionId (an ack, or a pushed item with one).
     * @internal use transaction()->...->commit()
     */
    public function commitBundle(array $bundle, bool $carriesId, ?string $tenant): mixed
    {
        return $this->send('POST', '/api/v1/transaction', Json::encode($bundle), $tenant, $carriesId);
    }

    /**
     * Pops from a queue and calls $handler(message, Transaction $tx) once
     * per message until stopped; see Consumer for the options and the rules.
     */
    public function consume(string $queue, callable $handler, array $options = []): void
    {
        (new Consumer($this, $queue, $handler, $options))->run();
    }

    // ---- the plumbing -----------------------------------------------------------------------

    private function send(string $method, string $path, ?string $body, ?string $tenant, bool $safe): mixed
    {
        [, $text] = $this->transport->call($method, $path, $body, $tenant ?? $this->tenant, $safe, 0, $this->timeoutMs);
        return $this->decode($text);
    }

    private function decode(string $text): mixed
    {
        try {
            return Json::decode($text, $this->assoc);
        } catch (\JsonException $e) {
            throw new TransportException(200, 'bad_response', 'bad_response', 'the answer is not JSON: ' . $e->getMessage());
        }
    }

    /** A KV answer: the precondition verdict becomes the typed error. */
    private function kvAnswer(mixed $r): mixed
    {
        $verdict = Transport::verdict($r);
        if ($verdict !== null) {
            throw $verdict;
        }
        return $r;
    }

    private function batch(string $ops, bool $safe, ?string $tenant): array
    {
        $r = $this->kvAnswer($this->send('POST', '/api/v1/kv', $ops, $tenant, $safe));
        $results = self::member($r, 'results');
        if (!is_array($results)) {
            throw new TransportException(200, 'bad_response', 'bad_response', 'a kv batch answered without results');
        }
        return $results;
    }

    private function oneOp(array $op, bool $safe, ?string $tenant): mixed
    {
        $results = $this->batch('[' . Json::encode($op) . ']', $safe, $tenant);
        if (!array_key_exists(0, $results)) {
            throw new TransportException(200, 'bad_response', 'bad_response', 'a one-op batch answered no element');
        }
        return $results[0];
    }

    private static function keyPath(string $ns, string $key): string
    {
        return '/api/v1/kv/' . rawurlencode($ns) . '/' . rawurlencode($key);
    }

    /** A member of a decoded object, whichever way objects decode; null when absent. */
    public static function member(mixed $o, string $k): mixed
    {
        if (is_array($o)) {
            return $o[$k] ?? null;
        }
        if ($o instanceof \stdClass) {
            return $o->$k ?? null;
        }
        return null;
    }
}
