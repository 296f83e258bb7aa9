<?php

declare(strict_types=1);

namespace Queen\Exception;

/** 400 and 413: the input was refused; nothing was written. */
class BadRequestException extends QueenException
{
    /** clients/API.md's error kind. */
    public const KIND = 'bad_request';
}
