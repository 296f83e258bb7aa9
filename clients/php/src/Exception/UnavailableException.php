<?php

declare(strict_types=1);

namespace Queen\Exception;

/** 503: the broker or its database is busy or away; try again later. */
class UnavailableException extends QueenException
{
    /** clients/API.md's error kind. */
    public const KIND = 'unavailable';
}
