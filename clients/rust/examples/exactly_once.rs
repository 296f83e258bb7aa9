//! exactly_once: a consumer whose effect happens once per message. Each
//! handled message adds a marker and a running total to the transaction
//! that acks it, so a redelivery finds the marker and rolls back whole.
//!
//!     QUEEN_URL=http://127.0.0.1:6632 cargo run --example exactly_once -- orders [COUNT]

use queen_client::{json, Client, ConsumeOptions, Options};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: exactly_once QUEUE [COUNT]   (QUEEN_URL, QUEEN_TOKEN from the environment)");
        std::process::exit(2);
    }
    let count: u64 = args.get(2).and_then(|c| c.parse().ok()).unwrap_or(0); // 0: until killed
    let urls = std::env::var("QUEEN_URL").unwrap_or_else(|_| "http://127.0.0.1:6632".into());
    let mut o = Options::with_urls(urls.split(',').map(str::to_string).collect());
    o.token = std::env::var("QUEEN_TOKEN").ok();
    let c = Client::new(o).unwrap_or_else(|e| panic!("{}", e));
    let (stop, handled) = (AtomicBool::new(false), AtomicU64::new(0));
    let mut co = ConsumeOptions::queue(&args[1]);
    co.concurrency = 4;
    let r = c.consume(&co, &stop, |m, tx| {
        let amount = m.data.get("amount").cloned().ok_or("no amount")?; // Err: delivered again
        tx.kv(json!({"op": "putIfAbsent", "ns": "orders", "key": format!("done/{}", m.transaction_id),
                     "value": true, "forever": true, "required": true}));
        tx.kv(json!({"op": "incr", "ns": "orders", "key": "total", "delta": amount, "forever": true}));
        println!("{}: {}", m.transaction_id, amount);
        if handled.fetch_add(1, Ordering::SeqCst) + 1 == count {
            stop.store(true, Ordering::SeqCst); // a clean stop: handlers in flight finish and settle
        }
        Ok::<(), &str>(())
    });
    if let Err(e) = r {
        eprintln!("{}", e);
        std::process::exit(1);
    }
}
