//! The transaction builder and POST /api/v1/transaction.

use crate::client::{Client, Request};
use crate::error::Result;
use crate::kv::{incr_op, op_head, write_op, Cond, Expiry};
use crate::messages::{AckItem, PushItem};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// One transaction: acks, pushes and kv ops that commit together or not at
/// all. Operations keep the order they were added in; consecutive pushes
/// share one push operation; kv ops follow the operations.
#[derive(Debug, Clone, Default)]
pub struct Tx {
    ops: Vec<Value>,
    kv: Vec<Value>,
    leases: Vec<String>,
    open_push: bool,  // the last operation is a push still taking items
    carries_id: bool, // an ack or an item with a transaction id: a repeat rolls back whole
}

impl Tx {
    pub fn new() -> Tx {
        Tx::default()
    }

    /// Adds the settlement of a popped message.
    pub fn ack(&mut self, a: &AckItem) -> &mut Tx {
        self.open_push = false;
        let mut op = a.to_json();
        if let Value::Object(m) = &mut op {
            m.remove("error");
            let mut typed = Map::new();
            typed.insert("type".into(), json!("ack"));
            typed.extend(std::mem::take(m));
            *m = typed;
        }
        self.ops.push(op);
        self.carries_id = true;
        self
    }

    /// Adds one message to push.
    pub fn push(&mut self, item: &PushItem) -> &mut Tx {
        if !self.open_push {
            self.ops.push(json!({"type": "push", "items": []}));
            self.open_push = true;
        }
        if let Some(Value::Array(items)) = self.ops.last_mut().and_then(|o| o.get_mut("items")) {
            items.push(item.to_json());
        }
        if item.transaction_id.is_some() {
            self.carries_id = true;
        }
        self
    }

    /// Adds a kv op (a wire op object).
    pub fn kv(&mut self, op: Value) -> &mut Tx {
        self.kv.push(op);
        self
    }

    /// Adds a put, as `Client::put` takes it; Err (nothing added) for a bad expiry.
    pub fn kv_put(&mut self, ns: &str, key: &str, value: &Value, expiry: Expiry, cond: Cond) -> Result<&mut Tx> {
        Ok(self.kv(write_op("put", ns, key, value, expiry, &cond)?))
    }

    /// Adds a putIfAbsent, as `Client::put_if_absent` takes it.
    pub fn kv_put_if_absent(&mut self, ns: &str, key: &str, value: &Value, expiry: Expiry, cond: Cond) -> Result<&mut Tx> {
        Ok(self.kv(write_op("putIfAbsent", ns, key, value, expiry, &cond)?))
    }

    /// Adds a delete, as `Client::delete` takes it.
    pub fn kv_delete(&mut self, ns: &str, key: &str, cond: Cond) -> &mut Tx {
        let mut m = op_head("delete", ns, Some(key));
        cond.write_into(&mut m);
        self.kv(Value::Object(m))
    }

    /// Adds an incr, as `Client::incr` takes it.
    pub fn kv_incr(&mut self, ns: &str, key: &str, delta: f64, expiry: Expiry, cond: Cond) -> Result<&mut Tx> {
        Ok(self.kv(incr_op(ns, key, delta, expiry, &cond)?))
    }

    /// The commit fails unless lease_id is still held.
    pub fn require_lease(&mut self, lease_id: &str) -> &mut Tx {
        self.leases.push(lease_id.to_string());
        self
    }

    /// The bundle as it is sent.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if !self.ops.is_empty() {
            m.insert("operations".into(), Value::Array(self.ops.clone()));
        }
        if !self.kv.is_empty() {
            m.insert("kv".into(), Value::Array(self.kv.clone()));
        }
        if !self.leases.is_empty() {
            m.insert("requiredLeases".into(), json!(self.leases));
        }
        Value::Object(m)
    }
}

/// The transaction's answer. A bundle that rolled back is not an error:
/// success() is false, with reason() (and a lost kv op's verdict members).
#[derive(Debug, Clone, PartialEq)]
pub struct TxResult {
    pub raw: Value,
}

impl TxResult {
    pub fn success(&self) -> bool {
        self.raw.get("success").and_then(Value::as_bool).unwrap_or(false)
    }
    pub fn reason(&self) -> Option<&str> {
        self.raw.get("reason").and_then(Value::as_str)
    }
}

impl Client {
    /// Sends the bundle. Err: it was refused (4xx) or no answer was had; a
    /// rollback is Ok with success() false. Retried on 429/503/timeouts
    /// only when it carries a transaction id.
    pub fn commit(&self, tx: &Tx) -> Result<TxResult> {
        let reply = self.call(Request {
            method: "POST",
            path: "/api/v1/transaction".into(),
            body: Some(tx.to_json().to_string().into_bytes()),
            safe: tx.carries_id,
            extra: Duration::ZERO,
        })?;
        Ok(TxResult { raw: reply.json()? })
    }
}
