// An exactly-once consumer with the C++ client: each order's effect (a
// counter) commits in the same transaction as its ack, guarded by a marker
// key, so a redelivery can never count twice.
//   build/clients/cpp/example http://127.0.0.1:6632 orders
#include "queen_client.hpp"

#include <atomic>
#include <csignal>
#include <iostream>

#include <nlohmann/json.hpp> // the application's JSON library: queen_client.hpp names none

static queen_cpp::StopToken stop;

int main(int argc, char **argv)
{
    if (argc < 3) {
        std::cerr << "usage: " << argv[0] << " BROKER_URL QUEUE [MESSAGES]\n";
        return 2;
    }
    std::signal(SIGINT, [](int) { stop.request(); });
    std::signal(SIGTERM, [](int) { stop.request(); });
    int limit = argc > 3 ? std::atoi(argv[3]) : 0;
    try {
        queen_cpp::Options options;
        options.urls = {argv[1]};
        queen_cpp::Client client(options);
        std::cout << "broker " << client.health() << "\n";
        std::atomic<int> handled{0};
        queen_cpp::ConsumeOptions o;
        o.queue = argv[2];
        o.concurrency = 4;
        client.consume(o, [&](const queen_cpp::Message &m, queen_cpp::Transaction &tx) {
            tx.kv(nlohmann::json{{"op", "putIfAbsent"}, {"ns", "orders"}, {"key", "done/" + m.transaction_id},
                                 {"value", true}, {"forever", true}, {"required", true}});
            tx.kv(nlohmann::json{{"op", "incr"}, {"ns", "orders"}, {"key", "count"}, {"delta", 1}, {"forever", true}});
            std::cout << m.transaction_id << " " << m.data.text() << "\n";
            if (limit > 0 && ++handled >= limit)
                stop.request();
            return true;
        }, stop);
        std::cout << "orders counted: " << client.kv_get("orders", "count").value.value_or(queen_cpp::Json()).text() << "\n";
    } catch (const queen_cpp::Error &e) {
        std::cerr << "queen: " << e.code() << " " << e.reason() << ": " << e.detail() << "\n";
        return 1;
    }
    return 0;
}
