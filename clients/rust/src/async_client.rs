//! AsyncClient (feature `async`): the client's calls as futures on tokio,
//! the runtime Debian packages (librust-tokio-dev).
//!
//! Each call runs the blocking client on tokio's blocking pool
//! (`spawn_blocking`), so an await never stalls the runtime's workers, and
//! the calls keep exactly the blocking client's behaviour: its retries,
//! failover, keep-alive pool (shared with `blocking()`), TLS and timeouts.
//! The cost is one blocking-pool thread per call in flight (tokio caps the
//! pool at 512 by default); a long poll holds one for its wait. Dropping a
//! future does not stop its exchange: the call finishes in the background
//! and its answer is dropped, so bound a pop with `PopOptions::wait` rather
//! than with a dropped future (a dropped pop's lease expires and its
//! messages come back).
//!
//! The names are the blocking client's (clients/API.md's vocabulary, checked
//! for this type too by scripts/check-client-api.py); each takes owned
//! copies of its arguments so the future is `'static` and may be spawned.

use crate::client::{Client, Options};
use crate::consume::ConsumeOptions;
use crate::error::{Error, Result};
use crate::kv::{Cond, Expiry, KvResult, PrefixOptions};
use crate::messages::{
    AckItem, AckResult, LeaseExtended, PopOptions, PopResult, PushItem, PushResult, QueueConfigured, QueueInfo,
};
use crate::messages::Message;
use crate::transaction::{Tx, TxResult};
use serde_json::Value;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The async client: cheap to clone, calls from any task.
#[derive(Clone)]
pub struct AsyncClient {
    inner: Client,
}

impl AsyncClient {
    /// Makes a client; it connects on the first call.
    pub fn new(o: Options) -> Result<AsyncClient> {
        Ok(AsyncClient { inner: Client::new(o)? })
    }

    /// The blocking client under it (same connections), for code off the runtime.
    pub fn blocking(&self) -> &Client {
        &self.inner
    }

    /// Any blocking call as a future: `c.call(|c| c.get_prefix(...)).await`.
    /// Every method below is this. The future borrows nothing (arguments are
    /// copied when it is made), so it may be spawned as it is.
    pub fn call<T, F>(&self, f: F) -> impl Future<Output = Result<T>> + Send + 'static
    where
        F: FnOnce(&Client) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let c = self.inner.clone();
        async move {
            match tokio::task::spawn_blocking(move || f(&c)).await {
                Ok(r) => r,
                // A panic inside f is the caller's, not a transport failure:
                // it goes on in the awaiting task as it would have in a blocking call.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Only a runtime shutting down cancels a blocking task: no answer.
                Err(e) => Err(Error::own("transport", format!("the call's task ended: {}", e))),
            }
        }
    }

    /// The same client whose calls send tenant as x-queen-tenant (Client::with_tenant).
    pub fn with_tenant(&self, tenant: &str) -> AsyncClient {
        AsyncClient { inner: self.inner.with_tenant(tenant) }
    }

    /// The same client whose calls bound each attempt by d (Client::with_timeout):
    /// the way to put a deadline on one call, since dropping its future does not
    /// end the exchange under it.
    pub fn with_timeout(&self, d: Duration) -> AsyncClient {
        AsyncClient { inner: self.inner.with_timeout(d) }
    }

    pub fn health(&self) -> impl Future<Output = Result<Value>> + Send + 'static {
        self.call(|c| c.health())
    }

    pub fn get(&self, ns: &str, key: &str) -> impl Future<Output = Result<KvResult>> + Send + 'static {
        let (ns, key) = (ns.to_string(), key.to_string());
        self.call(move |c| c.get(&ns, &key))
    }

    pub fn put(
        &self,
        ns: &str,
        key: &str,
        value: &Value,
        expiry: Expiry,
        cond: Cond,
    ) -> impl Future<Output = Result<KvResult>> + Send + 'static {
        let (ns, key, value) = (ns.to_string(), key.to_string(), value.clone());
        self.call(move |c| c.put(&ns, &key, &value, expiry, cond))
    }

    pub fn delete(&self, ns: &str, key: &str, cond: Cond) -> impl Future<Output = Result<KvResult>> + Send + 'static {
        let (ns, key) = (ns.to_string(), key.to_string());
        self.call(move |c| c.delete(&ns, &key, cond))
    }

    pub fn put_if_absent(
        &self,
        ns: &str,
        key: &str,
        value: &Value,
        expiry: Expiry,
        cond: Cond,
    ) -> impl Future<Output = Result<KvResult>> + Send + 'static {
        let (ns, key, value) = (ns.to_string(), key.to_string(), value.clone());
        self.call(move |c| c.put_if_absent(&ns, &key, &value, expiry, cond))
    }

    pub fn incr(
        &self,
        ns: &str,
        key: &str,
        delta: f64,
        expiry: Expiry,
        cond: Cond,
    ) -> impl Future<Output = Result<KvResult>> + Send + 'static {
        let (ns, key) = (ns.to_string(), key.to_string());
        self.call(move |c| c.incr(&ns, &key, delta, expiry, cond))
    }

    pub fn get_many(&self, ns: &str, keys: &[&str]) -> impl Future<Output = Result<KvResult>> + Send + 'static {
        let ns = ns.to_string();
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        self.call(move |c| c.get_many(&ns, &keys.iter().map(String::as_str).collect::<Vec<_>>()))
    }

    /// One page (Client::get_prefix).
    pub fn get_prefix(
        &self,
        ns: &str,
        prefix: &str,
        o: &PrefixOptions,
    ) -> impl Future<Output = Result<KvResult>> + Send + 'static {
        let (ns, prefix, o) = (ns.to_string(), prefix.to_string(), o.clone());
        self.call(move |c| c.get_prefix(&ns, &prefix, &o))
    }

    /// Every page (Client::scan); f runs on the blocking pool, once per row
    /// in key order, and returns false to stop. Answers the pages read.
    pub fn scan<F>(
        &self,
        ns: &str,
        prefix: &str,
        page_limit: u32,
        keys_only: bool,
        f: F,
    ) -> impl Future<Output = Result<u32>> + Send + 'static
    where
        F: FnMut(&Value) -> bool + Send + 'static,
    {
        let (ns, prefix) = (ns.to_string(), prefix.to_string());
        self.call(move |c| c.scan(&ns, &prefix, page_limit, keys_only, f))
    }

    pub fn apply(&self, ops: &[Value]) -> impl Future<Output = Result<Vec<KvResult>>> + Send + 'static {
        let ops = ops.to_vec();
        self.call(move |c| c.apply(&ops))
    }

    pub fn namespaces(&self) -> impl Future<Output = Result<Value>> + Send + 'static {
        self.call(|c| c.namespaces())
    }

    pub fn push(&self, items: &[PushItem]) -> impl Future<Output = Result<Vec<PushResult>>> + Send + 'static {
        let items = items.to_vec();
        self.call(move |c| c.push(&items))
    }

    pub fn pop(&self, o: &PopOptions) -> impl Future<Output = Result<Option<PopResult>>> + Send + 'static {
        let o = o.clone();
        self.call(move |c| c.pop(&o))
    }

    pub fn ack(
        &self,
        acks: &[AckItem],
        group: Option<&str>,
    ) -> impl Future<Output = Result<Vec<AckResult>>> + Send + 'static {
        let (acks, group) = (acks.to_vec(), group.map(str::to_string));
        self.call(move |c| c.ack(&acks, group.as_deref()))
    }

    pub fn lease_extend(
        &self,
        lease_id: &str,
        seconds: u32,
    ) -> impl Future<Output = Result<LeaseExtended>> + Send + 'static {
        let lease_id = lease_id.to_string();
        self.call(move |c| c.lease_extend(&lease_id, seconds))
    }

    pub fn configure(
        &self,
        queue: &str,
        options: Option<&Value>,
        namespace: Option<&str>,
        task: Option<&str>,
    ) -> impl Future<Output = Result<QueueConfigured>> + Send + 'static {
        let (queue, options) = (queue.to_string(), options.cloned());
        let (namespace, task) = (namespace.map(str::to_string), task.map(str::to_string));
        self.call(move |c| c.configure(&queue, options.as_ref(), namespace.as_deref(), task.as_deref()))
    }

    pub fn queues(&self) -> impl Future<Output = Result<Vec<QueueInfo>>> + Send + 'static {
        self.call(|c| c.queues())
    }

    pub fn queue_delete(&self, queue: &str) -> impl Future<Output = Result<Value>> + Send + 'static {
        let queue = queue.to_string();
        self.call(move |c| c.queue_delete(&queue))
    }

    /// The consume loop (Client::consume) as one future: its worker threads
    /// and the handler run on the blocking pool, `concurrency` of them plus
    /// one per message in flight for its lease renewal. Set stop (from the
    /// handler, another task or a thread) and the future ends once the
    /// handlers in flight have settled.
    pub fn consume<F, E>(
        &self,
        o: &ConsumeOptions,
        stop: Arc<AtomicBool>,
        handler: F,
    ) -> impl Future<Output = Result<()>> + Send + 'static
    where
        F: Fn(&Message, &mut Tx) -> std::result::Result<(), E> + Send + Sync + 'static,
    {
        let o = o.clone();
        self.call(move |c| c.consume(&o, &stop, handler))
    }

    pub fn commit(&self, tx: &Tx) -> impl Future<Output = Result<TxResult>> + Send + 'static {
        let tx = tx.clone();
        self.call(move |c| c.commit(&tx))
    }
}
