<?php

declare(strict_types=1);

namespace Queen\Exception;

/**
 * A failed call: the broker's error envelope {error, code, reason, detail}
 * as it was sent, or the client's own failure (status 0, code unreachable,
 * timeout, transport or bad_response). Subclasses say which kind.
 */
class QueenException extends \RuntimeException
{
    /** clients/API.md's error kind; each subclass is one kind. */
    public const KIND = 'server';

    public function __construct(
        public readonly int $status,
        public readonly string $errorCode,
        public readonly string $reason,
        public readonly string $detail,
        public readonly int $retryAfter = 0,
        public readonly int $attempts = 1,
    ) {
        parent::__construct("$errorCode ($status): " . ($detail !== '' ? $detail : $reason));
    }

    /** bad_request, auth, not_found, conflict, precondition, rate_limited, unavailable, server or transport. */
    public function kind(): string
    {
        return static::KIND;
    }

    /** The members the conformance suite names (status, code, reason, detail, retryAfter, kind). */
    public function toArray(): array
    {
        return [
            'kind' => $this->kind(),
            'status' => $this->status,
            'code' => $this->errorCode,
            'reason' => $this->reason,
            'detail' => $this->detail,
            'retryAfter' => $this->retryAfter,
        ];
    }

    /** The class that fits an answer's status (and a verdict's members). */
    public static function fromAnswer(int $status, array $envelope, int $retryAfter, int $attempts): self
    {
        $code = (string) ($envelope['code'] ?? "http_$status");
        $reason = (string) ($envelope['reason'] ?? "http_$status");
        $detail = (string) ($envelope['detail'] ?? $envelope['error'] ?? "HTTP $status without the error envelope");
        $class = match (true) {
            $status === 401, $status === 403 => AuthException::class,
            $status === 404 => NotFoundException::class,
            $status === 409 => ConflictException::class,
            $status === 429 => RateLimitedException::class,
            $status === 503 => UnavailableException::class,
            $status >= 500 => ServerException::class,
            default => BadRequestException::class,
        };
        return new $class($status, $code, $reason, $detail, $retryAfter, $attempts);
    }
}
