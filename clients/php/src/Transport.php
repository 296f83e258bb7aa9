<?php

declare(strict_types=1);

namespace Queen;

use Queen\Exception\PreconditionFailedException;
use Queen\Exception\QueenException;
use Queen\Exception\TransportException;

/**
 * One call to the broker with the retry rules, failover and the typed
 * error (clients/conformance/README.md, "Retry rules"). The curl handle is
 * kept for the client's life, so calls reuse one keep-alive connection.
 * @internal
 */
final class Transport
{
    private ?\CurlHandle $curl = null;
    private int $current = 0; // the URL that answered last
    private int $retries = 0;

    /** @param list<string> $urls */
    public function __construct(
        private readonly array $urls,
        private readonly ?string $token,
        private readonly int $maxAttempts,
        private readonly int $backoffMs,
        private readonly int $maxBackoffMs,
        private readonly int $timeoutMs,
        private readonly int $connectTimeoutMs,
        /** @var ?callable(int, QueenException, int): void called before every retry */
        private readonly mixed $onRetry = null,
    ) {
        if ($urls === []) {
            throw new \InvalidArgumentException('at least one broker URL (give urls, or set QUEEN_URL)');
        }
    }

    public function retries(): int
    {
        return $this->retries;
    }

    /** After a fork: the child must not speak on the parent's connection. */
    public function dropConnection(): void
    {
        $this->curl = null;
    }

    /**
     * A 2xx answer: [status, body text]. $safe: a repeat cannot harm, so a
     * 429, 503, timeout or broken connection is retried too.
     * @return array{int, string}
     */
    public function call(string $method, string $path, ?string $body, ?string $tenant, bool $safe, int $extraMs = 0,
                         ?int $timeoutMs = null): array
    {
        $this->curl ??= curl_init();
        $h = $this->curl;
        $url = $this->current;
        for ($attempt = 1;; $attempt++) {
            if ($attempt > 1) {
                $this->retries++;
            }
            $headers = ['Content-Type: application/json', 'Expect:'];
            if ($this->token !== null) {
                $headers[] = 'Authorization: Bearer ' . $this->token;
            }
            if ($tenant !== null && $tenant !== '') {
                $headers[] = 'x-queen-tenant: ' . $tenant;
            }
            $retryAfter = 0;
            curl_reset($h);
            curl_setopt_array($h, [
                CURLOPT_URL => $this->urls[$url] . $path,
                CURLOPT_CUSTOMREQUEST => $method,
                CURLOPT_HTTPHEADER => $headers,
                CURLOPT_RETURNTRANSFER => true,
                CURLOPT_NOSIGNAL => true,
                CURLOPT_TCP_NODELAY => true,
                CURLOPT_CONNECTTIMEOUT_MS => $this->connectTimeoutMs,
                CURLOPT_TIMEOUT_MS => ($timeoutMs ?? $this->timeoutMs) + $extraMs,
                CURLOPT_HEADERFUNCTION => function ($ch, string $line) use (&$retryAfter): int {
                    if (stripos($line, 'retry-after:') === 0) {
                        $retryAfter = max(0, (int) trim(substr($line, 12)));
                    }
                    return strlen($line);
                },
            ]);
            if ($body !== null) {
                curl_setopt($h, CURLOPT_POSTFIELDS, $body);
            }
            $text = curl_exec($h);
            $errno = curl_errno($h);
            $status = (int) curl_getinfo($h, CURLINFO_RESPONSE_CODE);
            $nextUrl = true;
            if ($errno !== 0) {
                // Nothing was sent without a connection: any call may go again.
                $noConnection = in_array($errno, [CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY], true);
                $code = $noConnection ? 'unreachable' : ($errno === CURLE_OPERATION_TIMEDOUT ? 'timeout' : 'transport');
                $error = new TransportException(0, $code, $code, $this->urls[$url] . ': ' . curl_error($h), 0, $attempt);
                $retry = $noConnection || $safe;
            } elseif ($status >= 200 && $status < 300) {
                $this->current = $url;
                return [$status, (string) $text];
            } else {
                $this->current = $url;
                try {
                    $envelope = Json::decode((string) $text);
                } catch (\JsonException) {
                    $envelope = null;
                }
                $error = QueenException::fromAnswer($status, is_array($envelope) && isset($envelope['code']) ? $envelope : [], $retryAfter, $attempt);
                $retry = ($status === 429 || $status === 503) && $safe;
                $nextUrl = $status !== 429; // a rate limit is the tenant's on every broker
            }
            if (!$retry || $attempt >= $this->maxAttempts) {
                throw $error;
            }
            $wait = $this->backoff($attempt);
            if ($error->retryAfter * 1000 > $wait) {
                $wait = $error->retryAfter * 1000;
            }
            $wait = min($wait, $this->maxBackoffMs);
            if ($nextUrl) {
                $url = ($url + 1) % count($this->urls);
            }
            if ($this->onRetry !== null) {
                ($this->onRetry)($attempt, $error, $wait);
            }
            usleep($wait * 1000);
        }
    }

    /** Full-jitter exponential backoff in [d/2, d], d doubling per attempt up to the cap. */
    private function backoff(int $attempt): int
    {
        $d = $this->backoffMs;
        for ($i = 1; $i < $attempt && $d < $this->maxBackoffMs; $i++) {
            $d *= 2;
        }
        $d = min($d, $this->maxBackoffMs);
        return intdiv($d, 2) + random_int(0, intdiv($d, 2));
    }

    /** A KV route's 200 verdict ({"ok":false,"reason":"kv_precondition",...}) as the typed error. */
    public static function verdict(mixed $o, int $attempts = 1): ?PreconditionFailedException
    {
        if ($o instanceof \stdClass) {
            $o = (array) $o;
        }
        if (!is_array($o) || ($o['ok'] ?? null) !== false || ($o['reason'] ?? null) !== 'kv_precondition') {
            return null;
        }
        $omitted = ($o['valueOmitted'] ?? false) === true;
        return new PreconditionFailedException(
            (int) ($o['failedIndex'] ?? 0),
            (string) ($o['kvReason'] ?? ''),
            $o['version'] ?? 0,
            $omitted ? null : ($o['value'] ?? null),
            $omitted,
            (int) ($o['valueBytes'] ?? 0),
            $attempts,
        );
    }
}
