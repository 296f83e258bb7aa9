//! The typed error every failing call returns: the broker's error envelope
//! as sent, a KV precondition verdict, or the client's own failure.

use serde_json::{json, Value};
use std::fmt;

/// A KV precondition verdict's members, as the broker sent them: which op
/// lost, why, and the live row.
#[derive(Debug, Clone, PartialEq)]
pub struct Precondition {
    pub failed_index: i64,
    /// exists | absent | version | limit | type
    pub kv_reason: String,
    /// The live row's version (0: none), its text as sent.
    pub version: Value,
    /// The live value (Null: none).
    pub value: Value,
    pub value_omitted: bool,
    pub value_bytes: u64,
}

/// What kind of failure an [`Error`] is: clients/API.md's nine kinds, the
/// same set in every Queen client, so a caller branches on one of them
/// (`match e.kind() { ErrorKind::Unavailable => later, ... }`). The finer
/// case stays on the error: its `status`, `code`, `reason` and `detail`
/// (a 413 is `BadRequest` with status 413; a 403 `feature_gated` is `Auth`
/// with that code; a timeout is `Transport` with code `timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// 400, 413, 422 and any 4xx not below, or an argument the client
    /// refused before sending (status 0, code bad_argument); nothing was written.
    BadRequest,
    /// 401, 403: no token, one that does not verify, or one that does not allow the call.
    Auth,
    /// 404: no such queue, lease or route.
    NotFound,
    /// 409: a lease not held, a transaction id seen before.
    Conflict,
    /// A required KV op lost (200 kv_precondition): [`Error::precondition`] says which and why.
    Precondition,
    /// 429: the tenant's rate; `retry_after` says when.
    RateLimited,
    /// 503: the broker or its database cannot serve now.
    Unavailable,
    /// 500 and any other 5xx.
    Server,
    /// No usable answer: code unreachable (nothing was sent), timeout,
    /// transport (the connection broke) or bad_response.
    Transport,
}

impl ErrorKind {
    /// The kind's name in clients/API.md (and the conformance suite).
    pub fn as_str(&self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::Auth => "auth",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Precondition => "precondition",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Server => "server",
            ErrorKind::Transport => "transport",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What went wrong: its [`ErrorKind`] and the envelope's members.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    /// HTTP status; 0: no HTTP answer; 200: a KV precondition verdict.
    pub status: u16,
    /// The envelope's code, or the client's own: unreachable, timeout,
    /// transport, bad_response.
    pub code: String,
    /// The envelope's reason (the client's own: the same as code).
    pub reason: String,
    /// The envelope's detail, or the client's words.
    pub detail: String,
    /// The last answer's Retry-After seconds; 0: none.
    pub retry_after: u64,
    /// HTTP attempts made for the call, the first included.
    pub attempts: u32,
    /// Present for a precondition verdict (code kv_precondition).
    pub precondition: Option<Box<Precondition>>,
}

impl Error {
    pub(crate) fn own(code: &str, detail: impl Into<String>) -> Error {
        Error {
            status: 0,
            code: code.to_string(),
            reason: code.to_string(),
            detail: detail.into(),
            retry_after: 0,
            attempts: 0,
            precondition: None,
        }
    }

    /// The client's own refusal of an argument, before anything was sent
    /// (status 0, code bad_argument, kind bad_request).
    pub fn bad_argument(detail: impl Into<String>) -> Error {
        Error::own("bad_argument", detail)
    }

    /// clients/API.md's error kind, from the status and the code alone, so
    /// the kind and the members never disagree.
    pub fn kind(&self) -> ErrorKind {
        match self.status {
            _ if self.is_precondition() => ErrorKind::Precondition,
            0 if self.code == "bad_argument" => ErrorKind::BadRequest,
            // A status with an answer that did not read is still no usable answer.
            _ if self.code == "bad_response" => ErrorKind::Transport,
            0 => ErrorKind::Transport,
            401 | 403 => ErrorKind::Auth,
            404 => ErrorKind::NotFound,
            409 => ErrorKind::Conflict,
            429 => ErrorKind::RateLimited,
            503 => ErrorKind::Unavailable,
            s if s >= 500 => ErrorKind::Server,
            s if s >= 400 => ErrorKind::BadRequest,
            _ => ErrorKind::Transport,
        }
    }

    pub(crate) fn bad_response(status: u16, detail: impl Into<String>) -> Error {
        let mut e = Error::own("bad_response", detail);
        e.status = status;
        e
    }

    /// A required KV op lost: nothing of the call was written.
    pub fn is_precondition(&self) -> bool {
        self.code == "kv_precondition"
    }

    /// The error as the conformance suite names its members.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "status": self.status, "code": self.code, "reason": self.reason, "detail": self.detail,
            "retryAfter": self.retry_after, "attempts": self.attempts, "kind": self.kind().as_str(),
        });
        if let Some(p) = &self.precondition {
            let m = v.as_object_mut().expect("an object");
            m.insert("failedIndex".into(), json!(p.failed_index));
            m.insert("kvReason".into(), json!(p.kv_reason));
            m.insert("version".into(), p.version.clone());
            m.insert("value".into(), p.value.clone());
            m.insert("valueOmitted".into(), json!(p.value_omitted));
            m.insert("valueBytes".into(), json!(p.value_bytes));
        }
        v
    }

    fn take_precondition(body: &Value) -> Precondition {
        let omitted = body.get("valueOmitted").and_then(Value::as_bool).unwrap_or(false);
        Precondition {
            failed_index: body.get("failedIndex").and_then(Value::as_i64).unwrap_or(0),
            kv_reason: body.get("kvReason").and_then(Value::as_str).unwrap_or("").to_string(),
            version: body.get("version").cloned().unwrap_or_else(|| json!(0)),
            value: body.get("value").cloned().unwrap_or(Value::Null),
            value_omitted: omitted,
            value_bytes: body.get("valueBytes").and_then(Value::as_u64).unwrap_or(0),
        }
    }

    /// A 200 {"ok":false,"reason":"kv_precondition",...} as the typed error.
    pub(crate) fn kv_verdict(body: &Value) -> Option<Error> {
        let lost = body.get("ok").and_then(Value::as_bool) == Some(false)
            && body.get("reason").and_then(Value::as_str) == Some("kv_precondition");
        if !lost {
            return None;
        }
        Some(Error {
            status: 200,
            code: "kv_precondition".into(),
            reason: "kv_precondition".into(),
            detail: "a required op lost".into(),
            retry_after: 0,
            attempts: 0,
            precondition: Some(Box::new(Error::take_precondition(body))),
        })
    }

    /// A 4xx/5xx answer; a body that is not the envelope keeps its status
    /// and says so.
    pub(crate) fn envelope(status: u16, body: &[u8], retry_after: u64) -> Error {
        let parsed: Option<Value> = serde_json::from_slice(body).ok();
        if let Some(v) = parsed.as_ref().filter(|v| v.get("code").and_then(Value::as_str).is_some()) {
            let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let mut detail = text("detail");
            if detail.is_empty() {
                detail = text("error");
            }
            return Error {
                status,
                code: text("code"),
                reason: text("reason"),
                detail,
                retry_after,
                attempts: 0,
                precondition: v.get("failedIndex").map(|_| Box::new(Error::take_precondition(v))),
            };
        }
        let code = format!("http_{}", status);
        Error {
            status,
            code: code.clone(),
            reason: code,
            detail: format!("HTTP {} without the error envelope", status),
            retry_after,
            attempts: 0,
            precondition: None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.precondition {
            Some(p) if self.is_precondition() => {
                // clients/API.md's one wording, whatever the language.
                write!(f, "kv precondition failed at op {}: {}", p.failed_index, p.kv_reason)
            }
            _ if self.status == 0 => write!(f, "queen: {}: {}", self.code, self.detail),
            _ => write!(f, "queen: HTTP {} {}/{}: {}", self.status, self.code, self.reason, self.detail),
        }
    }
}

impl std::error::Error for Error {}

/// The result of every call.
pub type Result<T> = std::result::Result<T, Error>;
