//! The consume loop: worker threads pop with a short long poll and run the
//! handler; while it runs, the message's lease is renewed.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::messages::{AckItem, Message, PopOptions};
use crate::transaction::Tx;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

/// What a consume loop pops and how.
#[derive(Debug, Clone)]
pub struct ConsumeOptions {
    pub queue: String,
    pub partition: Option<String>,
    /// Consumer group; None: the queue mode.
    pub group: Option<String>,
    /// Handlers at once (default 1).
    pub concurrency: usize,
    /// Messages per pop (default 1).
    pub batch: u32,
    /// Per pop and per renewal (default 30).
    pub lease_seconds: u32,
    /// One long poll, and so the longest a stop waits for it (default 1 s).
    pub poll: Duration,
}

impl ConsumeOptions {
    pub fn queue(q: &str) -> ConsumeOptions {
        ConsumeOptions {
            queue: q.to_string(),
            partition: None,
            group: None,
            concurrency: 1,
            batch: 1,
            lease_seconds: 30,
            poll: Duration::from_secs(1),
        }
    }
}

impl Client {
    /// Pops with `concurrency` threads and calls handler once per message.
    /// Whatever the handler adds to tx (pushes, kv ops) commits in one
    /// transaction with the message's ack, so the effect happens once. An
    /// Err from the handler (or a panic, or a transaction that rolls back)
    /// settles the message as failed and the broker delivers it again.
    ///
    /// Clean stop: once stop is set (from any thread, a handler included),
    /// workers pop no more, handlers in flight finish and settle, and
    /// consume returns Ok. It returns the Err when the broker refuses the
    /// pop itself (a 4xx); unavailability is waited out.
    pub fn consume<F, E>(&self, o: &ConsumeOptions, stop: &AtomicBool, handler: F) -> Result<()>
    where
        F: Fn(&Message, &mut Tx) -> std::result::Result<(), E> + Sync,
    {
        let fatal: Mutex<Option<Error>> = Mutex::new(None);
        let stopping = || stop.load(Ordering::SeqCst) || fatal.lock().map(|f| f.is_some()).unwrap_or(true);
        let pop = PopOptions {
            queue: o.queue.clone(),
            partition: o.partition.clone(),
            group: o.group.clone(),
            batch: o.batch.max(1),
            lease_seconds: if o.lease_seconds == 0 { 30 } else { o.lease_seconds },
            auto_ack: false,
            wait: Some(if o.poll.is_zero() { Duration::from_secs(1) } else { o.poll }),
        };
        thread::scope(|s| {
            for _ in 0..o.concurrency.max(1) {
                s.spawn(|| {
                    let mut idle = Duration::from_millis(50);
                    while !stopping() {
                        match self.pop(&pop) {
                            Err(e) if (400..500).contains(&e.status) && e.status != 408 && e.status != 429 => {
                                let mut f = fatal.lock().unwrap_or_else(|p| p.into_inner());
                                if f.is_none() {
                                    *f = Some(e);
                                }
                                return;
                            }
                            Err(_) => {
                                // Unavailable: wait and pop again, longer each time, up to 2 s.
                                thread::sleep(idle);
                                idle = (idle * 2).min(Duration::from_secs(2));
                            }
                            Ok(None) => idle = Duration::from_millis(50),
                            Ok(Some(p)) => {
                                idle = Duration::from_millis(50);
                                // Every message popped is handled, even after a stop: it is leased to us.
                                for m in p.messages() {
                                    self.handle_one(&pop, &m, &handler);
                                }
                            }
                        }
                    }
                });
            }
        });
        match fatal.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn handle_one<F, E>(&self, o: &PopOptions, m: &Message, handler: &F)
    where
        F: Fn(&Message, &mut Tx) -> std::result::Result<(), E> + Sync,
    {
        if m.transaction_id.is_empty() || m.partition_id.is_empty() {
            return; // not a message this loop can settle; its lease runs out
        }
        let mut ack = AckItem::new(&m.transaction_id, &m.partition_id, &m.lease_id);
        ack.consumer_group = o.group.clone();
        let mut tx = Tx::new();
        tx.ack(&ack);
        let period = (Duration::from_secs(o.lease_seconds as u64) / 3).max(Duration::from_millis(100));
        let (done, renewing) = mpsc::channel::<()>();
        let handled = thread::scope(|s| {
            s.spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = renewing.recv_timeout(period) {
                    let _ = self.lease_extend(&m.lease_id, o.lease_seconds);
                }
            });
            let ok = matches!(catch_unwind(AssertUnwindSafe(|| handler(m, &mut tx))), Ok(Ok(())));
            drop(done);
            ok
        });
        let settled = handled && self.commit(&tx).map(|r| r.success()).unwrap_or(false);
        if !settled {
            // Best effort: if it is lost, the lease expires and the message comes back anyway.
            let _ = self.ack(&[ack.failed("handler failed")], o.group.as_deref());
        }
    }
}
