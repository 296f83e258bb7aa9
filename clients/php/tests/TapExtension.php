<?php

declare(strict_types=1);

namespace Queen\Tests;

use PHPUnit\Runner\AfterIncompleteTestHook;
use PHPUnit\Runner\AfterRiskyTestHook;
use PHPUnit\Runner\AfterSkippedTestHook;
use PHPUnit\Runner\AfterSuccessfulTestHook;
use PHPUnit\Runner\AfterTestErrorHook;
use PHPUnit\Runner\AfterTestFailureHook;

/** One TAP line per test, which scripts/test.sh counts. */
final class TapExtension implements AfterSuccessfulTestHook, AfterTestFailureHook, AfterTestErrorHook,
    AfterSkippedTestHook, AfterIncompleteTestHook, AfterRiskyTestHook
{
    private int $n = 0;

    private function line(string $verdict, string $test, string $note = ''): void
    {
        $this->n++;
        fwrite(STDOUT, "\n$verdict {$this->n} - $test" . ($note !== '' ? " # $note" : '') . "\n");
    }

    public function executeAfterSuccessfulTest(string $test, float $time): void
    {
        $this->line('ok', $test);
    }

    public function executeAfterTestFailure(string $test, string $message, float $time): void
    {
        $this->line('not ok', $test, strtok($message, "\n") ?: '');
    }

    public function executeAfterTestError(string $test, string $message, float $time): void
    {
        $this->line('not ok', $test, strtok($message, "\n") ?: '');
    }

    public function executeAfterSkippedTest(string $test, string $message, float $time): void
    {
        $this->line('ok', $test, 'SKIP ' . $message);
    }

    public function executeAfterIncompleteTest(string $test, string $message, float $time): void
    {
        $this->line('not ok', $test, 'incomplete ' . $message);
    }

    public function executeAfterRiskyTest(string $test, string $message, float $time): void
    {
        $this->line('not ok', $test, 'risky ' . $message);
    }
}
