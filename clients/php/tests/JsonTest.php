<?php

declare(strict_types=1);

namespace Queen\Tests;

use PHPUnit\Framework\TestCase;
use Queen\Json;
use Queen\Number;

/** The lossless codec, without a broker. */
final class JsonTest extends TestCase
{
    public function testNumbersWriteBackAsTheirText(): void
    {
        $text = '{"a":[0.1,12345678901234567890,1E+2,-0.0,1.0,-5,9223372036854775807,9223372036854775808,'
            . '0.10000000000000001,2.5e-3,-0],"s":"\u00e9\n\"x\"/","e":{},"l":[]}';
        $v = Json::decode($text, false);
        $this->assertSame(0.1, $v->a[0]);
        $this->assertInstanceOf(Number::class, $v->a[1]);
        $this->assertSame('12345678901234567890', $v->a[1]->text);
        $this->assertSame(-5, $v->a[5]);
        $this->assertSame(PHP_INT_MAX, $v->a[6]);
        $this->assertInstanceOf(Number::class, $v->a[7]);
        $this->assertInstanceOf(Number::class, $v->a[8]); // a float would print 0.1
        $this->assertSame("\u{e9}\n\"x\"/", $v->s);
        $this->assertEquals(new \stdClass(), $v->e);
        $this->assertSame([], $v->l);
        $this->assertSame(
            '{"a":[0.1,12345678901234567890,1E+2,-0.0,1.0,-5,9223372036854775807,9223372036854775808,'
            . '0.10000000000000001,2.5e-3,-0],"s":"é\n\"x\"/","e":{},"l":[]}',
            Json::encode($v),
        );
    }

    public function testAssocModeGivesArrays(): void
    {
        $v = Json::decode('{"found":true,"value":{"n":0.1}}');
        $this->assertSame(['found' => true, 'value' => ['n' => 0.1]], $v);
        $this->assertSame('{"found":true,"value":{"n":0.1}}', Json::encode($v));
    }

    public function testFloatsTakeTheirShortestText(): void
    {
        $this->assertSame('0.1', Json::float(0.1));
        $this->assertSame('1.0', Json::float(1.0));
        $this->assertSame('-0.0', Json::float(-0.0));
        $this->assertSame('0.30000000000000004', Json::float(0.1 + 0.2));
        $this->assertSame(1e300, Json::decode(Json::float(1e300)));
        $this->expectException(\JsonException::class);
        Json::float(NAN);
    }

    public function testNumberEqualityIsDecimal(): void
    {
        $this->assertTrue(Json::numbersEqual('1', '1.0'));
        $this->assertTrue(Json::numbersEqual('100', '1E+2'));
        $this->assertTrue(Json::numbersEqual('0.5', '5e-1'));
        $this->assertTrue(Json::numbersEqual('12345678901234567890', '1.234567890123456789E19'));
        $this->assertFalse(Json::numbersEqual('12345678901234567890', '12345678901234567891'));
        $this->assertFalse(Json::numbersEqual('0.1', '0.10000000000000001'));
        $this->assertFalse(Json::numbersEqual('-1', '1'));
    }

    /** @dataProvider badTexts */
    public function testBadTextIsRefused(string $text): void
    {
        $this->expectException(\JsonException::class);
        Json::decode($text);
    }

    public static function badTexts(): array
    {
        return ['empty' => [''], 'trailing' => ['1 2'], 'open' => ['{"a":1'], 'bare' => ['{a:1}'],
                'leading zero' => ['01'], 'bad escape' => ['"\\x"'], 'nan' => ['NaN'], 'comma' => ['[1,]']];
    }

    public function testNumberRefusesWhatIsNotANumber(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        new Number('1e');
    }
}
