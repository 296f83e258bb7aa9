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

    /** Settles a leased message; status null: completed (or "failed" to have it redelivered). */
    public function ack(string $transactionId, string $partitionId, ?string $leaseId = null, ?string $status = null,
                        ?string $consumerGroup = null): self
    {
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
