<?php

declare(strict_types=1);

namespace Queen\Exception;

/** Another 5xx. */
class ServerException extends QueenException
{
    /** clients/API.md's error kind. */
    public const KIND = 'server';
}
