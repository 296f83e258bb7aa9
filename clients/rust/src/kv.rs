//! The KV calls. get/put/delete go to the per-key routes (the key
//! percent-encoded once); the other ops are a one-op batch on POST
//! /api/v1/kv whose single element is the result.

use crate::client::{path_escape, Client, Reply, Request};
use crate::error::{Error, Result};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// A KV write's lifetime, a required argument of every write: there is no
/// "unset" value, so a write without an expiry does not compile. `Ttl(0)`
/// is refused before anything is sent (code bad_argument, kind
/// bad_request: clients/API.md, "Expiry").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Until deleted.
    Forever,
    /// Seconds (> 0).
    Ttl(u64),
}

impl Expiry {
    pub(crate) fn write_into(self, m: &mut Map<String, Value>) -> Result<()> {
        match self {
            Expiry::Forever => {
                m.insert("forever".into(), Value::Bool(true));
            }
            Expiry::Ttl(0) => return Err(Error::bad_argument("expiry: give ttl (seconds > 0) or forever (Ttl(0))")),
            Expiry::Ttl(s) => {
                m.insert("ttlSeconds".into(), json!(s));
            }
        }
        Ok(())
    }
}

/// A write's condition and bounds: `Cond::default()` for none.
#[derive(Debug, Clone, Default)]
pub struct Cond {
    /// Apply only while the key holds this version (0: absent).
    pub expect: Option<i64>,
    /// A lost condition is an Err with `is_precondition()` instead of a
    /// result with applied false.
    pub required: bool,
    /// An increment's bounds: past them it does not apply (reason limit).
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Cond {
    pub fn expect(version: i64) -> Cond {
        Cond { expect: Some(version), ..Cond::default() }
    }
    pub fn required() -> Cond {
        Cond { required: true, ..Cond::default() }
    }
    pub fn and_required(mut self) -> Cond {
        self.required = true;
        self
    }
    pub fn min(mut self, x: f64) -> Cond {
        self.min = Some(x);
        self
    }
    pub fn max(mut self, x: f64) -> Cond {
        self.max = Some(x);
        self
    }

    pub(crate) fn write_into(&self, m: &mut Map<String, Value>) {
        if let Some(v) = self.expect {
            m.insert("expect".into(), json!(v));
        }
        if self.required {
            m.insert("required".into(), Value::Bool(true));
        }
        if let Some(x) = self.min {
            m.insert("min".into(), number(x));
        }
        if let Some(x) = self.max {
            m.insert("max".into(), number(x));
        }
    }
}

/// The shortest text that reads back as the same f64, as a JSON number.
fn number(x: f64) -> Value {
    let text = if x.fract() == 0.0 && x.abs() < 1e15 { format!("{}", x as i64) } else { format!("{}", x) };
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// One result element of a KV op, as the broker sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct KvResult {
    pub raw: Value,
}

impl KvResult {
    fn flag(&self, k: &str) -> bool {
        self.raw.get(k).and_then(Value::as_bool).unwrap_or(false)
    }
    /// get: the key exists.
    pub fn found(&self) -> bool {
        self.flag("found")
    }
    /// put, putIfAbsent, delete, incr: the write happened.
    pub fn applied(&self) -> bool {
        self.flag("applied")
    }
    /// Why not applied: exists, absent, version, limit, type.
    pub fn reason(&self) -> Option<&str> {
        self.raw.get("reason").and_then(Value::as_str)
    }
    pub fn version(&self) -> Option<i64> {
        self.raw.get("version").and_then(Value::as_i64)
    }
    pub fn value(&self) -> Option<&Value> {
        self.raw.get("value")
    }
    /// getMany, getPrefix: the rows found.
    pub fn rows(&self) -> &[Value] {
        self.raw.get("rows").and_then(Value::as_array).map(|v| v.as_slice()).unwrap_or(&[])
    }
    /// getPrefix: more rows follow after next_after.
    pub fn truncated(&self) -> bool {
        self.flag("truncated")
    }
    pub fn next_after(&self) -> Option<&str> {
        self.raw.get("nextAfter").and_then(Value::as_str)
    }
}

/// A prefix page.
#[derive(Debug, Clone, Default)]
pub struct PrefixOptions {
    pub after: Option<String>,
    /// 0: the broker's default.
    pub limit: u32,
    pub keys_only: bool,
}

fn key_path(ns: &str, key: &str) -> String {
    format!("/api/v1/kv/{}/{}", path_escape(ns), path_escape(key))
}

/// A per-key route's answer: a verdict is the typed error.
fn kv_answer(reply: Reply) -> Result<KvResult> {
    let v = reply.json()?;
    match Error::kv_verdict(&v) {
        Some(e) => Err(e),
        None => Ok(KvResult { raw: v }),
    }
}

/// Whether every op leaves the same state however often it runs: reads,
/// and puts and deletes without expect.
fn repeatable(ops: &[Value]) -> bool {
    ops.iter().all(|op| {
        let name = op.get("op").and_then(Value::as_str).unwrap_or("");
        let expect = op.get("expect").is_some();
        matches!(name, "get" | "getMany" | "getPrefix") || (matches!(name, "put" | "delete") && !expect)
    })
}

pub(crate) fn op_head(op: &str, ns: &str, key: Option<&str>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("op".into(), json!(op));
    m.insert("ns".into(), json!(ns));
    if let Some(k) = key {
        m.insert("key".into(), json!(k));
    }
    m
}

/// The wire ops the one-op calls and the transaction builder share.
pub(crate) fn write_op(op: &str, ns: &str, key: &str, value: &Value, expiry: Expiry, cond: &Cond) -> Result<Value> {
    let mut m = op_head(op, ns, Some(key));
    m.insert("value".into(), value.clone());
    expiry.write_into(&mut m)?;
    cond.write_into(&mut m);
    Ok(Value::Object(m))
}

pub(crate) fn incr_op(ns: &str, key: &str, delta: f64, expiry: Expiry, cond: &Cond) -> Result<Value> {
    let mut m = op_head("incr", ns, Some(key));
    m.insert("delta".into(), number(delta));
    expiry.write_into(&mut m)?;
    cond.write_into(&mut m);
    Ok(Value::Object(m))
}

impl Client {
    /// Reads one key; a missing key is found() false, not an error.
    pub fn get(&self, ns: &str, key: &str) -> Result<KvResult> {
        kv_answer(self.call(Request {
            method: "GET",
            path: key_path(ns, key),
            body: None,
            safe: true,
            extra: Duration::ZERO,
        })?)
    }

    /// Writes value with its expiry; `Cond::expect(v)` makes it conditional.
    pub fn put(&self, ns: &str, key: &str, value: &Value, expiry: Expiry, cond: Cond) -> Result<KvResult> {
        let mut m = Map::new();
        m.insert("value".into(), value.clone());
        expiry.write_into(&mut m)?;
        cond.write_into(&mut m);
        kv_answer(self.call(Request {
            method: "PUT",
            path: key_path(ns, key),
            body: Some(Value::Object(m).to_string().into_bytes()),
            safe: cond.expect.is_none(),
            extra: Duration::ZERO,
        })?)
    }

    /// Removes a key (applied false, reason absent, when there was none).
    pub fn delete(&self, ns: &str, key: &str, cond: Cond) -> Result<KvResult> {
        let mut m = Map::new();
        cond.write_into(&mut m);
        kv_answer(self.call(Request {
            method: "DELETE",
            path: key_path(ns, key),
            body: if m.is_empty() { None } else { Some(Value::Object(m).to_string().into_bytes()) },
            safe: cond.expect.is_none(),
            extra: Duration::ZERO,
        })?)
    }

    /// Writes only when the key is absent (else reason exists, with the
    /// live value). Never retried once sent.
    pub fn put_if_absent(&self, ns: &str, key: &str, value: &Value, expiry: Expiry, cond: Cond) -> Result<KvResult> {
        self.one_op(write_op("putIfAbsent", ns, key, value, expiry, &cond)?)
    }

    /// Adds delta to a numeric key (cond's min and max bound it). Never
    /// retried once sent.
    pub fn incr(&self, ns: &str, key: &str, delta: f64, expiry: Expiry, cond: Cond) -> Result<KvResult> {
        self.one_op(incr_op(ns, key, delta, expiry, &cond)?)
    }

    /// Reads several keys of one namespace: rows found, missing not.
    pub fn get_many(&self, ns: &str, keys: &[&str]) -> Result<KvResult> {
        let mut m = op_head("getMany", ns, None);
        m.insert("keys".into(), json!(keys));
        self.one_op(Value::Object(m))
    }

    /// One page of the keys under prefix, in byte order.
    pub fn get_prefix(&self, ns: &str, prefix: &str, o: &PrefixOptions) -> Result<KvResult> {
        let mut m = op_head("getPrefix", ns, None);
        m.insert("prefix".into(), json!(prefix));
        if let Some(a) = &o.after {
            m.insert("after".into(), json!(a));
        }
        if o.limit != 0 {
            m.insert("limit".into(), json!(o.limit));
        }
        if o.keys_only {
            m.insert("keysOnly".into(), Value::Bool(true));
        }
        self.one_op(Value::Object(m))
    }

    /// Every row under prefix, page after page (page_limit rows each; 0:
    /// the broker's default) until a page is not truncated; f gets each row
    /// in key order and returns false to stop early. Returns the pages read.
    pub fn scan<F: FnMut(&Value) -> bool>(
        &self,
        ns: &str,
        prefix: &str,
        page_limit: u32,
        keys_only: bool,
        mut f: F,
    ) -> Result<u32> {
        let mut o = PrefixOptions { after: None, limit: page_limit, keys_only };
        let mut pages = 0;
        loop {
            let page = self.get_prefix(ns, prefix, &o)?;
            pages += 1;
            for row in page.rows() {
                if !f(row) {
                    return Ok(pages);
                }
            }
            match page.next_after() {
                Some(next) if page.truncated() => o.after = Some(next.to_string()),
                _ => return Ok(pages),
            }
        }
    }

    /// Runs ops (wire op objects) in one transaction; one result per op in
    /// order. A required op that lost is an Err with is_precondition(),
    /// naming its failed_index, and nothing of the batch was written.
    pub fn apply(&self, ops: &[Value]) -> Result<Vec<KvResult>> {
        let reply = self.call(Request {
            method: "POST",
            path: "/api/v1/kv".into(),
            body: Some(Value::Array(ops.to_vec()).to_string().into_bytes()),
            safe: repeatable(ops),
            extra: Duration::ZERO,
        })?;
        let status = reply.status;
        let v = reply.json()?;
        if let Some(e) = Error::kv_verdict(&v) {
            return Err(e);
        }
        match v.get("results").and_then(Value::as_array) {
            Some(rs) => Ok(rs.iter().map(|r| KvResult { raw: r.clone() }).collect()),
            None => Err(Error::bad_response(status, "a kv batch answered without results")),
        }
    }

    fn one_op(&self, op: Value) -> Result<KvResult> {
        let mut rs = self.apply(&[op])?;
        if rs.len() != 1 {
            return Err(Error::bad_response(200, "a one-op batch answered no element"));
        }
        Ok(rs.remove(0))
    }

    /// The namespaces holding keys.
    pub fn namespaces(&self) -> Result<Value> {
        self.json_call("GET", "/api/v1/resources/kv/namespaces".into(), None)
    }
}
