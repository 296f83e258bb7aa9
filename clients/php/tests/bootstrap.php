<?php

declare(strict_types=1);

// The client's PSR-4 autoloader (what composer's would do), then the test support.
spl_autoload_register(function (string $class): void {
    foreach (['Queen\\Tests\\' => __DIR__ . '/', 'Queen\\' => dirname(__DIR__) . '/src/'] as $prefix => $dir) {
        if (str_starts_with($class, $prefix)) {
            $file = $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }
            return;
        }
    }
});
