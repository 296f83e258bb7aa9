// queen_client.hpp: the C++17 client of Queen, a layer over the C client
// libqueenclient (include/queen_client.h). It adds no HTTP stack of its
// own: every call is one libqueenclient call, so retries, failover, the
// bearer token, keep-alive and timeouts behave exactly as there.
//
// What the layer adds: RAII (a Client closes its handle, a Transaction
// frees its builder), exceptions that mirror the error envelope (one class
// per kind, all deriving from queen_cpp::Error), std::optional where the broker
// may leave a member out, and queen_cpp::Json, which holds a value's JSON text
// exactly as the broker sent it (0.1 and 12345678901234567890 stay those
// bytes). The header names no JSON library: Json takes any value with a
// dump() (nlohmann::json, say) and parse<J>() hands the text to J::parse,
// so the application picks the library and its version, not this header.
//
// Threads: one Client is shared by any number of threads.
#ifndef QUEEN_CLIENT_HPP
#define QUEEN_CLIENT_HPP

#include <chrono>
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#if __cplusplus >= 202002L && __has_include(<stop_token>)
#include <stop_token>
#endif

extern "C" {
#include "queen_client.h"
}

// The namespace is queen_cpp, not queen: queen.h names its handle type `queen`.
namespace queen_cpp {

// A JSON value held as its text. Values, payloads and results travel as
// text, never through a double or a 64-bit integer, so numbers survive a
// round trip byte for byte; parse<nlohmann::json>() gives a value to read
// (whose own numbers are doubles and 64-bit integers: read exact numbers
// from text()).
class Json {
    template <class V>
    using dumps = std::enable_if_t<std::is_convertible_v<decltype(std::declval<const V &>().dump()), std::string> &&
                                   !std::is_same_v<std::decay_t<V>, Json>>;

public:
    Json() : text_("null") {}
    // A JSON library's value, serialised by its dump() (what you build in code).
    template <class V, class = dumps<V>>
    Json(const V &v) : text_(v.dump()) {} // NOLINT: implicit on purpose
    // JSON text sent as it is (a value read elsewhere, "0.1", "12345678901234567890").
    static Json raw(std::string text);
    const std::string &text() const { return text_; }
    // The text parsed by the library the caller names: parse<nlohmann::json>().
    template <class J>
    J parse() const { return J::parse(text_); }
    bool is_null() const { return text_ == "null"; }
    bool operator==(const Json &o) const { return text_ == o.text_; }

private:
    std::string text_;
};

// Every KV write names its expiry: a ttl in seconds (> 0), or forever. There
// is no other way to make one, so a write without an expiry does not compile;
// ttl(0) or below throws BadRequest (status 0, code bad_argument) before
// anything is sent (clients/API.md, "Expiry").
class Expiry {
public:
    static Expiry ttl(long seconds);
    static Expiry ttl(std::chrono::seconds s) { return ttl(static_cast<long>(s.count())); }
    static Expiry forever() { return Expiry(QUEEN_FOREVER); }
    long c_value() const { return seconds_; }

private:
    explicit Expiry(long s) : seconds_(s) {}
    long seconds_;
};

struct Options {
    std::vector<std::string> urls;   // tried in order for failover; empty: QUEEN_URL (comma-separated)
    std::optional<std::string> token; // sent as Authorization: Bearer
    int max_attempts = 3;             // per call, the first included (1: never retry)
    int backoff_ms = 50;              // base of the jittered exponential backoff
    int max_backoff_ms = 5000;        // cap of one wait, Retry-After included
    int timeout_ms = 30000;           // one attempt (a long poll adds its wait)
    int connect_timeout_ms = 3000;
};

// ---- errors: the envelope {error, code, reason, detail}, as thrown -------------
class Error : public std::runtime_error {
public:
    explicit Error(const queen_client_error &e);
    int status() const { return status_; }                // 0: no HTTP answer; 200: a KV verdict
    const std::string &code() const { return code_; }     // envelope code, or unreachable/timeout/transport/bad_response
    const std::string &reason() const { return reason_; } // envelope reason
    const std::string &detail() const { return detail_; }
    int retry_after() const { return retry_after_; }      // seconds; 0: none
    int attempts() const { return attempts_; }            // HTTP attempts made
    queen_error_category category() const { return category_; }
    // clients/API.md's error kind; each class below is one kind (an Error
    // itself, as the retry hook gets it, carries the kind of its status).
    virtual const char *kind() const { return kind_; }

private:
    const char *kind_;
    int status_, retry_after_, attempts_;
    std::string code_, reason_, detail_;
    queen_error_category category_;
};
// 400, 413 and other 4xx: the input was refused; nothing was written. Also
// what the client refuses itself before sending (status 0, code bad_argument).
struct BadRequest : Error { using Error::Error; const char *kind() const override { return "bad_request"; } };
// 401 / 403: the token is missing or bad, or may not make this call.
struct AuthError : Error { using Error::Error; const char *kind() const override { return "auth"; } };
// 404: no such queue, lease or route.
struct NotFound : Error { using Error::Error; const char *kind() const override { return "not_found"; } };
// 409: a transaction id seen before, a lease not held.
struct Conflict : Error { using Error::Error; const char *kind() const override { return "conflict"; } };
// 429: the tenant's rate or quota; Retry-After tells when.
struct RateLimited : Error { using Error::Error; const char *kind() const override { return "rate_limited"; } };
// 503: try again later.
struct Unavailable : Error { using Error::Error; const char *kind() const override { return "unavailable"; } };
// 500 and another 5xx: the broker failed.
struct ServerError : Error { using Error::Error; const char *kind() const override { return "server"; } };
// No whole HTTP answer: unreachable, timeout, transport, bad_response.
struct TransportError : Error { using Error::Error; const char *kind() const override { return "transport"; } };

// A required KV op lost (status 200, code kv_precondition): which op, why,
// and the key's live version and value.
class PreconditionFailed : public Error {
public:
    explicit PreconditionFailed(const queen_client_error &e);
    const char *kind() const override { return "precondition"; }
    int failed_index() const { return failed_index_; }
    const std::string &kv_reason() const { return kv_reason_; } // exists | absent | version | limit | type
    long long version() const { return version_; }              // 0: no live row
    // The live value; nullopt when the broker left it out for size (value_bytes says how big).
    const std::optional<Json> &value() const { return value_; }
    std::size_t value_bytes() const { return value_bytes_; }

private:
    int failed_index_;
    std::string kv_reason_;
    long long version_;
    std::optional<Json> value_;
    std::size_t value_bytes_;
};

// Throws the class that fits e (used by every call; public for wrappers).
[[noreturn]] void throw_error(const queen_client_error &e);

// ---- results ------------------------------------------------------------------------
// KV results keep the whole element (raw) and the members most code reads.
struct KvEntry {
    bool found = false;
    std::optional<Json> value;             // absent when not found
    std::optional<long long> version;
    std::optional<std::string> expires_at; // nullopt: forever or not found
    Json raw;
};
struct KvWrite {
    bool applied = false;
    std::optional<std::string> reason; // why not applied: exists, absent, version, limit
    std::optional<long long> version;
    std::optional<Json> value;         // incr: the value; a lost write: the live value
    Json raw;
};
struct KvPage {
    std::vector<Json> rows;               // {key, value?, version, expiresAt}
    bool truncated = false;
    std::optional<std::string> next_after;
    Json raw;
};

struct Message {
    std::string queue, partition, partition_id, lease_id, transaction_id;
    std::optional<std::string> consumer_group;
    Json data;
    int delivery_attempt = 0;
    Json raw; // the whole message object
    // The wire ack item settling it (status: completed when nullopt), for Client::ack.
    Json ack_item(const std::optional<std::string> &status = std::nullopt) const;
};
struct PopResult {
    std::vector<Message> messages;
    std::optional<std::string> lease_id, partition_id; // a single-partition pop's
    Json raw;
};

struct PopOptions {
    std::optional<std::string> partition, consumer_group;
    int batch = 0;         // 0: the broker's default
    int lease_seconds = 0; // 0: the queue's leaseTime
    bool auto_ack = false;
    bool wait = false;     // long poll until a message or timeout_ms
    int timeout_ms = 0;
};

class Client;

// The transaction builder: acks, pushes and kv ops that commit together or
// not at all. Operations keep their order; kv ops follow.
class Transaction {
public:
    Transaction();
    Transaction(Transaction &&) noexcept = default;
    Transaction &operator=(Transaction &&) noexcept = default;
    Transaction &ack(const std::string &transaction_id, const std::string &partition_id, const std::string &lease_id,
                     const std::optional<std::string> &status = std::nullopt,
                     const std::optional<std::string> &consumer_group = std::nullopt);
    Transaction &push(const std::string &queue, const Json &payload,
                      const std::optional<std::string> &partition = std::nullopt,
                      const std::optional<std::string> &transaction_id = std::nullopt);
    // Settle a popped message (its ids and lease; status nullopt: completed).
    Transaction &ack(const Message &m, const std::optional<std::string> &status = std::nullopt,
                     const std::optional<std::string> &consumer_group = std::nullopt);
    Transaction &kv(const Json &op);
    // The typed kv ops, as Client::kv_put and its siblings take them.
    Transaction &kv_put(const std::string &ns, const std::string &key, const Json &value, Expiry expiry,
                        std::optional<long long> expect = std::nullopt, bool required = false);
    Transaction &kv_put_if_absent(const std::string &ns, const std::string &key, const Json &value, Expiry expiry,
                                  bool required = false);
    Transaction &kv_delete(const std::string &ns, const std::string &key, std::optional<long long> expect = std::nullopt,
                           bool required = false);
    Transaction &kv_incr(const std::string &ns, const std::string &key, double delta, Expiry expiry,
                         std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt,
                         bool required = false);
    Transaction &require_lease(const std::string &lease_id);
    std::string json() const; // the bundle's text
    queen_client_tx *c_handle() const { return tx_.get(); }

private:
    explicit Transaction(queen_client_tx *borrowed); // the consume loop's
    struct Free { bool owned; void operator()(queen_client_tx *t) const { if (owned) queen_client_tx_free(t); } };
    std::unique_ptr<queen_client_tx, Free> tx_;
    friend class Client;
};

// A committed or rolled-back transaction. success false is not an
// exception: the bundle rolled back whole (reason, failedIndex in raw).
struct TxResult {
    bool success = false;
    std::optional<std::string> reason;
    std::optional<int> failed_index;
    Json raw;
};

struct ConsumeOptions {
    std::string queue;
    std::optional<std::string> tenant, partition, consumer_group;
    int concurrency = 1;   // handler threads
    int batch = 1;         // messages per pop
    int lease_seconds = 30;// per pop and per renewal (renewed every third of it)
    int poll_ms = 1000;    // a worker's long poll: the longest a stop waits
};

// Asks a consume loop to stop cleanly; request() from any thread, a
// handler included. Under C++20, consume() also takes a std::stop_token.
class StopToken {
public:
    void request() { flag_.store(1, std::memory_order_release); }
    bool requested() const { return flag_.load(std::memory_order_acquire) != 0; }

private:
    // The C loop reads the flag through an int pointer with acquire loads
    // (queen_client_consume_options.stop): a lock-free std::atomic<int> is
    // that int, so the two sides agree on one object.
    static_assert(std::atomic<int>::is_always_lock_free && sizeof(std::atomic<int>) == sizeof(int),
                  "the C consume loop reads the stop flag as an int");
    std::atomic<int> flag_{0};
    friend class Client;
};

// Return true when handled (the ack commits with whatever the handler added
// to tx); false, or an exception, fails the message (the broker redelivers it).
using Handler = std::function<bool(const Message &, Transaction &)>;

// Called before every retry with the attempt that failed (1 for the first),
// its error and the wait in ms (clients/API.md's retry hook).
using RetryHook = std::function<void(int attempt, const Error &error, int wait_ms)>;

class Client {
public:
    explicit Client(const Options &o, RetryHook on_retry = nullptr);
    ~Client();
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;
    Client(Client &&o) noexcept : c_(o.c_), on_retry_(std::move(o.on_retry_)) { o.c_ = nullptr; }
    Client &operator=(Client &&o) noexcept;

    // A client for calls bounded by their own timeout: it shares this
    // client's connections, URLs, token, retry settings and hook, and bounds
    // every attempt of its calls by timeout_ms (a long poll adds its wait).
    // Destroy it before this client. Throws std::invalid_argument when
    // timeout_ms <= 0.
    Client with_timeout(int timeout_ms) const;

    // Attempts beyond the first made by every call so far.
    long long retries() const;
    // GET /health: the broker's version.
    std::string health();

    // ---- KV (tenant: the x-queen-tenant header; nullopt: the default tenant)
    KvEntry kv_get(const std::string &ns, const std::string &key, const std::optional<std::string> &tenant = {});
    // expect: the version the key must hold (0: absent); required: a lost
    // condition throws PreconditionFailed instead of answering applied=false.
    KvWrite kv_put(const std::string &ns, const std::string &key, const Json &value, Expiry expiry,
                   std::optional<long long> expect = std::nullopt, bool required = false,
                   const std::optional<std::string> &tenant = {});
    KvWrite kv_put_if_absent(const std::string &ns, const std::string &key, const Json &value, Expiry expiry,
                             bool required = false, const std::optional<std::string> &tenant = {});
    KvWrite kv_delete(const std::string &ns, const std::string &key, std::optional<long long> expect = std::nullopt,
                      bool required = false, const std::optional<std::string> &tenant = {});
    KvWrite kv_incr(const std::string &ns, const std::string &key, double delta, Expiry expiry,
                    std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt,
                    bool required = false, const std::optional<std::string> &tenant = {});
    // The getMany element: {rows:[...], missing:[...]}.
    Json kv_get_many(const std::string &ns, const std::vector<std::string> &keys,
                     const std::optional<std::string> &tenant = {});
    KvPage kv_get_prefix(const std::string &ns, const std::string &prefix,
                         const std::optional<std::string> &after = std::nullopt, int limit = 0, bool keys_only = false,
                         const std::optional<std::string> &tenant = {});
    // Every row under prefix, following nextAfter to the end; returns the pages read.
    int kv_scan(const std::string &ns, const std::string &prefix, const std::function<void(const Json &row)> &row,
                int page_limit = 0, bool keys_only = false, const std::optional<std::string> &tenant = {});
    // A batch in one transaction: the results array, aligned with ops.
    Json kv_apply(const Json &ops, const std::optional<std::string> &tenant = {});
    Json kv_namespaces(const std::optional<std::string> &tenant = {});

    // ---- messages
    Json push(const Json &items, const std::optional<std::string> &tenant = {});
    // nullopt: nothing to give (204).
    std::optional<PopResult> pop(const std::string &queue, const PopOptions &o = {},
                                 const std::optional<std::string> &tenant = {});
    Json ack(const Json &acks, const std::optional<std::string> &consumer_group = std::nullopt,
             const std::optional<std::string> &tenant = {});
    Json lease_extend(const std::string &lease_id, int seconds, const std::optional<std::string> &tenant = {});
    Json configure(const std::string &queue, const std::optional<Json> &options = std::nullopt,
                   const std::optional<std::string> &ns_label = std::nullopt,
                   const std::optional<std::string> &task_label = std::nullopt,
                   const std::optional<std::string> &tenant = {});
    Json queues(const std::optional<std::string> &tenant = {});
    Json queue_delete(const std::string &queue, const std::optional<std::string> &tenant = {});

    // ---- transactions and the consume loop
    TxResult commit(const Transaction &tx, const std::optional<std::string> &tenant = {});
    // Runs until stop.request(): in-flight handlers finish and settle, then
    // it returns. Throws when the broker refuses the pop itself (a 4xx).
    void consume(const ConsumeOptions &o, const Handler &handler, StopToken &stop);
#if defined(__cpp_lib_jthread)
    // The same loop, stopped through a std::stop_token (a std::jthread's, say).
    void consume(const ConsumeOptions &o, const Handler &handler, std::stop_token st)
    {
        StopToken stop;
        std::stop_callback forward(st, [&stop] { stop.request(); });
        consume(o, handler, stop);
    }
#endif

    queen_client *c_handle() const { return c_; }

private:
    explicit Client(queen_client *view) : c_(view) {}
    queen_client *c_;
    std::unique_ptr<RetryHook> on_retry_; // where the C client's hook context points: stable across moves
};

} // namespace queen_cpp

#endif
