<?php

declare(strict_types=1);

namespace Queen\Tests;

use Queen\Json;

/**
 * The broker world for the PHP tests: a tests/client/conformance_harness
 * child ($QUEEN_CONFORMANCE_HARNESS, set by scripts/test.sh) that starts
 * brokers on the private PostgreSQL, one command line in, one JSON line out.
 */
final class Harness
{
    private static ?self $instance = null;
    /** @var resource */
    private $proc;
    /** @var array<int, resource> */
    private array $pipes = [];
    private ?string $mainUrl = null;

    public static function get(): self
    {
        return self::$instance ??= new self();
    }

    private function __construct()
    {
        $bin = getenv('QUEEN_CONFORMANCE_HARNESS');
        if ($bin === false || !is_executable($bin)) {
            throw new \RuntimeException('QUEEN_CONFORMANCE_HARNESS is not set: run through scripts/test.sh');
        }
        $this->proc = proc_open([$bin], [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], $this->pipes);
        if (!is_resource($this->proc)) {
            throw new \RuntimeException("cannot start $bin");
        }
        // End of input makes the harness stop every broker it started.
        register_shutdown_function(function (): void {
            fclose($this->pipes[0]);
            fclose($this->pipes[1]);
            proc_close($this->proc);
        });
    }

    public function command(string $line): array
    {
        fwrite($this->pipes[0], $line . "\n");
        $reply = fgets($this->pipes[1]);
        if ($reply === false) {
            throw new \RuntimeException("harness: no answer to $line");
        }
        $r = Json::decode($reply);
        if (isset($r['error'])) {
            throw new \RuntimeException("harness: $line: {$r['error']}");
        }
        return $r;
    }

    /** @return array{id: int, url: string} */
    public function start(array $env = []): array
    {
        return $this->command(trim('start ' . implode(' ', $env)));
    }

    public function stop(int $id): void
    {
        $this->command("stop $id");
    }

    public function deadUrl(): string
    {
        return $this->command('dead_url')['url'];
    }

    public function sql(string $sql): void
    {
        $this->command('sql ' . str_replace("\n", ' ', $sql));
    }

    /** The broker the tests share, started on first use. */
    public function mainUrl(): string
    {
        return $this->mainUrl ??= $this->start()['url'];
    }

    /** A fresh [a-z0-9] token for unique names. */
    public static function token(): string
    {
        return substr(str_shuffle(str_repeat('abcdefghijklmnopqrstuvwxyz0123456789', 2)), 0, 12);
    }
}
