<?php

// An exactly-once consumer: each order's effect (a counter) commits in the
// same transaction as its ack, guarded by a marker key, so a redelivered
// order can never count twice.
//   php clients/php/examples/consumer.php http://127.0.0.1:6632 orders [MESSAGES]

declare(strict_types=1);

require __DIR__ . '/../tests/bootstrap.php'; // the PSR-4 autoloader; with composer: vendor/autoload.php

use Queen\Client;
use Queen\Exception\QueenException;

if ($argc < 3) {
    fwrite(STDERR, "usage: php consumer.php BROKER_URL QUEUE [MESSAGES]\n");
    exit(2);
}
[, $url, $queue] = $argv;
$limit = (int) ($argv[3] ?? 0);
$handled = 0;
$q = new Client($url, ['token' => getenv('QUEEN_TOKEN') ?: null]);
try {
    $q->consume($queue, function (array $m, Queen\Transaction $tx) use (&$handled): bool {
        $tx->kv(['op' => 'putIfAbsent', 'ns' => 'orders', 'key' => "done/{$m['transactionId']}",
                 'value' => true, 'forever' => true, 'required' => true]);
        $tx->kv(['op' => 'incr', 'ns' => 'orders', 'key' => 'count', 'delta' => 1, 'forever' => true]);
        echo $m['transactionId'], ' ', Queen\Json::encode($m['data']), "\n";
        $handled++;
        return true;
    }, ['stop' => function () use (&$handled, $limit): bool {
        return $limit > 0 && $handled >= $limit; // by reference: an arrow function would see 0 forever
    }]);
    echo 'orders counted: ', Queen\Json::encode($q->kvGet('orders', 'count')['value'] ?? null), "\n";
} catch (QueenException $e) {
    fwrite(STDERR, "queen: {$e->errorCode} {$e->reason}: {$e->detail}\n");
    exit(1);
}
