// The conformance runner of the C++ client: every scenario of
// clients/conformance/scenarios (that folder's README is the contract), one
// GoogleTest each, made through queen_cpp::Client against real brokers that
// tests/client/conformance_harness starts on the private PostgreSQL.
//
// Scenario files are read with libqueenclient's raw-span reader (jdoc), so
// patterns compare number texts exactly and "$raw" sees the bytes the
// client handed back.
#include "queen_client.hpp"
#include "support.hpp"

extern "C" {
#include "jdoc.h"
}

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

using queen_test::Harness;

namespace {

struct DocFree {
    void operator()(jd *d) const { jd_free(d); }
};
using DocPtr = std::unique_ptr<jd, DocFree>;

DocPtr parse(const std::string &text)
{
    char msg[128] = "";
    DocPtr d(jd_parse(text.data(), text.size(), msg, sizeof msg));
    if (!d)
        throw std::runtime_error(std::string("not JSON (") + msg + "): " + text);
    return d;
}

std::string raw(const jd *v) { return std::string(v->raw, v->rawlen); }
std::string str(const jd *v) { return v != nullptr && v->type == JD_STRING ? std::string(v->str, v->strlen) : ""; }
std::string quote(const std::string &s) { return nlohmann::json(s).dump(); }

// ---- variables -------------------------------------------------------------------------

using Vars = std::map<std::string, std::string>; // name -> JSON text

std::string var_text(const std::string &json)
{
    DocPtr d = parse(json);
    return d->type == JD_STRING ? str(d.get()) : json;
}

std::string subst_string(const std::string &s, const Vars &vs)
{
    std::string out;
    std::size_t i = 0;
    while (i < s.size()) {
        std::size_t open = s.find("${", i), close = open == std::string::npos ? open : s.find('}', open);
        if (close == std::string::npos) {
            out += s.substr(i);
            break;
        }
        out += s.substr(i, open - i);
        auto it = vs.find(s.substr(open + 2, close - open - 2));
        if (it == vs.end())
            throw std::runtime_error("unknown variable in " + s);
        out += var_text(it->second);
        i = close + 1;
    }
    return out;
}

void subst_into(const jd *v, const Vars &vs, std::string &out)
{
    switch (v->type) {
    case JD_STRING: {
        std::string s = str(v);
        if (s.size() > 3 && s.compare(0, 2, "${") == 0 && s.back() == '}' &&
            s.find('}', 2) == s.size() - 1) {
            auto it = vs.find(s.substr(2, s.size() - 3));
            if (it == vs.end())
                throw std::runtime_error("unknown variable " + s);
            out += it->second;
            return;
        }
        out += quote(subst_string(s, vs));
        return;
    }
    case JD_ARRAY:
    case JD_OBJECT:
        out += v->type == JD_ARRAY ? "[" : "{";
        for (std::size_t i = 0; i < v->n; i++) {
            if (i > 0)
                out += ",";
            if (v->type == JD_OBJECT)
                out += quote(subst_string(v->keys[i], vs)) + ":";
            subst_into(v->items[i], vs, out);
        }
        out += v->type == JD_ARRAY ? "]" : "}";
        return;
    default:
        out += raw(v);
    }
}

std::string subst(const jd *v, const Vars &vs)
{
    if (v == nullptr)
        return "{}";
    std::string out;
    subst_into(v, vs, out);
    return out;
}

// ---- patterns --------------------------------------------------------------------------

const char *type_name(const jd *v)
{
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
    return names[v->type];
}

bool equal(const jd *a, const jd *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case JD_NULL: return true;
    case JD_BOOL: return a->boolean == b->boolean;
    case JD_NUMBER: return jd_number_equal(a->raw, a->rawlen, b->raw, b->rawlen);
    case JD_STRING: return str(a) == str(b);
    case JD_ARRAY:
        if (a->n != b->n)
            return false;
        for (std::size_t i = 0; i < a->n; i++)
            if (!equal(a->items[i], b->items[i]))
                return false;
        return true;
    case JD_OBJECT:
        if (a->n != b->n)
            return false;
        for (std::size_t i = 0; i < a->n; i++) {
            const jd *o = jd_get(b, a->keys[i]);
            if (o == nullptr || !equal(a->items[i], o))
                return false;
        }
        return true;
    }
    return false;
}

// "" when p matches v, else why not.
std::string match(const jd *p, const jd *v, const std::string &path)
{
    auto at = [&](const std::string &m) { return "at " + (path.empty() ? std::string("/") : path) + ": " + m; };
    if (p->type == JD_OBJECT && p->n == 1 && p->keys[0][0] == '$') {
        std::string m = p->keys[0];
        const jd *arg = p->items[0];
        if (m == "$absent")
            return v == nullptr ? "" : at("present, expected absent");
        if (v == nullptr)
            return at("absent");
        if (m == "$any")
            return "";
        if (m == "$type") {
            std::string t = str(arg);
            bool integer = v->type == JD_NUMBER && raw(v).find_first_of(".eE") == std::string::npos;
            return t == type_name(v) || (t == "integer" && integer) ? "" : at(std::string(type_name(v)) + ", expected " + t);
        }
        if (m == "$raw")
            return str(arg) == raw(v) ? "" : at("raw text " + raw(v) + ", expected " + str(arg));
        if (m == "$len") {
            std::string n = std::to_string(v->n);
            return v->type == JD_ARRAY && jd_number_equal(arg->raw, arg->rawlen, n.data(), n.size())
                       ? ""
                       : at(raw(v) + ", expected length " + raw(arg));
        }
        if (m == "$ne")
            return !equal(arg, v) ? "" : at("equal to " + raw(v));
        return at("unknown matcher " + m);
    }
    if (v == nullptr)
        return at("absent, expected " + raw(p));
    if (p->type == JD_OBJECT) {
        if (v->type != JD_OBJECT)
            return at(std::string(type_name(v)) + ", expected an object");
        for (std::size_t i = 0; i < p->n; i++) {
            std::string why = match(p->items[i], jd_get(v, p->keys[i]), path + "/" + p->keys[i]);
            if (!why.empty())
                return why;
        }
        return "";
    }
    if (p->type == JD_ARRAY) {
        if (v->type != JD_ARRAY || v->n != p->n)
            return at(raw(v) + ", expected " + std::to_string(p->n) + " elements");
        for (std::size_t i = 0; i < p->n; i++) {
            std::string why = match(p->items[i], v->items[i], path + "/" + std::to_string(i));
            if (!why.empty())
                return why;
        }
        return "";
    }
    return equal(p, v) ? "" : at(raw(v) + ", expected " + raw(p));
}

// ---- the calls -------------------------------------------------------------------------

std::optional<std::string> opt_str(const jd *a, const char *k)
{
    const char *s = jd_str(a, k);
    return s != nullptr ? std::optional<std::string>(s) : std::nullopt;
}

queen_cpp::Json member(const jd *a, const char *k)
{
    const jd *v = jd_get(a, k);
    return v != nullptr ? queen_cpp::Json::raw(raw(v)) : queen_cpp::Json();
}

// The scenario's expiry. A write with neither or both does not compile in
// C++ (Expiry has no such value): the runner reports the refusal the client
// gives for a ttl of 0, as clients/API.md says every client refuses it.
queen_cpp::Expiry expiry(const jd *a)
{
    bool ttl = jd_get(a, "ttlSeconds") != nullptr;
    if (jd_true(a, "forever") && !ttl)
        return queen_cpp::Expiry::forever();
    return queen_cpp::Expiry::ttl(ttl && !jd_true(a, "forever") ? static_cast<long>(jd_int(a, "ttlSeconds", 0)) : 0);
}

std::optional<long long> opt_int(const jd *a, const char *k)
{
    return jd_get(a, k) != nullptr ? std::optional<long long>(jd_int(a, k, 0)) : std::nullopt;
}

std::optional<double> opt_double(const jd *a, const char *k)
{
    const jd *v = jd_get(a, k);
    return v != nullptr ? std::optional<double>(std::strtod(raw(v).c_str(), nullptr)) : std::nullopt;
}

std::string error_json(const queen_cpp::Error &e)
{
    std::string s = "{\"status\":" + std::to_string(e.status()) + ",\"code\":" + quote(e.code()) +
                    ",\"reason\":" + quote(e.reason()) + ",\"detail\":" + quote(e.detail()) +
                    ",\"retryAfter\":" + std::to_string(e.retry_after()) +
                    ",\"kind\":" + quote(e.kind());
    if (auto *p = dynamic_cast<const queen_cpp::PreconditionFailed *>(&e)) {
        s += ",\"failedIndex\":" + std::to_string(p->failed_index()) + ",\"kvReason\":" + quote(p->kv_reason()) +
             ",\"version\":" + std::to_string(p->version());
        if (p->value())
            s += ",\"value\":" + p->value()->text();
        else
            s += ",\"valueOmitted\":true,\"valueBytes\":" + std::to_string(p->value_bytes());
    }
    return s + "}";
}

std::string run_consume(queen_cpp::Client &c, const jd *a)
{
    struct State {
        std::mutex lock;
        std::vector<std::pair<std::string, int>> deliveries; // in first-delivery order
        int handled = 0, failed = 0;
    } s;
    const jd *h = jd_get(a, "handler");
    bool fail_first = jd_true(h, "failFirst");
    long sleep_ms = static_cast<long>(jd_int(h, "sleepMs", 0));
    std::optional<queen_cpp::Json> effect;
    if (h != nullptr && jd_get(h, "effect") != nullptr)
        effect = member(h, "effect");
    int stop_after = static_cast<int>(jd_int(a, "stopAfter", 1));
    queen_cpp::StopToken stop;
    queen_cpp::ConsumeOptions o;
    o.queue = str(jd_get(a, "queue"));
    o.tenant = opt_str(a, "tenant");
    o.consumer_group = opt_str(a, "group");
    o.concurrency = static_cast<int>(jd_int(a, "concurrency", 1));
    o.batch = static_cast<int>(jd_int(a, "batch", 1));
    o.lease_seconds = static_cast<int>(jd_int(a, "leaseSeconds", 30));
    o.poll_ms = 300;
    auto handler = [&](const queen_cpp::Message &m, queen_cpp::Transaction &tx) {
        int delivery;
        {
            std::lock_guard<std::mutex> g(s.lock);
            auto it = std::find_if(s.deliveries.begin(), s.deliveries.end(),
                                   [&](const auto &d) { return d.first == m.transaction_id; });
            if (it == s.deliveries.end())
                it = s.deliveries.insert(s.deliveries.end(), {m.transaction_id, 0});
            delivery = ++it->second;
        }
        if (sleep_ms > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms)); // the handler's work, not a wait
        if (fail_first && delivery == 1) {
            std::lock_guard<std::mutex> g(s.lock);
            s.failed++;
            return false;
        }
        if (effect)
            tx.kv(*effect);
        std::lock_guard<std::mutex> g(s.lock);
        if (++s.handled >= stop_after)
            stop.request();
        return true;
    };
    // The watchdog ends a loop that never stops, so the step fails instead of hanging.
    long timeout_ms = static_cast<long>(jd_int(a, "timeoutMs", 30000));
    std::mutex wl;
    std::condition_variable wc;
    bool done = false, fired = false;
    std::thread watchdog([&] {
        std::unique_lock<std::mutex> g(wl);
        if (!wc.wait_for(g, std::chrono::milliseconds(timeout_ms), [&] { return done; })) {
            fired = true;
            stop.request();
        }
    });
    try {
        c.consume(o, handler, stop);
    } catch (...) {
        {
            std::lock_guard<std::mutex> g(wl);
            done = true;
        }
        wc.notify_all();
        watchdog.join();
        throw;
    }
    {
        std::lock_guard<std::mutex> g(wl);
        done = true;
    }
    wc.notify_all();
    watchdog.join();
    if (fired)
        throw std::runtime_error("consume did not stop within " + std::to_string(timeout_ms) + " ms");
    std::string out = "{\"handled\":" + std::to_string(s.handled) + ",\"failed\":" + std::to_string(s.failed) +
                      ",\"deliveries\":{";
    for (std::size_t i = 0; i < s.deliveries.size(); i++)
        out += (i > 0 ? "," : "") + quote(s.deliveries[i].first) + ":" + std::to_string(s.deliveries[i].second);
    return out + "}}";
}

// One call through the C++ client: the result's JSON text (errors throw).
std::string do_call(queen_cpp::Client &c, const std::string &call, const jd *a)
{
    auto tenant = opt_str(a, "tenant");
    auto ns = str(jd_get(a, "ns")), key = str(jd_get(a, "key"));
    bool required = jd_true(a, "required");
    if (call == "health")
        return "{\"version\":" + quote(c.health()) + "}";
    if (call == "kv_get")
        return c.kv_get(ns, key, tenant).raw.text();
    if (call == "kv_put")
        return c.kv_put(ns, key, member(a, "value"), expiry(a), opt_int(a, "expect"), required, tenant).raw.text();
    if (call == "kv_put_if_absent")
        return c.kv_put_if_absent(ns, key, member(a, "value"), expiry(a), required, tenant).raw.text();
    if (call == "kv_delete")
        return c.kv_delete(ns, key, opt_int(a, "expect"), required, tenant).raw.text();
    if (call == "kv_incr")
        return c.kv_incr(ns, key, opt_double(a, "delta").value_or(0), expiry(a), opt_double(a, "min"),
                         opt_double(a, "max"), required, tenant)
            .raw.text();
    if (call == "kv_get_many") {
        std::vector<std::string> keys;
        const jd *k = jd_get(a, "keys");
        for (std::size_t i = 0; k != nullptr && i < k->n; i++)
            keys.push_back(str(k->items[i]));
        return c.kv_get_many(ns, keys, tenant).text();
    }
    if (call == "kv_get_prefix")
        return c.kv_get_prefix(ns, str(jd_get(a, "prefix")), opt_str(a, "after"),
                               static_cast<int>(jd_int(a, "limit", 0)), jd_true(a, "keysOnly"), tenant)
            .raw.text();
    if (call == "kv_scan") {
        nlohmann::json keys = nlohmann::json::array();
        int pages = c.kv_scan(
            ns, str(jd_get(a, "prefix")), [&](const queen_cpp::Json &row) { keys.push_back(row.parse<nlohmann::json>()["key"]); },
            static_cast<int>(jd_int(a, "limit", 0)), false, tenant);
        return "{\"keys\":" + keys.dump() + ",\"pages\":" + std::to_string(pages) + "}";
    }
    if (call == "kv_apply")
        return c.kv_apply(member(a, "ops"), tenant).text();
    if (call == "kv_namespaces")
        return c.kv_namespaces(tenant).text();
    if (call == "push")
        return c.push(member(a, "items"), tenant).text();
    if (call == "pop") {
        queen_cpp::PopOptions o;
        o.partition = opt_str(a, "partition");
        o.consumer_group = opt_str(a, "group");
        o.batch = static_cast<int>(jd_int(a, "batch", 0));
        o.lease_seconds = static_cast<int>(jd_int(a, "leaseSeconds", 0));
        o.auto_ack = jd_true(a, "autoAck");
        o.wait = jd_true(a, "wait");
        o.timeout_ms = static_cast<int>(jd_int(a, "timeoutMs", 0));
        auto r = c.pop(str(jd_get(a, "queue")), o, tenant);
        return r ? r->raw.text() : "null";
    }
    if (call == "ack")
        return c.ack(member(a, "acks"), opt_str(a, "group"), tenant).text();
    if (call == "lease_extend")
        return c.lease_extend(str(jd_get(a, "leaseId")), static_cast<int>(jd_int(a, "seconds", 60)), tenant).text();
    if (call == "configure") {
        std::optional<queen_cpp::Json> options;
        if (jd_get(a, "options") != nullptr)
            options = member(a, "options");
        return c.configure(str(jd_get(a, "queue")), options, opt_str(a, "namespace"), opt_str(a, "task"), tenant)
            .text();
    }
    if (call == "queues")
        return c.queues(tenant).text();
    if (call == "queue_delete")
        return c.queue_delete(str(jd_get(a, "queue")), tenant).text();
    if (call == "transaction") {
        queen_cpp::Transaction tx;
        const jd *ops = jd_get(a, "ops");
        for (std::size_t i = 0; ops != nullptr && i < ops->n; i++) {
            const jd *op = ops->items[i], *x;
            if ((x = jd_get(op, "ack")) != nullptr)
                tx.ack(str(jd_get(x, "transactionId")), str(jd_get(x, "partitionId")), str(jd_get(x, "leaseId")),
                       opt_str(x, "status"), opt_str(x, "consumerGroup"));
            else if ((x = jd_get(op, "push")) != nullptr)
                tx.push(str(jd_get(x, "queue")), member(x, "payload"), opt_str(x, "partition"),
                        opt_str(x, "transactionId"));
            else if ((x = jd_get(op, "kv")) != nullptr)
                tx.kv(queen_cpp::Json::raw(raw(x)));
            else
                throw std::runtime_error("unknown transaction op " + raw(op));
        }
        const jd *leases = jd_get(a, "requiredLeases");
        for (std::size_t i = 0; leases != nullptr && i < leases->n; i++)
            tx.require_lease(str(leases->items[i]));
        return c.commit(tx, tenant).raw.text();
    }
    if (call == "consume")
        return run_consume(c, a);
    throw std::runtime_error("unknown call " + call);
}

// ---- needs: the brokers a scenario runs against ------------------------------------------

struct World {
    std::vector<int> brokers; // harness ids, in URL order; stopped at the end
    std::vector<std::string> urls;
    std::string tenant;
    ~World()
    {
        try {
            for (int id : brokers)
                Harness::get().stop(id); // stopping twice is harmless
            if (!tenant.empty())
                Harness::get().sql("DELETE FROM queen.kv_quota WHERE tenant_id = '" + tenant + "'");
        } catch (const std::exception &e) {
            std::fprintf(stderr, "conformance: teardown: %s\n", e.what());
        }
    }
    void start(const std::vector<std::string> &env = {})
    {
        auto b = Harness::get().start(env);
        brokers.push_back(b["id"].get<int>());
        urls.push_back(b["url"].get<std::string>());
    }
};

void world_setup(World &w, const jd *needs)
{
    Harness &h = Harness::get();
    if (needs == nullptr) {
        w.urls.push_back(h.main_url());
        return;
    }
    const jd *quota = jd_get(needs, "quota");
    if (jd_get(needs, "noBroker") != nullptr) {
        w.urls.push_back(h.dead_url());
    } else if (jd_get(needs, "saturated") != nullptr) {
        auto b = h.command("saturate");
        w.brokers.push_back(b["id"].get<int>());
        w.urls.push_back(b["url"].get<std::string>());
    } else if (quota != nullptr) {
        // A fresh tenant per scenario: its quota row is its own.
        std::string hex = queen_test::unique_token();
        std::string digits;
        for (char ch : hex)
            digits += "0123456789abcdef"[static_cast<unsigned char>(ch) % 16];
        w.tenant = "00000000-0000-4000-8000-" + digits.substr(0, 12);
        std::string cols, vals;
        for (std::size_t i = 0; i < quota->n; i++) {
            cols += std::string(", ") + quota->keys[i];
            vals += ", " + raw(quota->items[i]);
        }
        h.sql("INSERT INTO queen.kv_quota (tenant_id, enabled" + cols + ") VALUES ('" + w.tenant + "', true" + vals +
              ")");
        w.start({"QUEEN_TENANCY_HEADER=1", "QUEEN_TRUSTED_PROXY=1"});
    } else {
        int n = static_cast<int>(jd_int(needs, "brokers", 0));
        if (jd_get(needs, "deadUrlFirst") != nullptr)
            w.urls.push_back(h.dead_url());
        for (int i = 0; i < n; i++)
            w.start();
        if (n == 0)
            w.urls.push_back(h.main_url());
    }
}

// ---- a scenario ------------------------------------------------------------------------

class Scenario : public testing::Test {
public:
    explicit Scenario(std::shared_ptr<jd> file, const jd *doc) : file_(std::move(file)), doc_(doc) {}
    void TestBody() override;

private:
    std::shared_ptr<jd> file_; // keeps doc_ alive
    const jd *doc_;
};

void Scenario::TestBody()
{
    World w;
    world_setup(w, jd_get(doc_, "needs"));
    const jd *co = jd_get(doc_, "client");
    queen_cpp::Options o;
    o.urls = w.urls;
    o.max_attempts = static_cast<int>(jd_int(co, "max_attempts", 3));
    o.backoff_ms = static_cast<int>(jd_int(co, "backoff_ms", 50));
    o.max_backoff_ms = static_cast<int>(jd_int(co, "max_backoff_ms", 2000));
    o.timeout_ms = static_cast<int>(jd_int(co, "timeout_ms", 10000));
    queen_cpp::Client c(o);

    Vars vs;
    vs["run"] = quote(queen_test::unique_token());
    if (!w.tenant.empty())
        vs["tenant"] = quote(w.tenant);
    const jd *steps = jd_get(doc_, "steps");
    ASSERT_NE(steps, nullptr);
    for (std::size_t i = 0; i < steps->n; i++) {
        const jd *step = steps->items[i];
        std::string where = "step " + std::to_string(i);
        const char *harness = jd_str(step, "harness");
        if (harness != nullptr) {
            int b = static_cast<int>(jd_int(step, "broker", 0));
            ASSERT_TRUE(std::string(harness) == "stop_broker" && b < static_cast<int>(w.brokers.size()))
                << where << ": harness " << harness << " broker " << b << " is not something this runner can do";
            Harness::get().stop(w.brokers[static_cast<std::size_t>(b)]);
            continue;
        }
        std::string call = str(jd_get(step, "call"));
        where += " (" + call + ")";
        DocPtr args = parse(subst(jd_get(step, "args"), vs));
        DocPtr expect = parse(subst(jd_get(step, "expect"), vs));
        long long before = c.retries();
        std::string result, error;
        try {
            result = do_call(c, call, args.get());
        } catch (const queen_cpp::Error &e) {
            error = error_json(e);
        }
        long long retries = c.retries() - before;
        DocPtr got = parse(error.empty() ? result : error);
        const jd *want_result = jd_get(expect.get(), "result"), *want_error = jd_get(expect.get(), "error");
        if (want_error != nullptr) {
            ASSERT_FALSE(error.empty()) << where << ": succeeded with " << result << ", expected an error";
            std::string why = match(want_error, got.get(), "");
            ASSERT_TRUE(why.empty()) << where << ": error " << why << ": " << error;
        } else {
            ASSERT_TRUE(error.empty()) << where << ": failed with " << error;
            if (want_result != nullptr) {
                std::string why = match(want_result, got.get(), "");
                ASSERT_TRUE(why.empty()) << where << ": result " << why << ": " << result;
            }
        }
        if (jd_get(step, "retries") != nullptr) {
            ASSERT_EQ(retries, jd_int(step, "retries", -1)) << where << ": retries";
        }
        const jd *save = jd_get(step, "save");
        for (std::size_t k = 0; save != nullptr && k < save->n; k++) {
            const jd *at = jd_pointer(got.get(), save->items[k]->str);
            ASSERT_NE(at, nullptr) << where << ": save " << save->keys[k] << ": nothing at " << save->items[k]->str
                                   << " in " << (error.empty() ? result : error);
            vs[save->keys[k]] = raw(at);
        }
    }
}

// Registers one test per scenario, in file-name order.
void register_scenarios()
{
    const char *env = std::getenv("QUEEN_CONFORMANCE_DIR");
    std::string dir = env != nullptr ? env : "clients/conformance/scenarios";
    dirent **files;
    int nf = scandir(dir.c_str(), &files, nullptr, alphasort);
    if (nf < 0)
        throw std::runtime_error("no scenarios at " + dir);
    for (int f = 0; f < nf; f++) {
        std::string name = files[f]->d_name;
        std::free(files[f]);
        if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".json") != 0)
            continue;
        std::ifstream in(dir + "/" + name);
        std::stringstream text;
        text << in.rdbuf();
        std::shared_ptr<jd> doc(parse(text.str()).release(), DocFree());
        const jd *list = jd_get(doc.get(), "scenarios");
        for (std::size_t i = 0; list != nullptr && i < list->n; i++) {
            const jd *sc = list->items[i];
            std::string sname = str(jd_get(sc, "name"));
            std::replace(sname.begin(), sname.end(), '.', '_');
            testing::RegisterTest("conformance", sname.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                                  [doc, sc]() -> testing::Test * { return new Scenario(doc, sc); });
        }
    }
    std::free(files);
}

const bool registered = (register_scenarios(), true);

} // namespace
