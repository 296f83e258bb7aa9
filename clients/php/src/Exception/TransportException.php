<?php

declare(strict_types=1);

namespace Queen\Exception;

/** No whole HTTP answer (status 0): code unreachable (no URL took a connection), timeout, transport (the connection broke) or bad_response (the answer was not the route's JSON). */
class TransportException extends QueenException
{
    /** clients/API.md's error kind. */
    public const KIND = 'transport';
}
