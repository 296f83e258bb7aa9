<?php

declare(strict_types=1);

namespace Queen;

/**
 * The transaction builder: acks, pushes and kv ops that commit in one
 * database transaction or not at all. Operations keep the order they were
 * added in (consecutive pushes share one push operation); kv ops follow
 * them in the results.
 */
final class Transaction
{
    private array $operations = [];
    private array $kv = [];
    private array $leases = [];
    private bool $openPush = false;
    private bool $carriesId = false;

    public function __construct(private readonly Client $client)
    {
    }

    /**
     * Settles a leased message: a popped message (its transactionId,
     * partitionId, leaseId), or its ids; status null: completed (or "failed"
     * to have it redelivered).
     */
    public function ack(string|array|\stdClass $transactionId, ?string $partitionId = null, ?string $leaseId = null,
                        ?string $status = null, ?string $consumerGroup = null): self
    {
        if (!is_string($transactionId)) {
            $m = (array) $transactionId;
            $transactionId = (string) ($m['transactionId'] ?? '');
            $partitionId ??= $m['partitionId'] ?? null;
            $leaseId ??= $m['leaseId'] ?? null;
            $consumerGroup ??= $m['consumerGroup'] ?? null;
        }
        if ($partitionId === null) {
            throw new \InvalidArgumentException('ack needs a partitionId (or a popped message)');
        }
        $op = ['type' => 'ack', 'transactionId' => $transactionId, 'partitionId' => $partitionId];
        if ($leaseId !== null) {
            $op['leaseId'] = $leaseId;
        }
        if ($status !== null) {
            $op['status'] = $status;
        }
        if ($consumerGroup !== null) {
            $op['consumerGroup'] = $consumerGroup;
        }
        $this->operations[] = $op;
        $this->openPush = false;
        $this->carriesId = true; // a repeat of a committed ack rolls back whole
        return $this;
    }

    public function push(string $queue, mixed $payload, ?string $partition = null, ?string $transactionId = null): self
    {
        $item = ['queue' => $queue];
        if ($partition !== null) {
            $item['partition'] = $partition;
        }
        $item['payload'] = $payload;
        if ($transactionId !== null) {
            $item['transactionId'] = $transactionId;
            $this->carriesId = true;
        }
        if ($this->openPush) {
            $this->operations[count($this->operations) - 1]['items'][] = $item;
        } else {
            $this->operations[] = ['type' => 'push', 'items' => [$item]];
            $this->openPush = true;
        }
        return $this;
    }

    /** One kv op (the wire's shape: op, ns, key, value, forever/ttlSeconds, expect, required, ...). */
    public function kv(array|\stdClass $op): self
    {
        $this->kv[] = $op;
        return $this;
    }

    /** The typed kv ops, as Client::kvPut and its siblings take them. */
    public function kvPut(string $ns, string $key, mixed $value, Expiry $expiry, ?int $expect = null,
                          bool $required = false): self
    {
        return $this->kv(Client::writeOp('put', $ns, $key, $value, $expiry, $expect, $required));
    }

    public function kvPutIfAbsent(string $ns, string $key, mixed $value, Expiry $expiry, bool $required = false): self
    {
        return $this->kv(Client::writeOp('putIfAbsent', $ns, $key, $value, $expiry, null, $required));
    }

    public function kvDelete(string $ns, string $key, ?int $expect = null, bool $required = false): self
    {
        $op = ['op' => 'delete', 'ns' => $ns, 'key' => $key];
        if ($expect !== null) {
            $op['expect'] = $expect;
        }
        return $this->kv($op + ($required ? ['required' => true] : []));
    }

    public function kvIncr(string $ns, string $key, int|float|Number $delta, Expiry $expiry,
                           int|float|Number|null $min = null, int|float|Number|null $max = null,
                           bool $required = false): self
    {
        return $this->kv(Client::incrOp($ns, $key, $delta, $expiry, $min, $max, $required));
    }

    /** The bundle rolls back unless this lease is still held at commit. */
    public function requireLease(string $leaseId): self
    {
        $this->leases[] = $leaseId;
        return $this;
    }

    /** The bundle as the broker takes it. */
    public function bundle(): array|\stdClass
    {
        $b = [];
        if ($this->operations !== []) {
            $b['operations'] = $this->operations;
        }
        if ($this->kv !== []) {
            $b['kv'] = $this->kv;
        }
        if ($this->leases !== []) {
            $b['requiredLeases'] = $this->leases;
        }
        return $b === [] ? new \stdClass() : $b;
    }

    /**
     * The broker's 200 body: success true with results, or success false
     * (rolled back whole: reason, failedIndex, ...). Refusals throw.
     */
    public function commit(?string $tenant = null): mixed
    {
        return $this->client->commitBundle($this->bundle(), $this->carriesId, $tenant);
    }
}
