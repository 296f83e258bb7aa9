<?php

declare(strict_types=1);

namespace Queen\Exception;

/** 409: a transaction id seen before, a lease not held. */
class ConflictException extends QueenException
{
    /** clients/API.md's error kind. */
    public const KIND = 'conflict';
}
