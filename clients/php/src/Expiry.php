<?php

declare(strict_types=1);

namespace Queen;

/**
 * Every KV write names its expiry: a ttl in seconds (> 0), or forever. It is
 * a required argument of every write and there is no "none", so a write
 * without one does not run; ttl(0) or below throws BadRequestException
 * (status 0, code bad_argument) before anything is sent (clients/API.md).
 */
final class Expiry
{
    private function __construct(public readonly ?int $ttlSeconds, public readonly bool $forever)
    {
    }

    public static function ttl(int $seconds): self
    {
        if ($seconds <= 0) {
            throw new Exception\BadRequestException(0, 'bad_argument', 'bad_argument',
                "expiry: give ttl (seconds > 0) or forever (ttl $seconds)", 0, 0);
        }
        return new self($seconds, false);
    }

    public static function forever(): self
    {
        return new self(null, true);
    }

    /** The op members it adds: ["forever" => true] or ["ttlSeconds" => N]. */
    public function members(): array
    {
        return $this->forever ? ['forever' => true] : ['ttlSeconds' => $this->ttlSeconds];
    }
}
