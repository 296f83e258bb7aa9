// The C++ layer over libqueenclient (clients/cpp/include/queen_client.hpp).
// Results are read with libqueenclient's raw-span reader (jdoc), so a
// member's text (a value, a payload) is handed on exactly as it arrived.
#include "queen_client.hpp"

extern "C" {
#include "jdoc.h"
}

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <nlohmann/json.hpp>

namespace queen_cpp {

namespace {

// A malloc'd C string owned until scope end.
struct CText {
    char *p = nullptr;
    ~CText() { std::free(p); }
    std::string take() const { return p != nullptr ? std::string(p) : std::string("null"); }
};

// A parsed result document; jdoc keeps each member's source text.
class Doc {
public:
    explicit Doc(const std::string &text) : d_(jd_parse(text.data(), text.size(), nullptr, 0)) {}
    ~Doc() { jd_free(d_); }
    Doc(const Doc &) = delete;
    Doc &operator=(const Doc &) = delete;
    const jd *root() const { return d_; }

private:
    jd *d_;
};

std::string raw_of(const jd *v) { return std::string(v->raw, v->rawlen); }

std::optional<Json> member_json(const jd *o, const char *k)
{
    const jd *v = o != nullptr ? jd_get(o, k) : nullptr;
    if (v == nullptr)
        return std::nullopt;
    return Json::raw(raw_of(v));
}

std::optional<std::string> member_str(const jd *o, const char *k)
{
    const char *s = o != nullptr ? jd_str(o, k) : nullptr;
    if (s == nullptr)
        return std::nullopt;
    const jd *v = jd_get(o, k);
    return std::string(s, v->strlen);
}

std::optional<long long> member_int(const jd *o, const char *k)
{
    const jd *v = o != nullptr ? jd_get(o, k) : nullptr;
    if (v == nullptr || v->type != JD_NUMBER)
        return std::nullopt;
    return jd_int(o, k, 0);
}

const char *opt_c(const std::optional<std::string> &s) { return s ? s->c_str() : nullptr; }

void check(int rc, const queen_client_error &e)
{
    if (rc != 0)
        throw_error(e);
}

KvWrite to_write(std::string text)
{
    KvWrite w;
    Doc d(text);
    w.applied = jd_true(d.root(), "applied");
    w.reason = member_str(d.root(), "reason");
    w.version = member_int(d.root(), "version");
    w.value = member_json(d.root(), "value");
    w.raw = Json::raw(std::move(text));
    return w;
}

Message to_message(const jd *m, const jd *body)
{
    Message msg;
    auto str = [&](const char *k) {
        auto s = member_str(m, k);
        if (!s)
            s = member_str(body, k); // a single-partition pop gives the lease and partition once, on the body
        return s.value_or("");
    };
    msg.queue = str("queue");
    msg.partition = str("partition");
    msg.partition_id = str("partitionId");
    msg.lease_id = str("leaseId");
    msg.transaction_id = str("transactionId");
    msg.consumer_group = member_str(m, "consumerGroup");
    msg.data = member_json(m, "data").value_or(Json());
    msg.delivery_attempt = static_cast<int>(jd_int(m, "deliveryAttempt", 0));
    msg.raw = Json::raw(raw_of(m));
    return msg;
}

} // namespace

Json Json::raw(std::string text)
{
    Json j;
    j.text_ = std::move(text);
    return j;
}

// ---- errors -------------------------------------------------------------------------

namespace {
std::string error_message(const queen_client_error &e)
{
    // clients/API.md's one wording of a lost precondition, in every client.
    if (e.category == QUEEN_ERR_PRECONDITION)
        return "kv precondition failed at op " + std::to_string(e.precondition.index) + ": " + e.precondition.reason;
    return std::string(e.code) + " (" + std::to_string(e.status) + "): " + e.detail;
}

// The client's own refusal of an argument: status 0, code bad_argument.
[[noreturn]] void bad_argument(const std::string &detail)
{
    queen_client_error e{};
    e.category = QUEEN_ERR_BAD_REQUEST;
    std::snprintf(e.code, sizeof e.code, "bad_argument");
    std::snprintf(e.reason, sizeof e.reason, "bad_argument");
    std::snprintf(e.detail, sizeof e.detail, "%s", detail.c_str());
    throw BadRequest(e);
}
} // namespace

Expiry Expiry::ttl(long seconds)
{
    if (seconds <= 0)
        bad_argument("expiry: give ttl (seconds > 0) or forever (ttl " + std::to_string(seconds) + ")");
    return Expiry(seconds);
}

Error::Error(const queen_client_error &e)
    : std::runtime_error(error_message(e)), kind_(queen_client_error_kind(&e)),
      status_(e.status), retry_after_(e.retry_after_s), attempts_(e.attempts), code_(e.code), reason_(e.reason),
      detail_(e.detail), category_(e.category)
{
}

PreconditionFailed::PreconditionFailed(const queen_client_error &e)
    : Error(e), failed_index_(e.precondition.index), kv_reason_(e.precondition.reason),
      version_(e.precondition.version),
      value_(e.precondition.value_omitted ? std::nullopt : std::optional<Json>(Json::raw(e.precondition.value))),
      value_bytes_(e.precondition.value_bytes)
{
}

void throw_error(const queen_client_error &e)
{
    if (e.category == QUEEN_ERR_PRECONDITION)
        throw PreconditionFailed(e);
    if (e.status == 0 && e.category == QUEEN_ERR_BAD_REQUEST)
        throw BadRequest(e); // refused by the client before sending
    if (e.status == 0)
        throw TransportError(e);
    if (e.status == 401 || e.status == 403)
        throw AuthError(e);
    if (e.status == 404)
        throw NotFound(e);
    if (e.status == 409)
        throw Conflict(e);
    if (e.status == 429)
        throw RateLimited(e);
    if (e.status == 503 || e.category == QUEEN_ERR_UNAVAILABLE)
        throw Unavailable(e);
    if (e.status >= 500)
        throw ServerError(e);
    if (e.status >= 400)
        throw BadRequest(e);
    throw Error(e);
}

// ---- the transaction builder --------------------------------------------------------

Transaction::Transaction() : tx_(queen_client_tx_new(), Free{true})
{
    if (!tx_)
        throw std::bad_alloc();
}

Transaction::Transaction(queen_client_tx *borrowed) : tx_(borrowed, Free{false}) {}

Transaction &Transaction::ack(const std::string &transaction_id, const std::string &partition_id,
                              const std::string &lease_id, const std::optional<std::string> &status,
                              const std::optional<std::string> &consumer_group)
{
    if (queen_client_tx_ack(tx_.get(), transaction_id.c_str(), partition_id.c_str(), lease_id.c_str(), opt_c(status),
                            opt_c(consumer_group)) != 0)
        throw std::bad_alloc();
    return *this;
}

Transaction &Transaction::push(const std::string &queue, const Json &payload,
                               const std::optional<std::string> &partition,
                               const std::optional<std::string> &transaction_id)
{
    if (queen_client_tx_push(tx_.get(), queue.c_str(), opt_c(partition), payload.text().c_str(),
                             opt_c(transaction_id)) != 0)
        throw std::bad_alloc();
    return *this;
}

Transaction &Transaction::ack(const Message &m, const std::optional<std::string> &status,
                              const std::optional<std::string> &consumer_group)
{
    return ack(m.transaction_id, m.partition_id, m.lease_id, status,
               consumer_group ? consumer_group : m.consumer_group);
}

Transaction &Transaction::kv_put(const std::string &ns, const std::string &key, const Json &value, Expiry expiry,
                                 std::optional<long long> expect, bool required)
{
    queen_client_error e;
    if (queen_client_tx_kv_put(tx_.get(), ns.c_str(), key.c_str(), value.text().c_str(), expiry.c_value(),
                               expect ? *expect : -1, required, &e) != 0)
        throw_error(e);
    return *this;
}

Transaction &Transaction::kv_put_if_absent(const std::string &ns, const std::string &key, const Json &value,
                                           Expiry expiry, bool required)
{
    queen_client_error e;
    if (queen_client_tx_kv_put_if_absent(tx_.get(), ns.c_str(), key.c_str(), value.text().c_str(), expiry.c_value(),
                                         required, &e) != 0)
        throw_error(e);
    return *this;
}

Transaction &Transaction::kv_delete(const std::string &ns, const std::string &key, std::optional<long long> expect,
                                    bool required)
{
    queen_client_error e;
    if (queen_client_tx_kv_delete(tx_.get(), ns.c_str(), key.c_str(), expect ? *expect : -1, required, &e) != 0)
        throw_error(e);
    return *this;
}

Transaction &Transaction::kv_incr(const std::string &ns, const std::string &key, double delta, Expiry expiry,
                                  std::optional<double> min, std::optional<double> max, bool required)
{
    queen_client_error e;
    if (queen_client_tx_kv_incr(tx_.get(), ns.c_str(), key.c_str(), delta, min ? &*min : nullptr,
                                max ? &*max : nullptr, expiry.c_value(), required, &e) != 0)
        throw_error(e);
    return *this;
}

Json Message::ack_item(const std::optional<std::string> &status) const
{
    nlohmann::json a = {{"transactionId", transaction_id}, {"partitionId", partition_id}};
    if (!lease_id.empty())
        a["leaseId"] = lease_id;
    if (status)
        a["status"] = *status;
    return Json(a);
}

Transaction &Transaction::kv(const Json &op)
{
    if (queen_client_tx_kv(tx_.get(), op.text().c_str()) != 0)
        throw std::bad_alloc();
    return *this;
}

Transaction &Transaction::require_lease(const std::string &lease_id)
{
    if (queen_client_tx_require_lease(tx_.get(), lease_id.c_str()) != 0)
        throw std::bad_alloc();
    return *this;
}

std::string Transaction::json() const
{
    CText t{queen_client_tx_json(tx_.get())};
    if (t.p == nullptr)
        throw std::bad_alloc();
    return t.take();
}

// ---- the client ------------------------------------------------------------------------

Client::Client(const Options &o, RetryHook on_retry)
{
    std::vector<const char *> urls;
    for (const auto &u : o.urls)
        urls.push_back(u.c_str());
    queen_client_options co;
    queen_client_options_defaults(&co);
    co.urls = urls.data();
    co.nurls = urls.size();
    co.token = opt_c(o.token);
    co.max_attempts = o.max_attempts;
    co.backoff_ms = o.backoff_ms;
    co.max_backoff_ms = o.max_backoff_ms;
    co.timeout_ms = o.timeout_ms;
    co.connect_timeout_ms = o.connect_timeout_ms;
    if (on_retry) {
        on_retry_ = std::make_unique<RetryHook>(std::move(on_retry));
        co.on_retry = [](void *ctx, int attempt, const queen_client_error *err, int wait_ms) {
            try {
                (*static_cast<RetryHook *>(ctx))(attempt, Error(*err), wait_ms);
            } catch (...) {
                // an exception may not cross the C client; a hook's failure changes nothing
            }
        };
        co.on_retry_ctx = on_retry_.get();
    }
    queen_client_error e;
    c_ = queen_client_open(&co, &e);
    if (c_ == nullptr)
        throw_error(e);
}

Client::~Client()
{
    if (c_ != nullptr)
        queen_client_close(c_);
}

Client &Client::operator=(Client &&o) noexcept
{
    if (this != &o) {
        if (c_ != nullptr)
            queen_client_close(c_);
        c_ = o.c_;
        o.c_ = nullptr;
        on_retry_ = std::move(o.on_retry_);
    }
    return *this;
}

Client Client::with_timeout(int timeout_ms) const
{
    if (timeout_ms <= 0)
        throw std::invalid_argument("with_timeout: timeout_ms must be positive");
    // The view keeps the C hook context of this client (on_retry_ is not
    // moved by a move of this client: it is a stable heap object).
    queen_client *view = queen_client_with_timeout(c_, timeout_ms);
    if (view == nullptr)
        throw std::bad_alloc();
    return Client(view);
}

long long Client::retries() const { return queen_client_retries(c_); }

std::string Client::health()
{
    char version[128] = "";
    queen_client_error e;
    check(queen_client_health(c_, version, sizeof version, &e), e);
    return version;
}

KvEntry Client::kv_get(const std::string &ns, const std::string &key, const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_kv_get(c_, opt_c(tenant), ns.c_str(), key.c_str(), &t.p, &e), e);
    KvEntry r;
    std::string text = t.take();
    Doc d(text);
    r.found = jd_true(d.root(), "found");
    r.value = r.found ? member_json(d.root(), "value") : std::nullopt;
    r.version = member_int(d.root(), "version");
    r.expires_at = member_str(d.root(), "expiresAt");
    r.raw = Json::raw(std::move(text));
    return r;
}

KvWrite Client::kv_put(const std::string &ns, const std::string &key, const Json &value, Expiry expiry,
                       std::optional<long long> expect, bool required, const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_kv_put(c_, opt_c(tenant), ns.c_str(), key.c_str(), value.text().c_str(), expiry.c_value(),
                              expect.value_or(-1), required, &t.p, &e),
          e);
    return to_write(t.take());
}

KvWrite Client::kv_put_if_absent(const std::string &ns, const std::string &key, const Json &value, Expiry expiry,
                                 bool required, const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_kv_put_if_absent(c_, opt_c(tenant), ns.c_str(), key.c_str(), value.text().c_str(),
                                        expiry.c_value(), required, &t.p, &e),
          e);
    return to_write(t.take());
}

KvWrite Client::kv_delete(const std::string &ns, const std::string &key, std::optional<long long> expect,
                          bool required, const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_kv_delete(c_, opt_c(tenant), ns.c_str(), key.c_str(), expect.value_or(-1), required, &t.p,
                                 &e),
          e);
    return to_write(t.take());
}

KvWrite Client::kv_incr(const std::string &ns, const std::string &key, double delta, Expiry expiry,
                        std::optional<double> min, std::optional<double> max, bool required,
                        const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_kv_incr(c_, opt_c(tenant), ns.c_str(), key.c_str(), delta, min ? &*min : nullptr,
                               max ? &*max : nullptr, expiry.c_value(), required, &t.p, &e),
          e);
    return to_write(t.take());
}

Json Client::kv_get_many(const std::string &ns, const std::vector<std::string> &keys,
                         const std::optional<std::string> &tenant)
{
    std::vector<const char *> k;
    for (const auto &s : keys)
        k.push_back(s.c_str());
    queen_client_error e;
    CText t;
    check(queen_client_kv_get_many(c_, opt_c(tenant), ns.c_str(), k.data(), k.size(), &t.p, &e), e);
    return Json::raw(t.take());
}

KvPage Client::kv_get_prefix(const std::string &ns, const std::string &prefix, const std::optional<std::string> &after,
                             int limit, bool keys_only, const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_kv_get_prefix(c_, opt_c(tenant), ns.c_str(), prefix.c_str(), opt_c(after), limit, keys_only,
                                     &t.p, &e),
          e);
    KvPage p;
    std::string text = t.take();
    Doc d(text);
    const jd *rows = jd_get(d.root(), "rows");
    for (std::size_t i = 0; rows != nullptr && i < rows->n; i++)
        p.rows.push_back(Json::raw(raw_of(rows->items[i])));
    p.truncated = jd_true(d.root(), "truncated");
    p.next_after = member_str(d.root(), "nextAfter");
    p.raw = Json::raw(std::move(text));
    return p;
}

int Client::kv_scan(const std::string &ns, const std::string &prefix, const std::function<void(const Json &)> &row,
                    int page_limit, bool keys_only, const std::optional<std::string> &tenant)
{
    // The C scan calls back with each row; an exception must not cross C
    // frames, so it is held and rethrown once the scan has stopped.
    struct Ctx {
        const std::function<void(const Json &)> *fn;
        std::exception_ptr failure;
    } ctx{&row, nullptr};
    auto cb = [](void *p, const char *row_json) -> int {
        auto *c = static_cast<Ctx *>(p);
        try {
            (*c->fn)(Json::raw(row_json));
            return 0;
        } catch (...) {
            c->failure = std::current_exception();
            return 1;
        }
    };
    queen_client_error e;
    int pages = queen_client_kv_scan(c_, opt_c(tenant), ns.c_str(), prefix.c_str(), page_limit, keys_only, cb, &ctx, &e);
    if (ctx.failure)
        std::rethrow_exception(ctx.failure);
    if (pages < 0)
        throw_error(e);
    return pages;
}

Json Client::kv_apply(const Json &ops, const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_kv_apply(c_, opt_c(tenant), ops.text().c_str(), &t.p, &e), e);
    return Json::raw(t.take());
}

Json Client::kv_namespaces(const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_kv_namespaces(c_, opt_c(tenant), &t.p, &e), e);
    return Json::raw(t.take());
}

Json Client::push(const Json &items, const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_push(c_, opt_c(tenant), items.text().c_str(), &t.p, &e), e);
    return Json::raw(t.take());
}

std::optional<PopResult> Client::pop(const std::string &queue, const PopOptions &o,
                                     const std::optional<std::string> &tenant)
{
    queen_pop_options po{};
    po.queue = queue.c_str();
    po.partition = opt_c(o.partition);
    po.consumer_group = opt_c(o.consumer_group);
    po.batch = o.batch;
    po.lease_seconds = o.lease_seconds;
    po.auto_ack = o.auto_ack;
    po.wait = o.wait;
    po.timeout_ms = o.timeout_ms;
    queen_client_error e;
    CText t;
    check(queen_client_pop(c_, opt_c(tenant), &po, &t.p, &e), e);
    if (t.p == nullptr)
        return std::nullopt;
    PopResult r;
    std::string text = t.take();
    Doc d(text);
    const jd *msgs = jd_get(d.root(), "messages");
    for (std::size_t i = 0; msgs != nullptr && i < msgs->n; i++)
        r.messages.push_back(to_message(msgs->items[i], d.root()));
    r.lease_id = member_str(d.root(), "leaseId");
    r.partition_id = member_str(d.root(), "partitionId");
    r.raw = Json::raw(std::move(text));
    return r;
}

Json Client::ack(const Json &acks, const std::optional<std::string> &consumer_group,
                 const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_ack(c_, opt_c(tenant), acks.text().c_str(), opt_c(consumer_group), &t.p, &e), e);
    return Json::raw(t.take());
}

Json Client::lease_extend(const std::string &lease_id, int seconds, const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_lease_extend(c_, opt_c(tenant), lease_id.c_str(), seconds, &t.p, &e), e);
    return Json::raw(t.take());
}

Json Client::configure(const std::string &queue, const std::optional<Json> &options,
                       const std::optional<std::string> &ns_label, const std::optional<std::string> &task_label,
                       const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_configure_ex(c_, opt_c(tenant), queue.c_str(), options ? options->text().c_str() : nullptr,
                                    opt_c(ns_label), opt_c(task_label), nullptr, &t.p, &e),
          e);
    return Json::raw(t.take());
}

Json Client::queues(const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_queues(c_, opt_c(tenant), &t.p, &e), e);
    return Json::raw(t.take());
}

Json Client::queue_delete(const std::string &queue, const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_queue_delete(c_, opt_c(tenant), queue.c_str(), &t.p, &e), e);
    return Json::raw(t.take());
}

TxResult Client::commit(const Transaction &tx, const std::optional<std::string> &tenant)
{
    queen_client_error e;
    CText t;
    check(queen_client_tx_commit(c_, opt_c(tenant), tx.c_handle(), &t.p, &e), e);
    TxResult r;
    std::string text = t.take();
    Doc d(text);
    r.success = jd_true(d.root(), "success");
    r.reason = member_str(d.root(), "reason");
    auto fi = member_int(d.root(), "failedIndex");
    if (fi)
        r.failed_index = static_cast<int>(*fi);
    r.raw = Json::raw(std::move(text));
    return r;
}

void Client::consume(const ConsumeOptions &o, const Handler &handler, StopToken &stop)
{
    // The C loop calls back on its worker threads; a handler's exception
    // fails its message (the broker redelivers it) and never crosses C.
    auto cb = [](void *ctx, const queen_client_message *m, queen_client_tx *tx) -> int {
        const Handler &h = *static_cast<const Handler *>(ctx);
        Message msg;
        msg.queue = m->queue != nullptr ? m->queue : "";
        msg.partition = m->partition != nullptr ? m->partition : "";
        msg.partition_id = m->partition_id != nullptr ? m->partition_id : "";
        msg.lease_id = m->lease_id != nullptr ? m->lease_id : "";
        msg.transaction_id = m->transaction_id != nullptr ? m->transaction_id : "";
        if (m->consumer_group != nullptr)
            msg.consumer_group = m->consumer_group;
        msg.data = Json::raw(m->payload_json != nullptr ? m->payload_json : "null");
        msg.raw = Json::raw(m->message_json != nullptr ? m->message_json : "null");
        msg.delivery_attempt = m->delivery_attempt;
        Transaction borrowed(tx);
        try {
            return h(msg, borrowed) ? QUEEN_CLIENT_HANDLED : QUEEN_CLIENT_FAILED;
        } catch (...) {
            return QUEEN_CLIENT_FAILED;
        }
    };
    queen_client_consume_options co{};
    co.tenant = opt_c(o.tenant);
    co.queue = o.queue.c_str();
    co.partition = opt_c(o.partition);
    co.consumer_group = opt_c(o.consumer_group);
    co.concurrency = o.concurrency;
    co.batch = o.batch;
    co.lease_seconds = o.lease_seconds;
    co.poll_ms = o.poll_ms;
    co.handler = cb;
    co.ctx = const_cast<Handler *>(&handler);
    co.stop = reinterpret_cast<volatile int *>(&stop.flag_); // see StopToken::flag_
    queen_client_error e;
    check(queen_client_consume(c_, &co, &e), e);
}

} // namespace queen_cpp
