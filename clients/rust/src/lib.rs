//! The Rust client of the Queen broker: KV with explicit expiry and
//! compare-and-set, batches and prefix paging, push, pop, ack and lease
//! renewal, a consume loop and the transaction builder (ack + push + kv in
//! one commit), over HTTP/1.1 with keep-alive to one or more brokers.
//!
//! Blocking, on std::net. Values are `serde_json::Value` built with
//! `arbitrary_precision`, so 0.1 and 12345678901234567890 keep their text
//! both ways. The client validates nothing the broker validates: it shapes
//! each call, sends it, and hands back what the broker answered.

mod client;
mod consume;
mod error;
mod http;
mod kv;
mod messages;
mod transaction;

pub use client::{Client, Options, RetryHook};
pub use consume::ConsumeOptions;
pub use error::{Error, Precondition, Result};
pub use kv::{Cond, Expiry, KvResult, PrefixOptions};
pub use messages::{AckItem, Message, PopOptions, PopResult, PushItem};
pub use transaction::{Tx, TxResult};
pub use serde_json::{json, Value};
