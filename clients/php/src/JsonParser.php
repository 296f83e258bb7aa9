<?php

declare(strict_types=1);

namespace Queen;

/**
 * The recursive-descent reader behind Json::decode. Strings are decoded
 * by ext-json (one token at a time); numbers are judged here, from their
 * text, so none is carried through a type that would change it.
 * @internal
 */
final class JsonParser
{
    private int $i = 0;
    private int $n;
    private int $depth = 0;

    private const MAX_DEPTH = 512;

    public function __construct(private readonly string $s, private readonly bool $assoc)
    {
        $this->n = strlen($s);
    }

    public function parseDocument(): mixed
    {
        $v = $this->value();
        $this->ws();
        if ($this->i !== $this->n) {
            $this->fail('text after the value');
        }
        return $v;
    }

    private function fail(string $why): never
    {
        throw new \JsonException("bad JSON at byte {$this->i}: $why");
    }

    private function ws(): void
    {
        $this->i += strspn($this->s, " \t\r\n", $this->i);
    }

    private function value(): mixed
    {
        $this->ws();
        if ($this->i >= $this->n) {
            $this->fail('unexpected end');
        }
        $c = $this->s[$this->i];
        switch ($c) {
            case '{':
                return $this->object();
            case '[':
                return $this->array();
            case '"':
                return $this->string();
            case 't':
                return $this->word('true', true);
            case 'f':
                return $this->word('false', false);
            case 'n':
                return $this->word('null', null);
        }
        return $this->number();
    }

    private function word(string $w, mixed $v): mixed
    {
        if (substr_compare($this->s, $w, $this->i, strlen($w)) !== 0) {
            $this->fail("expected $w");
        }
        $this->i += strlen($w);
        return $v;
    }

    private function string(): string
    {
        $start = $this->i;
        $j = $this->i + 1;
        for (;;) {
            $j += strcspn($this->s, "\"\\", $j);
            if ($j >= $this->n) {
                $this->fail('unterminated string');
            }
            if ($this->s[$j] === '"') {
                break;
            }
            $j += 2; // a backslash and the character it escapes
        }
        $this->i = $j + 1;
        try {
            return json_decode(substr($this->s, $start, $j + 1 - $start), false, 1, JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            $this->i = $start;
            $this->fail('bad string: ' . $e->getMessage());
        }
    }

    private function number(): int|float|Number
    {
        if (preg_match('/-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/A', $this->s, $m, 0, $this->i) !== 1) {
            $this->fail('unexpected character');
        }
        $t = $m[0];
        $this->i += strlen($t);
        // A native value only when it writes back as the same text.
        if (strpbrk($t, '.eE') === false) {
            $int = (int) $t;
            return (string) $int === $t ? $int : new Number($t);
        }
        $f = (float) $t;
        return is_finite($f) && Json::float($f) === $t ? $f : new Number($t);
    }

    private function array(): array
    {
        $this->enter();
        $this->i++;
        $out = [];
        $this->ws();
        if ($this->i < $this->n && $this->s[$this->i] === ']') {
            $this->i++;
            $this->depth--;
            return $out;
        }
        for (;;) {
            $out[] = $this->value();
            $this->ws();
            $c = $this->s[$this->i] ?? '';
            $this->i++;
            if ($c === ']') {
                break;
            }
            if ($c !== ',') {
                $this->i--;
                $this->fail('expected , or ]');
            }
        }
        $this->depth--;
        return $out;
    }

    private function object(): array|\stdClass
    {
        $this->enter();
        $this->i++;
        $out = [];
        $this->ws();
        if ($this->i < $this->n && $this->s[$this->i] === '}') {
            $this->i++;
            $this->depth--;
            return $this->assoc ? $out : new \stdClass();
        }
        for (;;) {
            $this->ws();
            if (($this->s[$this->i] ?? '') !== '"') {
                $this->fail('expected a member name');
            }
            $k = $this->string();
            $this->ws();
            if (($this->s[$this->i] ?? '') !== ':') {
                $this->fail('expected :');
            }
            $this->i++;
            $out[$k] = $this->value();
            $this->ws();
            $c = $this->s[$this->i] ?? '';
            $this->i++;
            if ($c === '}') {
                break;
            }
            if ($c !== ',') {
                $this->i--;
                $this->fail('expected , or }');
            }
        }
        $this->depth--;
        return $this->assoc ? $out : (object) $out;
    }

    private function enter(): void
    {
        if (++$this->depth > self::MAX_DEPTH) {
            $this->fail('nested too deep');
        }
    }
}
