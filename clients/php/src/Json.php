<?php

declare(strict_types=1);

namespace Queen;

/**
 * The client's JSON codec: lossless for numbers. ext-json would turn
 * 12345678901234567890 into a float (or, with JSON_BIGINT_AS_STRING, into
 * a string, which then goes back as a string), so decode keeps every
 * number whose native value would not write back as the same text as a
 * Queen\Number. An int stays an int, 0.1 stays a float (its shortest text
 * is "0.1"), and encode(decode(t)) gives t's numbers byte for byte.
 *
 * Objects decode to associative arrays (the default) or, with $assoc
 * false, to stdClass, which also keeps {} apart from [].
 */
final class Json
{
    /** @throws \JsonException on text that is not one JSON value */
    public static function decode(string $text, bool $assoc = true): mixed
    {
        $p = new JsonParser($text, $assoc);
        return $p->parseDocument();
    }

    /** @throws \JsonException on a value JSON cannot hold (NAN, INF, a resource) */
    public static function encode(mixed $v): string
    {
        if ($v === null) {
            return 'null';
        }
        if (is_bool($v)) {
            return $v ? 'true' : 'false';
        }
        if (is_int($v)) {
            return (string) $v;
        }
        if (is_float($v)) {
            return self::float($v);
        }
        if (is_string($v)) {
            return json_encode($v, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_THROW_ON_ERROR);
        }
        if ($v instanceof Number) {
            return $v->text;
        }
        if ($v instanceof RawJson) {
            return $v->text;
        }
        if (is_array($v) && array_is_list($v)) {
            return '[' . implode(',', array_map([self::class, 'encode'], $v)) . ']';
        }
        if (is_array($v) || $v instanceof \stdClass) {
            $parts = [];
            foreach ((array) $v as $k => $x) {
                $parts[] = self::encode((string) $k) . ':' . self::encode($x);
            }
            return '{' . implode(',', $parts) . '}';
        }
        if ($v instanceof \JsonSerializable) {
            return self::encode($v->jsonSerialize());
        }
        throw new \JsonException('cannot encode a value of type ' . get_debug_type($v));
    }

    /**
     * The shortest text that reads back as the same float, always with a
     * fraction or an exponent so it decodes as a float again (1.0, not 1).
     */
    public static function float(float $f): string
    {
        if (!is_finite($f)) {
            throw new \JsonException('JSON has no NAN or INF');
        }
        for ($p = 1; $p <= 17; $p++) {
            $s = sprintf("%.{$p}G", $f);
            if ((float) $s === $f) {
                break;
            }
        }
        if (strpbrk($s, '.E') === false) {
            $s .= '.0';
        }
        return $s;
    }

    /** Exact decimal equality of two number texts (1 == 1.0 == 10E-1), never through a float. */
    public static function numbersEqual(string $a, string $b): bool
    {
        return self::canonical($a) === self::canonical($b);
    }

    /** sign, significant digits, and the power of ten of the last one: one text per value. */
    private static function canonical(string $t): string
    {
        if (preg_match('/\A(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?\z/', $t, $m) !== 1) {
            return "nan:$t";
        }
        $frac = $m[3] ?? '';
        $digits = ltrim($m[2] . $frac, '0');
        if ($digits === '') {
            return '0';
        }
        $exp = (int) ($m[4] ?? '0') - strlen($frac);
        $significant = rtrim($digits, '0');
        $exp += strlen($digits) - strlen($significant);
        return ($m[1] === '-' ? '-' : '') . $significant . 'e' . $exp;
    }
}
