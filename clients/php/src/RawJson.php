<?php

declare(strict_types=1);

namespace Queen;

/**
 * A JSON value given as text, sent exactly as it is (a value read from
 * elsewhere, say). Json::encode writes its text unchanged.
 */
final class RawJson implements \Stringable
{
    public function __construct(public readonly string $text)
    {
        Json::decode($text); // refuse text that is not one JSON value here, not at the broker
    }

    public function __toString(): string
    {
        return $this->text;
    }
}
