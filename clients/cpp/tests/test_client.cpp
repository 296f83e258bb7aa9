// The C++ client's own tests, against real brokers from the harness: what
// the layer adds over libqueenclient (exception classes, std::optional,
// raw JSON text, RAII, exceptions across the C callbacks) and the bearer
// token against an authenticated broker.
#include "queen_client.hpp"
#include "support.hpp"

extern "C" {
#include "jwtmint.h"
}

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <type_traits>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using queen_test::Harness;
using namespace queen_cpp;

namespace {

Client client_for(const std::string &url, std::optional<std::string> token = std::nullopt, int max_attempts = 3)
{
    Options o;
    o.urls = {url};
    o.token = std::move(token);
    o.max_attempts = max_attempts;
    o.backoff_ms = 10;
    o.timeout_ms = 10000;
    return Client(o);
}

std::string ns() { return "cpp-" + queen_test::unique_token(); }

const char SECRET[] = "cpp-client-secret-41c9";

std::string mint(const std::string &secret, const std::string &role, const std::string &tenant = "")
{
    std::string claim = tenant.empty() ? "" : ",\"tenant\":\"" + tenant + "\"";
    std::string payload = "{\"sub\":\"cpp-test\",\"role\":\"" + role + "\"" + claim + ",\"exp\":" +
                          std::to_string(static_cast<long long>(std::time(nullptr)) + 600) + "}";
    char *t = mint_jwt("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", payload.c_str(), secret.data(), secret.size(), nullptr);
    std::string s(t);
    std::free(t);
    return s;
}

} // namespace

TEST(client, numbers_travel_as_text)
{
    Client c = client_for(Harness::get().main_url());
    std::string n = ns();
    auto w = c.kv_put(n, "big", Json::raw("12345678901234567890"), Expiry::forever());
    EXPECT_TRUE(w.applied);
    ASSERT_TRUE(w.version.has_value());
    c.kv_put(n, "doc", Json::raw("{\"a\":[0.1,1E+2,-0.0]}"), Expiry::ttl(600));
    auto big = c.kv_get(n, "big");
    ASSERT_TRUE(big.value.has_value());
    EXPECT_EQ(big.value->text(), "12345678901234567890");
    EXPECT_EQ(big.version, w.version);
    EXPECT_FALSE(big.expires_at.has_value()); // forever: expiresAt is null
    auto doc = c.kv_get(n, "doc");
    EXPECT_EQ(doc.value->parse<nlohmann::json>()["a"][0].get<double>(), 0.1);
    EXPECT_NE(doc.value->text().find("0.1"), std::string::npos);
    EXPECT_TRUE(doc.expires_at.has_value());
    // An nlohmann value goes out as its dump.
    c.kv_put(n, "obj", nlohmann::json{{"name", "ada"}, {"n", 3}}, Expiry::forever());
    EXPECT_EQ(c.kv_get(n, "obj").value->parse<nlohmann::json>()["name"], "ada");
}

TEST(client, absent_members_are_nullopt)
{
    Client c = client_for(Harness::get().main_url());
    auto r = c.kv_get(ns(), "nothing");
    EXPECT_FALSE(r.found);
    EXPECT_FALSE(r.value.has_value());
    EXPECT_FALSE(r.expires_at.has_value());
    auto d = c.kv_delete(ns(), "nothing");
    EXPECT_FALSE(d.applied);
    EXPECT_EQ(d.reason, std::optional<std::string>("absent"));
    EXPECT_FALSE(c.pop("q-" + queen_test::unique_token()).has_value());
}

TEST(client, precondition_is_its_own_exception)
{
    Client c = client_for(Harness::get().main_url());
    std::string n = ns();
    auto w = c.kv_put(n, "k", Json::raw("12345678901234567890"), Expiry::forever());
    try {
        c.kv_put(n, "k", Json::raw("2"), Expiry::forever(), 0, true);
        FAIL() << "a lost required put did not throw";
    } catch (const PreconditionFailed &e) {
        EXPECT_EQ(e.status(), 200);
        EXPECT_EQ(e.code(), "kv_precondition");
        EXPECT_EQ(e.failed_index(), 0);
        EXPECT_EQ(e.kv_reason(), "exists");
        EXPECT_EQ(e.version(), *w.version);
        ASSERT_TRUE(e.value().has_value());
        EXPECT_EQ(e.value()->text(), "12345678901234567890");
    }
    // Not required: a result, not an exception.
    auto lost = c.kv_put(n, "k", Json::raw("3"), Expiry::forever(), 0);
    EXPECT_FALSE(lost.applied);
    EXPECT_EQ(lost.reason, std::optional<std::string>("exists"));
}

// clients/API.md, "Expiry": no expiry does not compile (Expiry has no unset
// value); a ttl of 0 or below is refused before anything is sent.
TEST(client, bad_ttl_never_leaves_the_client)
{
    for (long bad : {0L, -1L, -5L}) {
        try {
            (void)Expiry::ttl(bad);
            FAIL() << "ttl " << bad << " was accepted";
        } catch (const BadRequest &e) {
            EXPECT_EQ(e.status(), 0);
            EXPECT_EQ(e.code(), "bad_argument");
            EXPECT_EQ(std::string(e.kind()), "bad_request");
            EXPECT_NE(std::string(e.what()).find("expiry: give ttl (seconds > 0) or forever"), std::string::npos);
        }
    }
    EXPECT_EQ(Expiry::ttl(std::chrono::minutes(2)).c_value(), 120);
    static_assert(!std::is_default_constructible_v<Expiry>, "an Expiry is always ttl or forever");
}

TEST(client, transaction_takes_messages_and_typed_kv_ops)
{
    Client c = client_for(Harness::get().main_url());
    std::string n = ns(), q = "q-" + queen_test::unique_token();
    c.push(nlohmann::json::array({{{"queue", q}, {"payload", 1}, {"transactionId", "t1"}}}));
    auto popped = c.pop(q, PopOptions{std::nullopt, std::nullopt, 1, 0, false, true, 5000});
    ASSERT_TRUE(popped.has_value());
    ASSERT_EQ(popped->messages.size(), 1u);
    const Message &m = popped->messages[0];
    EXPECT_NE(m.ack_item().text().find("\"leaseId\""), std::string::npos);
    Transaction tx;
    tx.ack(m).kv_put(n, "a", Json::raw("1"), Expiry::forever()).kv_put_if_absent(n, "b", Json::raw("2"), Expiry::ttl(60))
        .kv_incr(n, "c", 3, Expiry::forever(), std::nullopt, 10.0).kv_delete(n, "d");
    auto r = c.commit(tx);
    EXPECT_TRUE(r.success) << r.raw.text();
    EXPECT_EQ(c.kv_get(n, "c").value->text(), "3");
    EXPECT_EQ(c.kv_get(n, "b").value->text(), "2");
    EXPECT_THROW(tx.kv_incr(n, "c", 1, Expiry::ttl(0)), BadRequest);
    try {
        c.commit(Transaction().kv_put_if_absent(n, "a", Json::raw("9"), Expiry::forever(), true));
    } catch (const PreconditionFailed &e) {
        ADD_FAILURE() << "a transaction's lost kv op is a result, not an exception: " << e.what();
    }
    try {
        c.kv_put_if_absent(n, "a", Json::raw("9"), Expiry::forever(), true);
        FAIL() << "a lost required put did not throw";
    } catch (const PreconditionFailed &e) {
        EXPECT_STREQ(e.what(), "kv precondition failed at op 0: exists");
        EXPECT_EQ(std::string(e.kind()), "precondition");
    }
}

TEST(client, queen_url_and_the_retry_hook)
{
    std::string env = Harness::get().dead_url() + ", " + Harness::get().main_url();
    setenv("QUEEN_URL", env.c_str(), 1);
    std::vector<std::string> seen;
    Client c(Options{}, [&seen](int attempt, const Error &e, int wait_ms) {
        seen.push_back(std::to_string(attempt) + " " + e.code() + " " + e.kind() + (wait_ms >= 0 ? "" : " negative"));
    });
    unsetenv("QUEEN_URL");
    c.health();
    EXPECT_EQ(seen, std::vector<std::string>{"1 unreachable transport"});
    EXPECT_THROW(Client{Options{}}, BadRequest);
}

TEST(client, refusals_map_to_classes)
{
    Client c = client_for(Harness::get().main_url());
    try {
        c.kv_put("Bad NS", "k", Json::raw("1"), Expiry::forever());
        FAIL() << "a bad namespace was accepted";
    } catch (const BadRequest &e) {
        EXPECT_EQ(e.status(), 400);
        EXPECT_EQ(std::string(e.kind()), "bad_request");
        EXPECT_EQ(e.attempts(), 1);
    }
    EXPECT_THROW(c.ack(Json::raw("[{\"transactionId\":\"t\",\"partitionId\":\"nope\",\"leaseId\":\"x\"}]")), BadRequest);
    Client dead = client_for(Harness::get().dead_url(), std::nullopt, 2);
    try {
        dead.health();
        FAIL() << "a dead URL answered";
    } catch (const TransportError &e) {
        EXPECT_EQ(e.status(), 0);
        EXPECT_EQ(e.code(), "unreachable");
        EXPECT_EQ(e.attempts(), 2);
    }
}

// A listener that never answers: the kernel accepts, nobody reads. url
// stays empty when the socket could not be set up.
struct SilentListener {
    int fd = -1;
    std::string url;
    SilentListener()
    {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof sa;
        if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0 && listen(fd, 16) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr *>(&sa), &len) == 0)
            url = "http://127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    }
    ~SilentListener()
    {
        if (fd >= 0)
            close(fd);
    }
    SilentListener(const SilentListener &) = delete;
    SilentListener &operator=(const SilentListener &) = delete;
};

TEST(client, silent_peer_times_out_and_only_reads_retry)
{
    SilentListener peer;
    ASSERT_FALSE(peer.url.empty());
    Options o;
    o.urls = {peer.url};
    o.timeout_ms = 300;
    o.max_attempts = 2;
    o.backoff_ms = 10;
    Client c(o);
    try {
        c.kv_get("ns", "k");
        FAIL() << "a silent peer answered";
    } catch (const TransportError &e) {
        EXPECT_EQ(e.code(), "timeout");
        EXPECT_EQ(e.attempts(), 2);
    }
    try {
        c.kv_incr("ns", "n", 1, Expiry::forever());
        FAIL() << "a silent peer answered";
    } catch (const TransportError &e) {
        EXPECT_EQ(e.code(), "timeout");
        EXPECT_EQ(e.attempts(), 1); // an incr might have applied: never repeated
    }
}

TEST(client, with_timeout_bounds_its_calls_and_leaves_the_base_its_own)
{
    SilentListener peer;
    ASSERT_FALSE(peer.url.empty());
    Options o;
    o.urls = {peer.url};
    o.timeout_ms = 1500;
    o.max_attempts = 1;
    Client base(o);
    EXPECT_THROW(base.with_timeout(0), std::invalid_argument);
    auto elapsed_ms = [](Client &c) {
        auto t0 = std::chrono::steady_clock::now();
        try {
            c.kv_get("ns", "k");
            ADD_FAILURE() << "a silent peer answered";
        } catch (const TransportError &e) {
            EXPECT_EQ(e.code(), "timeout");
        }
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    };
    {
        Client quick = base.with_timeout(200);
        long long ms = elapsed_ms(quick);
        EXPECT_GE(ms, 150);
        EXPECT_LT(ms, 1000);
    }
    EXPECT_GE(elapsed_ms(base), 1400);
}

TEST(client, bearer_token_on_an_authenticated_broker)
{
    std::string secret_env = std::string("QUEEN_JWT_SECRET=") + SECRET;
    auto b = Harness::get().start({"QUEEN_AUTH=jwt", secret_env, "QUEEN_JWT_DEFAULT_TENANT=1"});
    std::string url = b["url"].get<std::string>();
    std::string n = ns();
    // With tokens tenancy is on: this test's own tenant, with its kv grant,
    // so it does not lean on another suite having granted the default one.
    const std::string tenant = "c4a1e2d0-5b6f-4e7a-9c3d-2f1e0b9a8c71";
    Harness::get().sql("INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ('" + tenant +
                       "', true) ON CONFLICT (tenant_id) DO UPDATE SET enabled = true");
    Client authed = client_for(url, mint(SECRET, "admin", tenant));
    EXPECT_TRUE(authed.kv_put(n, "k", Json::raw("1"), Expiry::forever()).applied);
    EXPECT_EQ(authed.kv_get(n, "k").value->text(), "1");
    Client anonymous = client_for(url);
    try {
        anonymous.kv_get(n, "k");
        FAIL() << "a call without a token was served";
    } catch (const AuthError &e) {
        EXPECT_EQ(e.status(), 401);
        EXPECT_EQ(e.attempts(), 1); // a refusal is never retried
    }
    Client forged = client_for(url, mint("not-the-secret", "admin"));
    EXPECT_THROW(forged.kv_get(n, "k"), AuthError);
    Client reader = client_for(url, mint(SECRET, "read", tenant));
    EXPECT_THROW(reader.kv_put(n, "k", Json::raw("2"), Expiry::forever()), AuthError);
    Harness::get().stop(b["id"].get<int>());
}

TEST(client, moved_client_keeps_one_handle)
{
    Client a = client_for(Harness::get().main_url());
    Client b(std::move(a));
    EXPECT_EQ(a.c_handle(), nullptr);
    Client c = client_for(Harness::get().dead_url());
    c = std::move(b); // closes c's own handle, takes b's
    EXPECT_FALSE(c.health().empty());
}

TEST(client, scan_stops_and_rethrows_a_callback_exception)
{
    Client c = client_for(Harness::get().main_url());
    std::string n = ns();
    for (int i = 0; i < 5; i++)
        c.kv_put(n, "p/" + std::to_string(i), Json::raw(std::to_string(i)), Expiry::forever());
    std::vector<std::string> keys;
    int pages = c.kv_scan(n, "p/", [&](const Json &row) { keys.push_back(row.parse<nlohmann::json>()["key"]); }, 2);
    EXPECT_EQ(pages, 3);
    EXPECT_EQ(keys, (std::vector<std::string>{"p/0", "p/1", "p/2", "p/3", "p/4"}));
    int seen = 0;
    EXPECT_THROW(c.kv_scan(n, "p/",
                           [&](const Json &) {
                               if (++seen == 2)
                                   throw std::runtime_error("enough");
                           },
                           2),
                 std::runtime_error);
    EXPECT_EQ(seen, 2);
}

TEST(client, builder_shares_one_push_operation)
{
    Transaction tx;
    tx.push("q", Json::raw("0.1")).push("q", Json::raw("2"), std::string("p"), std::string("id-2")).kv(
        nlohmann::json{{"op", "get"}, {"ns", "n"}, {"key", "k"}});
    auto b = nlohmann::json::parse(tx.json());
    ASSERT_EQ(b["operations"].size(), 1u);
    EXPECT_EQ(b["operations"][0]["items"].size(), 2u);
    EXPECT_NE(tx.json().find("\"payload\":0.1"), std::string::npos);
    EXPECT_EQ(b["kv"].size(), 1u);
}

TEST(client, consume_fails_a_throwing_handler_and_stops_from_another_thread)
{
    Client c = client_for(Harness::get().main_url());
    std::string q = "q-" + queen_test::unique_token(), n = ns();
    c.push(Json::raw("[{\"queue\":\"" + q + "\",\"payload\":{\"n\":1},\"transactionId\":\"m-" + n + "\"}]"));
    std::atomic<int> calls{0};
    StopToken stop;
    ConsumeOptions o;
    o.queue = q;
    o.poll_ms = 200;
    std::atomic<bool> handled{false};
    std::thread consumer([&] {
        c.consume(o,
                  [&](const Message &m, Transaction &tx) {
                      EXPECT_EQ(m.data.parse<nlohmann::json>()["n"], 1); // payloads come back as the broker renders them
                      if (++calls == 1)
                          throw std::runtime_error("first delivery fails");
                      tx.kv(nlohmann::json{{"op", "incr"}, {"ns", n}, {"key", "effect"}, {"delta", 1}, {"forever", true}});
                      handled = true;
                      return true;
                  },
                  stop);
    });
    // Wait for the second delivery to be settled, then stop the idle loop from here.
    for (int i = 0; i < 3000 && !(handled && c.kv_get(n, "effect").found); i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(10)); // polling a condition
    stop.request();
    consumer.join();
    EXPECT_EQ(calls.load(), 2);
    EXPECT_EQ(c.kv_get(n, "effect").value->text(), "1");
    EXPECT_FALSE(c.pop(q).has_value());
}

TEST(client, example_consumer_counts_each_order_once)
{
    Client c = client_for(Harness::get().main_url());
    std::string q = "orders-" + queen_test::unique_token();
    auto count = [&] {
        auto v = c.kv_get("orders", "count").value;
        return v ? v->parse<nlohmann::json>().get<long long>() : 0LL;
    };
    long long before = count();
    c.push(nlohmann::json::array({{{"queue", q}, {"payload", {{"order", 1}}}, {"transactionId", q + "-1"}},
                                  {{"queue", q}, {"payload", {{"order", 2}}}, {"transactionId", q + "-2"}}}));
    // The example sits next to this test program.
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ASSERT_GT(n, 0);
    std::string dir(self, static_cast<std::size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    // timeout: an example that never stops fails the test instead of hanging it.
    std::string cmd = "timeout 60 " + dir + "/example " + Harness::get().main_url() + " " + q + " 2";
    FILE *p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr)
        out += buf;
    EXPECT_EQ(pclose(p), 0) << out;
    EXPECT_NE(out.find(q + "-1 {\"order\": 1}"), std::string::npos) << out;
    EXPECT_NE(out.find(q + "-2 {\"order\": 2}"), std::string::npos) << out;
    EXPECT_EQ(count(), before + 2);
}
