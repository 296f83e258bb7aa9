<?php

declare(strict_types=1);

namespace Queen\Tests;

use PHPUnit\Framework\TestCase;

/**
 * The README's install path, as a user runs it in a fresh project: composer
 * with a path repository on this folder, `composer require queen/client`,
 * then a script that loads composer's autoloader and uses the client. No
 * package index is needed: the path repository answers for queen/client and
 * the client has no dependencies beyond PHP's own extensions.
 */
final class InstallTest extends TestCase
{
    private static function exec(string $cwd, array $argv, array $env): array
    {
        $p = proc_open($argv, [1 => ['pipe', 'w'], 2 => ['redirect', 1]], $pipes, $cwd, $env + getenv());
        $out = stream_get_contents($pipes[1]);
        fclose($pipes[1]);
        return [proc_close($p), $out];
    }

    private static function rmTree(string $dir): void
    {
        $items = new \RecursiveIteratorIterator(
            new \RecursiveDirectoryIterator($dir, \FilesystemIterator::SKIP_DOTS),
            \RecursiveIteratorIterator::CHILD_FIRST,
        );
        foreach ($items as $f) {
            $f->isDir() && !$f->isLink() ? rmdir($f->getPathname()) : unlink($f->getPathname());
        }
        rmdir($dir);
    }

    public function testComposerRequiresTheClientFromAPathRepository(): void
    {
        $composer = trim((string) shell_exec('command -v composer'));
        $this->assertNotSame('', $composer, 'composer is not installed (Debian: composer; scripts/install-deps.sh)');
        $app = sys_get_temp_dir() . '/queen-php-app-' . bin2hex(random_bytes(4));
        mkdir($app);
        try {
            // A private COMPOSER_HOME: nothing from the user's global configuration or cache.
            $env = ['COMPOSER_HOME' => "$app/.composer", 'COMPOSER_NO_INTERACTION' => '1'];
            file_put_contents("$app/composer.json", "{}\n");
            [$rc, $out] = self::exec($app, [$composer, 'config', 'repositories.queen', 'path', dirname(__DIR__)], $env);
            $this->assertSame(0, $rc, $out);
            [$rc, $out] = self::exec($app, [$composer, 'require', '--no-audit', 'queen/client'], $env);
            $this->assertSame(0, $rc, $out);
            [$rc, $out] = self::exec($app, [$composer, 'show', '--format=json', 'queen/client'], $env);
            $this->assertSame(0, $rc, $out);
            $show = json_decode(substr($out, (int) strpos($out, '{')), true);
            $this->assertSame('Apache-2.0', $show['licenses'][0]['osi'] ?? null, $out);
            // The path repository links vendor/queen/client to this folder (composer's default).
            $this->assertSame(realpath(dirname(__DIR__)), realpath("$app/vendor/queen/client"));
            file_put_contents("$app/main.php", '<?php require __DIR__ . "/vendor/autoload.php"; '
                . 'echo get_class(new Queen\Client("http://127.0.0.1:1")), "\n";');
            [$rc, $out] = self::exec($app, [PHP_BINARY, 'main.php'], $env);
            $this->assertSame(0, $rc, $out);
            $this->assertSame("Queen\\Client\n", $out);
        } finally {
            self::rmTree($app);
        }
    }
}
