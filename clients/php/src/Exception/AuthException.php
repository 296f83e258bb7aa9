<?php

declare(strict_types=1);

namespace Queen\Exception;

/** 401 and 403: the token is missing or bad, or may not make this call. */
class AuthException extends QueenException
{
    /** clients/API.md's error kind. */
    public const KIND = 'auth';
}
