//! The conformance runner: every scenario of clients/conformance/scenarios,
//! as that folder's README defines them, against real brokers on the
//! private PostgreSQL. Prints "test NAME ... ok|FAILED" per scenario and a
//! closing "test result" line, like cargo's own harness.

mod support;

use queen_client::{
    AckItem, Client, ConsumeOptions, Cond, Error, Expiry, Options, PopOptions, PrefixOptions, PushItem, Tx,
};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::{psql, token, Broker};

type Vars = HashMap<String, Value>;
type Outcome = Result<(), String>;

// ---- variables -------------------------------------------------------------------

fn var_text(vs: &Vars, name: &str) -> Result<String, String> {
    match vs.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Ok(v.to_string()),
        None => Err(format!("unknown variable {}", name)),
    }
}

fn embed(s: &str, vs: &Vars) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find("${") {
        let end = match rest[open..].find('}') {
            Some(e) => open + e,
            None => break,
        };
        out.push_str(&rest[..open]);
        out.push_str(&var_text(vs, &rest[open + 2..end])?);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn subst(v: &Value, vs: &Vars) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => {
            if s.starts_with("${") && s.ends_with('}') && s.matches('}').count() == 1 {
                let name = &s[2..s.len() - 1];
                vs.get(name).cloned().ok_or_else(|| format!("unknown variable {}", name))?
            } else {
                Value::String(embed(s, vs)?)
            }
        }
        Value::Array(a) => Value::Array(a.iter().map(|e| subst(e, vs)).collect::<Result<_, _>>()?),
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, e) in m {
                out.insert(embed(k, vs)?, subst(e, vs)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

// ---- patterns --------------------------------------------------------------------

/// A number's exact decimal value as (negative, digits, exponent), digits
/// without leading or trailing zeros: equal values give equal keys.
fn decimal_key(text: &str) -> Option<(bool, String, i64)> {
    let (neg, t) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].trim_start_matches('+').parse::<i64>().ok()?),
        None => (t, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: String = format!("{}{}", int, frac).trim_start_matches('0').to_string();
    let mut exp = exp - frac.len() as i64;
    if digits.is_empty() {
        return Some((false, String::new(), 0));
    }
    while digits.ends_with('0') {
        digits.pop();
        exp += 1;
    }
    Some((neg, digits, exp))
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (decimal_key(&x.to_string()), decimal_key(&y.to_string()));
            x.is_some() && x == y
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).map_or(false, |w| equal(v, w)))
        }
        _ => a == b,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.to_string().contains(['.', 'e', 'E']) => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn matches(p: &Value, v: Option<&Value>, path: &str) -> Outcome {
    if let Value::Object(m) = p {
        if m.len() == 1 {
            let (k, arg) = m.iter().next().unwrap();
            if k.starts_with('$') {
                return matcher(k, arg, v, path);
            }
        }
    }
    let v = v.ok_or_else(|| format!("{}: absent, expected {}", path, p))?;
    match p {
        Value::Object(m) => {
            let obj = v.as_object().ok_or_else(|| format!("{}: {} is not an object", path, v))?;
            for (k, want) in m {
                matches(want, obj.get(k), &format!("{}/{}", path, k))?;
            }
            Ok(())
        }
        Value::Array(a) => {
            let arr = v.as_array().filter(|x| x.len() == a.len());
            let arr = arr.ok_or_else(|| format!("{}: {} is not an array of {}", path, v, a.len()))?;
            for (i, (want, got)) in a.iter().zip(arr).enumerate() {
                matches(want, Some(got), &format!("{}/{}", path, i))?;
            }
            Ok(())
        }
        _ if equal(p, v) => Ok(()),
        _ => Err(format!("{}: {}, expected {}", path, v, p)),
    }
}

fn matcher(name: &str, arg: &Value, v: Option<&Value>, path: &str) -> Outcome {
    if name == "$absent" {
        return match v {
            Some(v) => Err(format!("{}: present ({}), expected absent", path, v)),
            None => Ok(()),
        };
    }
    let v = v.ok_or_else(|| format!("{}: absent, expected {}", path, name))?;
    match name {
        "$any" => Ok(()),
        "$type" => {
            let (want, got) = (arg.as_str().unwrap_or(""), type_name(v));
            if want == got || (want == "number" && got == "integer") {
                Ok(())
            } else {
                Err(format!("{}: {} is {}, expected {}", path, v, got, want))
            }
        }
        // With arbitrary_precision a number's text is exactly the broker's.
        "$raw" if Some(v.to_string().as_str()) == arg.as_str() => Ok(()),
        "$raw" => Err(format!("{}: {}, expected the text {}", path, v, arg)),
        "$len" => match v.as_array() {
            Some(a) if Some(a.len() as u64) == arg.as_u64() => Ok(()),
            _ => Err(format!("{}: {} is not an array of {}", path, v, arg)),
        },
        "$ne" if equal(arg, v) => Err(format!("{}: {}, expected anything else", path, v)),
        "$ne" => Ok(()),
        _ => Err(format!("{}: unknown matcher {}", path, name)),
    }
}

// ---- calls -----------------------------------------------------------------------

fn s<'a>(a: &'a Value, k: &str) -> Option<&'a str> {
    a.get(k).and_then(Value::as_str)
}
fn n(a: &Value, k: &str) -> u64 {
    a.get(k).and_then(Value::as_u64).unwrap_or(0)
}
fn flag(a: &Value, k: &str) -> bool {
    a.get(k).and_then(Value::as_bool).unwrap_or(false)
}

/// The scenario's expiry. Neither, both, or a negative ttl has no Expiry
/// value (such a write does not compile): the runner reports the refusal
/// the client gives for Ttl(0), as every client refuses it.
fn expiry(a: &Value) -> Result<Expiry, queen_client::Error> {
    match (flag(a, "forever"), a.get("ttlSeconds")) {
        (true, None) => Ok(Expiry::Forever),
        (false, Some(t)) if t.as_u64().is_some() => Ok(Expiry::Ttl(t.as_u64().unwrap_or(0))),
        _ => Err(queen_client::Error::bad_argument("expiry: give ttl (seconds > 0) or forever")),
    }
}

fn cond(a: &Value) -> Cond {
    Cond {
        expect: a.get("expect").and_then(Value::as_i64),
        required: flag(a, "required"),
        min: a.get("min").and_then(Value::as_f64),
        max: a.get("max").and_then(Value::as_f64),
    }
}

fn push_item(v: &Value) -> PushItem {
    PushItem {
        queue: s(v, "queue").unwrap_or("").into(),
        partition: s(v, "partition").map(Into::into),
        payload: v.get("payload").cloned().unwrap_or(Value::Null),
        transaction_id: s(v, "transactionId").map(Into::into),
    }
}

fn ack_item(v: &Value) -> AckItem {
    AckItem {
        transaction_id: s(v, "transactionId").unwrap_or("").into(),
        partition_id: s(v, "partitionId").unwrap_or("").into(),
        lease_id: s(v, "leaseId").map(Into::into),
        status: s(v, "status").map(Into::into),
        error: s(v, "error").map(Into::into),
        consumer_group: s(v, "consumerGroup").map(Into::into),
    }
}

fn list(a: &Value, k: &str) -> Vec<Value> {
    a.get(k).and_then(Value::as_array).cloned().unwrap_or_default()
}

fn do_call(base: &Client, call: &str, a: &Value) -> Result<Result<Value, Error>, String> {
    let tenant_client;
    let c = match s(a, "tenant") {
        Some(t) => {
            tenant_client = base.with_tenant(t);
            &tenant_client
        }
        None => base,
    };
    let ns = s(a, "ns").unwrap_or("");
    let key = s(a, "key").unwrap_or("");
    let none = Value::Null;
    let value = a.get("value").unwrap_or(&none);
    Ok(match call {
        "health" => c.health(),
        "kv_get" => c.get(ns, key).map(|r| r.raw),
        "kv_put" => expiry(a).and_then(|e| c.put(ns, key, value, e, cond(a))).map(|r| r.raw),
        "kv_put_if_absent" => expiry(a).and_then(|e| c.put_if_absent(ns, key, value, e, cond(a))).map(|r| r.raw),
        "kv_delete" => c.delete(ns, key, cond(a)).map(|r| r.raw),
        "kv_incr" => {
            let delta = a.get("delta").and_then(Value::as_f64).unwrap_or(0.0);
            expiry(a).and_then(|e| c.incr(ns, key, delta, e, cond(a))).map(|r| r.raw)
        }
        "kv_get_many" => {
            let keys = list(a, "keys");
            let keys: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
            c.get_many(ns, &keys).map(|r| r.raw)
        }
        "kv_get_prefix" => {
            let o = PrefixOptions {
                after: s(a, "after").map(Into::into),
                limit: n(a, "limit") as u32,
                keys_only: flag(a, "keysOnly"),
            };
            c.get_prefix(ns, s(a, "prefix").unwrap_or(""), &o).map(|r| r.raw)
        }
        "kv_scan" => {
            let mut keys = Vec::new();
            c.scan(ns, s(a, "prefix").unwrap_or(""), n(a, "limit") as u32, false, |row| {
                keys.push(row.get("key").cloned().unwrap_or(Value::Null));
                true
            })
            .map(|pages| json!({"keys": keys, "pages": pages}))
        }
        "kv_apply" => c.apply(&list(a, "ops")).map(|rs| Value::Array(rs.into_iter().map(|r| r.raw).collect())),
        "kv_namespaces" => c.namespaces(),
        "push" => c
            .push(&list(a, "items").iter().map(push_item).collect::<Vec<_>>())
            .map(|rs| Value::Array(rs.into_iter().map(|r| r.raw).collect())),
        "pop" => {
            let mut o = PopOptions::queue(s(a, "queue").unwrap_or(""));
            o.partition = s(a, "partition").map(Into::into);
            o.group = s(a, "group").map(Into::into);
            o.batch = n(a, "batch") as u32;
            o.lease_seconds = n(a, "leaseSeconds") as u32;
            o.auto_ack = flag(a, "autoAck");
            if flag(a, "wait") {
                let ms = n(a, "timeoutMs");
                o.wait = Some(Duration::from_millis(if ms > 0 { ms } else { 30000 }));
            }
            c.pop(&o).map(|p| p.map(|p| p.raw).unwrap_or(Value::Null))
        }
        "ack" => c
            .ack(&list(a, "acks").iter().map(ack_item).collect::<Vec<_>>(), s(a, "group"))
            .map(|rs| Value::Array(rs.into_iter().map(|r| r.raw).collect())),
        "lease_extend" => c.lease_extend(s(a, "leaseId").unwrap_or(""), n(a, "seconds") as u32).map(|r| r.raw),
        "configure" => {
            c.configure(s(a, "queue").unwrap_or(""), a.get("options"), s(a, "namespace"), s(a, "task")).map(|r| r.raw)
        }
        "queues" => c.queues().map(|qs| json!({ "queues": qs.into_iter().map(|q| q.raw).collect::<Vec<_>>() })),
        "queue_delete" => c.queue_delete(s(a, "queue").unwrap_or("")),
        "transaction" => {
            let mut tx = Tx::new();
            for op in list(a, "ops") {
                if let Some(x) = op.get("ack") {
                    tx.ack(&ack_item(x));
                } else if let Some(x) = op.get("push") {
                    tx.push(&push_item(x));
                } else if let Some(x) = op.get("kv") {
                    tx.kv(x.clone());
                } else {
                    return Err(format!("unknown transaction op {}", op));
                }
            }
            for l in list(a, "requiredLeases") {
                tx.require_lease(l.as_str().unwrap_or(""));
            }
            c.commit(&tx).map(|r| r.raw)
        }
        "consume" => return run_consume(c, a),
        _ => return Err(format!("unknown call {}", call)),
    })
}

/// The consume loop with the handler the args describe.
fn run_consume(c: &Client, a: &Value) -> Result<Result<Value, Error>, String> {
    let none = json!({});
    let h = a.get("handler").unwrap_or(&none);
    let stop_after = n(a, "stopAfter");
    let timeout = Duration::from_millis(if n(a, "timeoutMs") > 0 { n(a, "timeoutMs") } else { 30000 });
    let mut o = ConsumeOptions::queue(s(a, "queue").unwrap_or(""));
    o.group = s(a, "group").map(Into::into);
    o.concurrency = n(a, "concurrency").max(1) as usize;
    o.batch = n(a, "batch").max(1) as u32;
    o.lease_seconds = if n(a, "leaseSeconds") > 0 { n(a, "leaseSeconds") as u32 } else { 30 };
    o.poll = Duration::from_millis(500);
    let stop = AtomicBool::new(false);
    let tally: Mutex<(u64, u64, Map<String, Value>)> = Mutex::new((0, 0, Map::new()));
    let (finished, waited) = mpsc::channel();
    let (o, stop, tally) = (&o, &stop, &tally);
    let outcome = thread::scope(|sc| {
        // Moves the sender in (a Sender is not Sync before Rust 1.72).
        let loop_thread = sc.spawn(move || {
            let r = c.consume(o, stop, |m, tx| {
                let first = {
                    let mut t = tally.lock().unwrap();
                    let seen = t.2.get(&m.transaction_id).and_then(Value::as_u64).unwrap_or(0) + 1;
                    t.2.insert(m.transaction_id.clone(), json!(seen));
                    seen == 1
                };
                if n(h, "sleepMs") > 0 {
                    thread::sleep(Duration::from_millis(n(h, "sleepMs")));
                }
                if flag(h, "failFirst") && first {
                    tally.lock().unwrap().1 += 1;
                    return Err("the first delivery fails");
                }
                if let Some(effect) = h.get("effect") {
                    tx.kv(effect.clone());
                }
                let mut t = tally.lock().unwrap();
                t.0 += 1;
                if stop_after > 0 && t.0 >= stop_after {
                    stop.store(true, Ordering::SeqCst);
                }
                Ok(())
            });
            let _ = finished.send(());
            r
        });
        let in_time = waited.recv_timeout(timeout).is_ok();
        stop.store(true, Ordering::SeqCst);
        let r = loop_thread.join().expect("the consume loop panicked");
        (in_time, r)
    });
    match outcome {
        (false, _) => Err(format!("the consume loop did not stop within {:?}", timeout)),
        (true, Err(e)) => Ok(Err(e)),
        (true, Ok(())) => {
            let t = tally.lock().unwrap();
            Ok(Ok(json!({"handled": t.0, "failed": t.1, "deliveries": Value::Object(t.2.clone())})))
        }
    }
}

// ---- needs: the brokers a scenario runs against ----------------------------------

struct World {
    brokers: Vec<Broker>,
    urls: Vec<String>,
    held: Option<TcpStream>,
    tenant: Option<String>,
}

impl Drop for World {
    fn drop(&mut self) {
        self.held.take();
        self.brokers.clear();
        if let Some(t) = &self.tenant {
            psql(&format!("DELETE FROM queen.kv_quota WHERE tenant_id = '{}'", t));
        }
    }
}

fn dead_url() -> String {
    format!("http://127.0.0.1:{}", support::free_port())
}

/// A broker with one connection place, taken here: every request after
/// that is answered 503 too_many_connections.
fn saturate(w: &mut World) -> Outcome {
    let b = Broker::spawn(&[
        ("QUEEN_MAX_CONNECTIONS", "1"),
        ("QUEEN_HTTP_THREADS", "1"),
        ("QUEEN_IDLE_TIMEOUT_MS", "600000"),
        ("QUEEN_REQUEST_READ_TIMEOUT_MS", "600000"),
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    // The held connection must be the broker's first, before any probe.
    loop {
        if let Ok(conn) = TcpStream::connect(("127.0.0.1", b.port)) {
            w.held = Some(conn);
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("the saturated broker never listened (log: {})", b.log));
        }
        thread::sleep(Duration::from_millis(20));
    }
    loop {
        match support::health_status(b.port) {
            Some(503) => break,
            Some(200) => return Err("the held connection did not take the broker's only place".into()),
            _ if Instant::now() > deadline => return Err(format!("the saturated broker never answered ({})", b.log)),
            _ => thread::sleep(Duration::from_millis(20)),
        }
    }
    w.urls.push(b.base.clone());
    w.brokers.push(b);
    Ok(())
}

fn setup_world(needs: Option<&Value>, shared: &str) -> Result<World, String> {
    let mut w = World { brokers: Vec::new(), urls: Vec::new(), held: None, tenant: None };
    let needs = match needs {
        None => {
            w.urls.push(shared.to_string());
            return Ok(w);
        }
        Some(n) => n,
    };
    if needs.get("noBroker").is_some() {
        w.urls.push(dead_url());
    } else if needs.get("saturated").is_some() {
        saturate(&mut w)?;
    } else if let Some(Value::Object(quota)) = needs.get("quota") {
        // A fresh tenant per scenario: its quota row is its own.
        let t = token();
        let tenant = format!("00000000-0000-4000-8000-{:0>12}", &t[..12.min(t.len())]);
        let tenant: String = tenant.chars().map(|ch| if ch.is_ascii_hexdigit() || ch == '-' { ch } else { 'a' }).collect();
        let (mut cols, mut vals) = (String::new(), String::new());
        for (k, v) in quota {
            cols.push_str(&format!(", {}", k));
            vals.push_str(&format!(", {}", v));
        }
        psql(&format!("INSERT INTO queen.kv_quota (tenant_id, enabled{}) VALUES ('{}', true{})", cols, tenant, vals));
        w.tenant = Some(tenant);
        let b = Broker::start(&[("QUEEN_TENANCY_HEADER", "1"), ("QUEEN_TRUSTED_PROXY", "1")]);
        w.urls.push(b.base.clone());
        w.brokers.push(b);
    } else {
        if needs.get("deadUrlFirst").is_some() {
            w.urls.push(dead_url());
        }
        let count = n(needs, "brokers");
        for _ in 0..count {
            let b = Broker::start(&[]);
            w.urls.push(b.base.clone());
            w.brokers.push(b);
        }
        if count == 0 {
            w.urls.push(shared.to_string());
        }
    }
    Ok(w)
}

// ---- scenarios -------------------------------------------------------------------

fn run_scenario(sc: &Value, shared: &str) -> Outcome {
    let mut w = setup_world(sc.get("needs"), shared)?;
    let none = json!({});
    let co = sc.get("client").unwrap_or(&none);
    let ms = |k: &str, d: u64| Duration::from_millis(co.get(k).and_then(Value::as_u64).unwrap_or(d));
    let mut o = Options::with_urls(w.urls.clone());
    o.max_attempts = co.get("max_attempts").and_then(Value::as_u64).unwrap_or(3) as u32;
    o.backoff = ms("backoff_ms", 50);
    o.max_backoff = ms("max_backoff_ms", 2000);
    o.timeout = ms("timeout_ms", 10000);
    let c = Client::new(o).map_err(|e| e.to_string())?;
    let mut vs: Vars = HashMap::new();
    vs.insert("run".into(), json!(token()));
    if let Some(t) = &w.tenant {
        vs.insert("tenant".into(), json!(t));
    }
    let steps = sc.get("steps").and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, step) in steps.iter().enumerate() {
        if let Some(h) = s(step, "harness") {
            let b = n(step, "broker") as usize;
            if h != "stop_broker" || b >= w.brokers.len() {
                return Err(format!("step {}: harness {} broker {} is not something this runner can do", i, h, b));
            }
            w.brokers[b].stop();
            continue;
        }
        let call = s(step, "call").ok_or_else(|| format!("step {}: no call", i))?;
        let at = |why: String| format!("step {} ({}): {}", i, call, why);
        let args = subst(step.get("args").unwrap_or(&none), &vs).map_err(at)?;
        let expect = subst(step.get("expect").unwrap_or(&Value::Null), &vs).map_err(at)?;
        let before = c.retries();
        let outcome = do_call(&c, call, &args).map_err(at)?;
        let retries = c.retries() - before;
        let got = match &outcome {
            Ok(v) => v.clone(),
            Err(e) => e.to_json(),
        };
        match (expect.get("error"), &outcome) {
            (Some(_), Ok(v)) => return Err(at(format!("succeeded with {}, expected an error", v))),
            (Some(want), Err(_)) => matches(want, Some(&got), "").map_err(|m| at(format!("error {}: {}", m, got)))?,
            (None, Err(_)) => return Err(at(format!("failed with {}", got))),
            (None, Ok(_)) => {
                if let Some(want) = expect.get("result") {
                    matches(want, Some(&got), "").map_err(|m| at(format!("result {}: {}", m, got)))?;
                }
            }
        }
        if let Some(want) = step.get("retries").and_then(Value::as_u64) {
            if want != retries {
                return Err(at(format!("{} retries, expected {}", retries, want)));
            }
        }
        if let Some(Value::Object(save)) = step.get("save") {
            for (name, ptr) in save {
                let ptr = ptr.as_str().unwrap_or("");
                let v = got.pointer(ptr).ok_or_else(|| at(format!("save {}: nothing at {} in {}", name, ptr, got)))?;
                vs.insert(name.clone(), v.clone());
            }
        }
    }
    Ok(())
}

fn main() {
    if support::env().is_none() {
        println!("QUEEN_BIN and QUEEN_TEST_PG_URL are unset: run through make test-rust");
        println!("test result: ok. 0 passed; 0 failed; 1 ignored");
        return;
    }
    let dir = std::env::var("QUEEN_CONFORMANCE_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance/scenarios").to_string());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("no scenarios at {}: {}", dir, e))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().map_or(false, |x| x == "json"))
        .collect();
    files.sort();
    let only = std::env::var("QUEEN_CONFORMANCE_ONLY").ok(); // a name substring, to run a few while working
    let shared = Broker::start(&[]);
    let (mut passed, mut failed) = (0, 0);
    for f in files {
        let text = std::fs::read_to_string(&f).expect("a scenario file");
        let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {}", f.display(), e));
        for sc in doc.get("scenarios").and_then(Value::as_array).cloned().unwrap_or_default() {
            let name = s(&sc, "name").unwrap_or("?").to_string();
            if only.as_deref().map_or(false, |o| !name.contains(o)) {
                continue;
            }
            match run_scenario(&sc, &shared.base) {
                Ok(()) => {
                    passed += 1;
                    println!("test conformance::{} ... ok", name);
                }
                Err(why) => {
                    failed += 1;
                    println!("test conformance::{} ... FAILED\n    {}", name, why);
                }
            }
        }
    }
    drop(shared);
    let verdict = if failed == 0 { "ok" } else { "FAILED" };
    println!("\ntest result: {}. {} passed; {} failed", verdict, passed, failed);
    if failed > 0 {
        std::process::exit(1);
    }
}
