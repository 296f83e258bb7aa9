<?php

declare(strict_types=1);

namespace Queen\Exception;

/** 404: no such queue, lease or route. */
class NotFoundException extends QueenException
{
    /** clients/API.md's error kind. */
    public const KIND = 'not_found';
}
