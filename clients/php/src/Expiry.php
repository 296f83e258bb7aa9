<?php

declare(strict_types=1);

namespace Queen;

/**
 * Every KV write names its expiry: a ttl in seconds, or forever. The
 * client never picks one for you; Expiry::none() sends none at all, which
 * the broker refuses (kv_expiry_not_specified).
 */
final class Expiry
{
    private function __construct(public readonly ?int $ttlSeconds, public readonly bool $forever)
    {
    }

    public static function ttl(int $seconds): self
    {
        return new self($seconds, false);
    }

    public static function forever(): self
    {
        return new self(null, true);
    }

    public static function none(): self
    {
        return new self(null, false);
    }

    /** The op members it adds: ["forever" => true], ["ttlSeconds" => N] or none. */
    public function members(): array
    {
        if ($this->forever) {
            return ['forever' => true];
        }
        return $this->ttlSeconds !== null ? ['ttlSeconds' => $this->ttlSeconds] : [];
    }
}
