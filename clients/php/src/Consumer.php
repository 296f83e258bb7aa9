<?php

declare(strict_types=1);

namespace Queen;

use Queen\Exception\QueenException;

/**
 * The consume loop behind Client::consume. It pops with a short long poll,
 * calls the handler once per message, and settles each message:
 *   the handler returned true: one transaction commits the ack together
 *     with whatever the handler added to $tx (pushes, kv ops), so the
 *     effect happens exactly once; a transaction that rolls back (a lost
 *     marker, a lease gone) fails the message like false;
 *   false, or an exception: an ack with status failed, so the broker
 *     redelivers it (up to the queue's retryLimit, then dead letters).
 *
 * PHP runs one handler at a time per process, so two things use processes
 * (ext-pcntl): while a handler runs, a forked renewer extends its lease
 * every third of leaseSeconds (a handler may block as long as it likes);
 * and concurrency N runs N worker processes, each its own loop. A
 * worker's handler changes its own process's memory only: share results
 * through the broker (the transaction) or the file system.
 *
 * Options: group, partition, tenant, concurrency (1), batch (1),
 * leaseSeconds (30), pollMs (1000: a worker's long poll, and so the
 * longest a stop waits), stop (a callable returning true to stop; it is
 * asked before every pop and after every message). SIGTERM and SIGINT
 * stop cleanly too: in-flight handlers finish and settle, then consume
 * returns. A pop the broker refuses (a 4xx) throws; unavailability is
 * waited out with a backoff.
 */
final class Consumer
{
    private $handler;
    private $stop;
    private bool $signalled = false;

    public function __construct(private readonly Client $client, private readonly string $queue, callable $handler,
                                private readonly array $o = [])
    {
        $this->handler = $handler;
        $this->stop = $o['stop'] ?? null;
    }

    public function run(): void
    {
        $concurrency = max(1, (int) ($this->o['concurrency'] ?? 1));
        if (!function_exists('pcntl_fork')) {
            if ($concurrency > 1) {
                throw new \RuntimeException('consume with concurrency above 1 needs ext-pcntl');
            }
            $this->loop(false);
            return;
        }
        $previous = $this->trapSignals();
        try {
            if ($concurrency === 1) {
                $this->loop(true);
                return;
            }
            $this->runWorkers($concurrency);
        } finally {
            foreach ($previous as $sig => $h) {
                pcntl_signal($sig, $h);
            }
        }
    }

    /** @return array<int, mixed> the handlers it replaced */
    private function trapSignals(): array
    {
        pcntl_async_signals(true);
        $previous = [];
        foreach ([SIGTERM, SIGINT] as $sig) {
            $previous[$sig] = pcntl_signal_get_handler($sig);
            pcntl_signal($sig, function () {
                $this->signalled = true;
            });
        }
        return $previous;
    }

    private function stopping(): bool
    {
        return $this->signalled || ($this->stop !== null && ($this->stop)() === true);
    }

    /** N worker processes; a refused pop in any of them stops all and is thrown here. */
    private function runWorkers(int $n): void
    {
        $children = [];
        for ($i = 0; $i < $n; $i++) {
            $pair = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
            $pid = pcntl_fork();
            if ($pid === -1) {
                throw new \RuntimeException('consume: fork failed');
            }
            if ($pid === 0) {
                fclose($pair[0]);
                $this->client->dropConnection();
                $failure = '';
                try {
                    $this->loop(true);
                } catch (QueenException $e) {
                    $failure = serialize($e->toArray());
                } catch (\Throwable $e) {
                    $failure = serialize(['status' => 0, 'code' => 'consume', 'reason' => 'consume', 'detail' => $e->getMessage(), 'retryAfter' => 0]);
                }
                fwrite($pair[1], $failure);
                fclose($pair[1]);
                self::vanish();
            }
            fclose($pair[1]);
            $children[$pid] = $pair[0];
        }
        $failure = null;
        while ($children !== []) {
            if ($this->stopping()) {
                foreach (array_keys($children) as $pid) {
                    posix_kill($pid, SIGTERM);
                }
            }
            foreach (array_keys($children) as $pid) {
                if (pcntl_waitpid($pid, $status, WNOHANG) !== $pid) {
                    continue;
                }
                $text = stream_get_contents($children[$pid]);
                fclose($children[$pid]);
                unset($children[$pid]);
                if ($text !== '' && $text !== false && $failure === null) {
                    $failure = unserialize($text);
                    $this->signalled = true; // the others stop too
                }
            }
            if ($children === []) {
                break;
            }
            // Wake when a child writes or exits (its socket closes), or to ask stop() again.
            $read = array_values($children);
            $w = $e = null;
            @stream_select($read, $w, $e, 0, 100000);
        }
        if ($failure !== null) {
            throw QueenException::fromAnswer((int) $failure['status'], $failure, (int) $failure['retryAfter'], 1);
        }
    }

    /** Ends a forked process at once: the parent's shutdown functions and destructors are not its to run. */
    private static function vanish(): never
    {
        posix_kill(posix_getpid(), SIGKILL);
        exit(0); // not reached
    }

    private function loop(bool $renew): void
    {
        $lease = max(1, (int) ($this->o['leaseSeconds'] ?? 30));
        $idleWait = 50;
        while (!$this->stopping()) {
            try {
                $body = $this->client->pop($this->queue, $this->o['partition'] ?? null, $this->o['group'] ?? null,
                    max(1, (int) ($this->o['batch'] ?? 1)), true, max(1, (int) ($this->o['pollMs'] ?? 1000)), $lease,
                    false, $this->o['tenant'] ?? null);
            } catch (QueenException $e) {
                if ($e->status >= 400 && $e->status < 500 && $e->status !== 408 && $e->status !== 429) {
                    throw $e;
                }
                usleep($idleWait * 1000); // unavailable: pop again, waiting longer each time up to 2 s
                $idleWait = min(2000, $idleWait * 2);
                continue;
            }
            $idleWait = 50;
            if ($body === null) {
                continue;
            }
            // Every message popped is handled, even after a stop: it is leased to us.
            foreach (Client::member($body, 'messages') ?? [] as $m) {
                $this->handleOne($m, $body, $renew ? $lease : 0);
            }
        }
    }

    private function handleOne(mixed $m, mixed $body, int $lease): void
    {
        $tid = Client::member($m, 'transactionId');
        $pid = Client::member($m, 'partitionId') ?? Client::member($body, 'partitionId');
        $leaseId = Client::member($m, 'leaseId') ?? Client::member($body, 'leaseId');
        if (!is_string($tid) || !is_string($pid)) {
            return; // not a message this loop can settle; its lease runs out
        }
        $group = $this->o['group'] ?? null;
        $tx = $this->client->transaction()->ack($tid, $pid, $leaseId, null, $group);
        $renewer = $lease > 0 && is_string($leaseId) ? $this->startRenewer($leaseId, $lease) : 0;
        try {
            $handled = ($this->handler)($m, $tx) === true;
        } catch (\Throwable) {
            $handled = false;
        } finally {
            if ($renewer > 0) {
                posix_kill($renewer, SIGKILL);
                pcntl_waitpid($renewer, $status);
            }
        }
        $settled = false;
        if ($handled) {
            try {
                $settled = Client::member($tx->commit($this->o['tenant'] ?? null), 'success') === true;
            } catch (QueenException) {
                $settled = false;
            }
        }
        if (!$settled) {
            $ack = ['transactionId' => $tid, 'partitionId' => $pid, 'status' => 'failed', 'error' => 'handler failed'];
            if (is_string($leaseId)) {
                $ack['leaseId'] = $leaseId;
            }
            try {
                $this->client->ack([$ack], $group, $this->o['tenant'] ?? null);
            } catch (QueenException) {
                // Best effort: if it is lost, the lease expires and the message comes back anyway.
            }
        }
    }

    /** A child that extends the lease every third of its length until killed. */
    private function startRenewer(string $leaseId, int $lease): int
    {
        $parent = posix_getpid();
        $pid = pcntl_fork();
        if ($pid !== 0) {
            return max(0, $pid);
        }
        foreach ([SIGTERM, SIGINT] as $sig) {
            pcntl_signal($sig, SIG_DFL);
        }
        $this->client->dropConnection();
        $every = max(200, intdiv($lease * 1000, 3));
        while (posix_getppid() === $parent) {
            usleep($every * 1000);
            try {
                $this->client->leaseExtend($leaseId, $lease, $this->o['tenant'] ?? null);
            } catch (QueenException) {
                // The next round tries again; the handler's commit says whether the lease held.
            }
        }
        self::vanish();
    }
}
