<?php

declare(strict_types=1);

namespace Queen\Exception;

/** 429: the tenant's rate or quota; retryAfter says when to come back. */
class RateLimitedException extends QueenException
{
    /** clients/API.md's error kind. */
    public const KIND = 'rate_limited';
}
