//! Push, pop, ack, lease renewal and the queues.

use crate::client::{path_escape, Client, Request};
use crate::error::Result;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// One message to push. A transaction id makes the push safe to repeat:
/// the broker answers a repeat "duplicate".
#[derive(Debug, Clone, PartialEq)]
pub struct PushItem {
    pub queue: String,
    pub partition: Option<String>,
    pub payload: Value,
    pub transaction_id: Option<String>,
}

impl PushItem {
    pub fn new(queue: &str, payload: Value) -> PushItem {
        PushItem { queue: queue.to_string(), partition: None, payload, transaction_id: None }
    }
    pub fn partition(mut self, p: &str) -> PushItem {
        self.partition = Some(p.to_string());
        self
    }
    pub fn transaction_id(mut self, id: &str) -> PushItem {
        self.transaction_id = Some(id.to_string());
        self
    }
    /// The wire item.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("queue".into(), json!(self.queue));
        if let Some(p) = &self.partition {
            m.insert("partition".into(), json!(p));
        }
        m.insert("payload".into(), self.payload.clone());
        if let Some(t) = &self.transaction_id {
            m.insert("transactionId".into(), json!(t));
        }
        Value::Object(m)
    }
}

/// Settles one popped message: status None (completed) or "failed" (the
/// broker delivers it again).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AckItem {
    pub transaction_id: String,
    pub partition_id: String,
    pub lease_id: Option<String>,
    pub status: Option<String>,
    pub error: Option<String>,
    pub consumer_group: Option<String>,
}

impl AckItem {
    pub fn new(transaction_id: &str, partition_id: &str, lease_id: &str) -> AckItem {
        AckItem {
            transaction_id: transaction_id.into(),
            partition_id: partition_id.into(),
            lease_id: Some(lease_id.into()),
            ..AckItem::default()
        }
    }
    pub fn failed(mut self, why: &str) -> AckItem {
        self.status = Some("failed".into());
        self.error = Some(why.into());
        self
    }
    /// The wire item.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("transactionId".into(), json!(self.transaction_id));
        m.insert("partitionId".into(), json!(self.partition_id));
        let optional = [
            ("leaseId", &self.lease_id),
            ("status", &self.status),
            ("error", &self.error),
            ("consumerGroup", &self.consumer_group),
        ];
        for (k, v) in optional {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        Value::Object(m)
    }
}

/// What to pop and how.
#[derive(Debug, Clone, Default)]
pub struct PopOptions {
    pub queue: String,
    pub partition: Option<String>,
    /// Consumer group; None: the queue mode.
    pub group: Option<String>,
    /// 0: the broker's default.
    pub batch: u32,
    /// 0: the queue's.
    pub lease_seconds: u32,
    pub auto_ack: bool,
    /// Some: long poll up to this long for a message.
    pub wait: Option<Duration>,
}

impl PopOptions {
    pub fn queue(q: &str) -> PopOptions {
        PopOptions { queue: q.to_string(), ..PopOptions::default() }
    }
}

/// One popped message.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub transaction_id: String,
    pub partition_id: String,
    pub lease_id: String,
    pub queue: String,
    pub partition: String,
    pub consumer_group: Option<String>,
    pub data: Value,
    pub delivery_attempt: i64,
    /// The whole message object as sent.
    pub raw: Value,
}

impl Message {
    /// The ack settling this message (status None: completed), for
    /// `Client::ack` and `Tx::ack`.
    pub fn ack_item(&self) -> AckItem {
        AckItem {
            lease_id: if self.lease_id.is_empty() { None } else { Some(self.lease_id.clone()) },
            consumer_group: self.consumer_group.clone(),
            ..AckItem::new(&self.transaction_id, &self.partition_id, "")
        }
    }
}

/// A pop's body: the messages leased to the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct PopResult {
    pub raw: Value,
}

impl PopResult {
    pub fn messages(&self) -> Vec<Message> {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let list = self.raw.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
        list.into_iter()
            .map(|m| Message {
                transaction_id: text(&m, "transactionId").unwrap_or_default(),
                // The lease and partition may be the body's rather than each message's.
                partition_id: text(&m, "partitionId").or_else(|| text(&self.raw, "partitionId")).unwrap_or_default(),
                lease_id: text(&m, "leaseId").or_else(|| text(&self.raw, "leaseId")).unwrap_or_default(),
                queue: text(&m, "queue").unwrap_or_default(),
                partition: text(&m, "partition").unwrap_or_default(),
                consumer_group: text(&m, "consumerGroup"),
                data: m.get("data").cloned().unwrap_or(Value::Null),
                delivery_attempt: m.get("deliveryAttempt").and_then(Value::as_i64).unwrap_or(1),
                raw: m,
            })
            .collect()
    }
}

fn results_array(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a,
        other => vec![other],
    }
}

fn text(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_str)).map(str::to_string)
}

fn flag(v: &Value, k: &str) -> bool {
    v.get(k).and_then(Value::as_bool).unwrap_or(false)
}

/// One pushed item's result, in the order of the items.
#[derive(Debug, Clone, PartialEq)]
pub struct PushResult {
    /// queued, duplicate, or the broker's word for a refused item.
    pub status: String,
    pub transaction_id: Option<String>,
    pub message_id: Option<String>,
    /// The element as sent (every other member).
    pub raw: Value,
}

impl PushResult {
    fn from_raw(raw: Value) -> PushResult {
        PushResult {
            status: text(&raw, &["status"]).unwrap_or_default(),
            transaction_id: text(&raw, &["transactionId", "transaction_id"]),
            message_id: text(&raw, &["messageId", "message_id"]),
            raw,
        }
    }
    /// A repeat of a transaction id already queued: nothing new was queued.
    pub fn is_duplicate(&self) -> bool {
        self.status == "duplicate"
    }
}

/// One ack's result, in the order of the acks.
#[derive(Debug, Clone, PartialEq)]
pub struct AckResult {
    /// The message was settled.
    pub success: bool,
    pub transaction_id: Option<String>,
    /// A failed ack past the queue's retryLimit sent the message to the dead letters.
    pub dlq: bool,
    pub error: Option<String>,
    pub raw: Value,
}

impl AckResult {
    fn from_raw(raw: Value) -> AckResult {
        AckResult {
            success: flag(&raw, "success"),
            transaction_id: text(&raw, &["transactionId"]),
            dlq: flag(&raw, "dlq"),
            error: text(&raw, &["error"]),
            raw,
        }
    }
}

/// A lease renewal's answer: renewed false when the lease is gone (expired,
/// settled, unknown).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseExtended {
    pub lease_id: String,
    pub renewed: bool,
    /// ISO-8601; None when not renewed.
    pub expires_at: Option<String>,
    pub raw: Value,
}

/// A configure's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfigured {
    pub queue: String,
    pub queue_id: Option<String>,
    pub namespace: Option<String>,
    pub task: Option<String>,
    pub raw: Value,
}

/// One queue of the list.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueInfo {
    pub name: String,
    pub namespace: Option<String>,
    pub task: Option<String>,
    pub partitions: i64,
    pub total: i64,
    pub pending: i64,
    pub processing: i64,
    pub raw: Value,
}

impl QueueInfo {
    fn from_raw(raw: Value) -> QueueInfo {
        let count = |k: &str| raw.get("messages").and_then(|m| m.get(k)).and_then(Value::as_i64).unwrap_or(0);
        QueueInfo {
            name: text(&raw, &["name"]).unwrap_or_default(),
            namespace: text(&raw, &["namespace"]),
            task: text(&raw, &["task"]),
            partitions: raw.get("partitions").and_then(Value::as_i64).unwrap_or(0),
            total: count("total"),
            pending: count("pending"),
            processing: count("processing"),
            raw,
        }
    }
}

impl Client {
    /// Queues items; one result per item, in order.
    pub fn push(&self, items: &[PushItem]) -> Result<Vec<PushResult>> {
        let safe = !items.is_empty() && items.iter().all(|i| i.transaction_id.as_deref().map_or(false, |t| !t.is_empty()));
        let body = json!({"items": items.iter().map(PushItem::to_json).collect::<Vec<_>>()});
        let reply = self.call(Request {
            method: "POST",
            path: "/api/v1/push".into(),
            body: Some(body.to_string().into_bytes()),
            safe,
            extra: Duration::ZERO,
        })?;
        Ok(results_array(reply.json()?).into_iter().map(PushResult::from_raw).collect())
    }

    /// Leases messages; None when nothing was available. Never retried once
    /// sent: a lost answer's lease expires and the message comes back.
    pub fn pop(&self, o: &PopOptions) -> Result<Option<PopResult>> {
        let mut path = format!("/api/v1/pop/queue/{}", path_escape(&o.queue));
        if let Some(p) = &o.partition {
            path.push_str(&format!("/partition/{}", path_escape(p)));
        }
        let mut q: Vec<String> = Vec::new();
        if let Some(g) = &o.group {
            q.push(format!("consumerGroup={}", path_escape(g)));
        }
        if o.batch != 0 {
            q.push(format!("batch={}", o.batch));
        }
        if o.lease_seconds != 0 {
            q.push(format!("leaseSeconds={}", o.lease_seconds));
        }
        if o.auto_ack {
            q.push("autoAck=true".into());
        }
        if let Some(w) = o.wait {
            q.push(format!("wait=true&timeout={}", w.as_millis()));
        }
        if !q.is_empty() {
            path.push('?');
            path.push_str(&q.join("&"));
        }
        let reply = self.call(Request {
            method: "GET",
            path,
            body: None,
            safe: false,
            extra: o.wait.unwrap_or(Duration::ZERO),
        })?;
        if reply.status == 204 || reply.body.is_empty() {
            return Ok(None);
        }
        Ok(Some(PopResult { raw: reply.json()? }))
    }

    /// Settles messages (group: the consumer group). Safe to repeat: each
    /// ack names its message by transaction id.
    pub fn ack(&self, acks: &[AckItem], group: Option<&str>) -> Result<Vec<AckResult>> {
        let mut body = json!({"acknowledgments": acks.iter().map(AckItem::to_json).collect::<Vec<_>>()});
        if let Some(g) = group {
            body["consumerGroup"] = json!(g);
        }
        let list = results_array(self.json_call("POST", "/api/v1/ack/batch".into(), Some(&body))?);
        Ok(list.into_iter().map(AckResult::from_raw).collect())
    }

    /// Renews a lease for seconds more.
    pub fn lease_extend(&self, lease_id: &str, seconds: u32) -> Result<LeaseExtended> {
        let path = format!("/api/v1/lease/{}/extend", path_escape(lease_id));
        let raw = self.json_call("POST", path, Some(&json!({ "seconds": seconds })))?;
        Ok(LeaseExtended {
            lease_id: text(&raw, &["leaseId"]).unwrap_or_else(|| lease_id.to_string()),
            renewed: flag(&raw, "renewed"),
            expires_at: text(&raw, &["expiresAt"]),
            raw,
        })
    }

    /// Creates or changes a queue: options (leaseTime, retryLimit, ...) and
    /// the optional namespace and task labels.
    pub fn configure(
        &self,
        queue: &str,
        options: Option<&Value>,
        namespace: Option<&str>,
        task: Option<&str>,
    ) -> Result<QueueConfigured> {
        let mut body = json!({ "queue": queue });
        if let Some(o) = options {
            body["options"] = o.clone();
        }
        if let Some(n) = namespace {
            body["namespace"] = json!(n);
        }
        if let Some(t) = task {
            body["task"] = json!(t);
        }
        let raw = self.json_call("POST", "/api/v1/configure".into(), Some(&body))?;
        Ok(QueueConfigured {
            queue: text(&raw, &["queue"]).unwrap_or_else(|| queue.to_string()),
            queue_id: text(&raw, &["queueId"]),
            namespace: text(&raw, &["namespace"]),
            task: text(&raw, &["task"]),
            raw,
        })
    }

    /// Lists the queues.
    pub fn queues(&self) -> Result<Vec<QueueInfo>> {
        let raw = self.json_call("GET", "/api/v1/resources/queues".into(), None)?;
        let list = raw.get("queues").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(list.into_iter().map(QueueInfo::from_raw).collect())
    }

    /// Deletes a queue and its messages.
    pub fn queue_delete(&self, queue: &str) -> Result<Value> {
        self.json_call("DELETE", format!("/api/v1/resources/queues/{}", path_escape(queue)), None)
    }
}
