<?php

declare(strict_types=1);

namespace Queen;

/**
 * A JSON number kept as its text, for numbers a PHP int or float cannot
 * carry exactly (12345678901234567890, 1E+2, 0.10000000000000001).
 * Json::decode gives one where a native value would change the text, and
 * Json::encode writes it back byte for byte.
 */
final class Number implements \Stringable
{
    private const SHAPE = '/\A-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\z/';

    public function __construct(public readonly string $text)
    {
        if (preg_match(self::SHAPE, $text) !== 1) {
            throw new \InvalidArgumentException("not a JSON number: $text");
        }
    }

    public function __toString(): string
    {
        return $this->text;
    }

    /** The nearest float (lossy: for arithmetic, never for storage). */
    public function toFloat(): float
    {
        return (float) $this->text;
    }

    /** Whether the text is an integer (no fraction, no exponent). */
    public function isInteger(): bool
    {
        return strpbrk($this->text, '.eE') === false;
    }
}
