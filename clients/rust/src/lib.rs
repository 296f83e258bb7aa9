//! The Rust client of the Queen broker: KV with explicit expiry and
//! compare-and-set, batches and prefix paging, push, pop, ack and lease
//! renewal, a consume loop and the transaction builder (ack + push + kv in
//! one commit), over HTTP/1.1 with keep-alive to one or more brokers.
//!
//! Blocking, on std::net, with https:// through the system's OpenSSL
//! (feature `tls`, on by default); `AsyncClient` (feature `async`) gives
//! the same calls as futures on tokio. Errors carry an [`ErrorKind`], one
//! of clients/API.md's nine, to branch on; push, ack, lease and queue calls
//! answer typed results that keep the broker's whole element in `raw`.
//! Values are `serde_json::Value` built with `arbitrary_precision`, so 0.1
//! and 12345678901234567890 keep their text both ways. The client validates nothing the broker validates: it shapes
//! each call, sends it, and hands back what the broker answered.

#[cfg(feature = "async")]
mod async_client;
mod client;
mod consume;
mod error;
mod http;
mod kv;
mod messages;
mod transaction;

#[cfg(feature = "async")]
pub use async_client::AsyncClient;
pub use client::{Client, Options, RetryHook};
pub use consume::ConsumeOptions;
pub use error::{Error, ErrorKind, Precondition, Result};
pub use kv::{Cond, Expiry, KvResult, PrefixOptions};
pub use messages::{
    AckItem, AckResult, LeaseExtended, Message, PopOptions, PopResult, PushItem, PushResult, QueueConfigured, QueueInfo,
};
pub use transaction::{Tx, TxResult};
pub use serde_json::{json, Value};
