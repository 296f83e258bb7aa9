//! The client's own tests, against real brokers (tests/support) and, for
//! the failures a broker cannot be made to show on demand, a real TCP peer
//! that never answers or answers garbage.

mod support;

use queen_client::{
    json, AckItem, Client, ConsumeOptions, Cond, ErrorKind, Expiry, Options, PopOptions, PushItem, Tx, Value,
};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;
use support::{token, Broker};

fn b64url(data: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// An HS256 token, signed by the openssl command (std has no HMAC).
fn hs256(secret: &str, payload: &str) -> String {
    let signing = format!("{}.{}", b64url(br#"{"alg":"HS256","typ":"JWT"}"#), b64url(payload.as_bytes()));
    let mut child = Command::new("openssl")
        .args(["dgst", "-sha256", "-binary", "-hmac", secret])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("openssl");
    child.stdin.take().unwrap().write_all(signing.as_bytes()).unwrap();
    let out = child.wait_with_output().expect("openssl's signature");
    format!("{}.{}", signing, b64url(&out.stdout))
}

macro_rules! need_broker {
    () => {
        if support::env().is_none() {
            eprintln!("QUEEN_BIN and QUEEN_TEST_PG_URL are unset: run through make test-rust");
            return;
        }
    };
}

#[test]
fn bearer_token_reaches_an_authenticated_broker() {
    need_broker!();
    let secret = "rust-client-test-secret-of-32-byte";
    let b = Broker::start(&[("QUEEN_AUTH", "jwt"), ("QUEEN_JWT_SECRET", secret), ("QUEEN_JWT_DEFAULT_TENANT", "1")]);
    let ns = format!("rs-auth-{}", token());

    let anonymous = Client::new(Options::new(&b.base)).unwrap();
    let e = anonymous.put(&ns, "k", &json!(1), Expiry::Forever, Cond::default()).unwrap_err();
    assert_eq!((e.status, e.code.as_str(), e.attempts), (401, "unauthorized", 1), "{}", e);
    assert_eq!(e.kind(), ErrorKind::Auth);

    // With tokens tenancy is on: the token names a tenant of its own, granted kv here (so the suite runs alone).
    let tenant = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";
    support::psql(&format!(
        "INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ('{}', true) ON CONFLICT (tenant_id) DO UPDATE SET enabled = true",
        tenant
    ));
    let claims = format!(r#"{{"sub":"rust-client","role":"admin","tenant":"{}"}}"#, tenant);
    let c = Client::new(Options::new(&b.base).token(&hs256(secret, &claims))).unwrap();
    let big: Value = serde_json::from_str("12345678901234567890").unwrap();
    c.put(&ns, "k", &big, Expiry::Forever, Cond::default()).expect("a put with the token");
    let got = c.get(&ns, "k").expect("a get with the token");
    assert_eq!(got.value().map(Value::to_string).as_deref(), Some("12345678901234567890"));
    let q = format!("rs-auth-{}", token());
    c.push(&[PushItem::new(&q, json!("x")).transaction_id("t1")]).unwrap();
    let mut o = PopOptions::queue(&q);
    o.wait = Some(Duration::from_secs(5));
    let p = c.pop(&o).unwrap().expect("a message");
    assert_eq!(p.messages()[0].raw.get("producer"), Some(&json!("rust-client")));
}

/// A peer that accepts and answers `answer` (nothing when empty).
fn peer(answer: &'static str) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    thread::spawn(move || {
        let mut held = Vec::new();
        for mut conn in l.incoming().flatten() {
            if !answer.is_empty() {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(answer.as_bytes());
            }
            held.push(conn);
        }
    });
    url
}

#[test]
fn timeout_is_typed_and_retried_only_when_safe() {
    let mut o = Options::new(&peer(""));
    o.timeout = Duration::from_millis(150);
    o.max_attempts = 2;
    o.backoff = Duration::from_millis(1);
    let c = Client::new(o).unwrap();
    let before = c.retries();
    let e = c.get("ns", "k").unwrap_err();
    assert_eq!((e.status, e.code.as_str(), c.retries() - before), (0, "timeout", 1), "{}", e);
    let before = c.retries();
    let e = c.incr("ns", "n", 1.0, Expiry::Forever, Cond::default()).unwrap_err();
    assert_eq!((e.code.as_str(), c.retries() - before), ("timeout", 0), "{}", e);
}

/// A deadline for one call (clients/API.md): with_timeout bounds that view's
/// attempts, not the client's other calls, on the blocking and the async client.
#[test]
fn with_timeout_bounds_one_call() {
    let url = peer("");
    let mut o = Options::new(&url);
    o.timeout = Duration::from_secs(60);
    o.max_attempts = 1;
    let c = Client::new(o).unwrap();
    let t0 = std::time::Instant::now();
    let e = c.with_tenant("00000000-0000-4000-8000-000000000001").with_timeout(Duration::from_millis(200))
        .get("ns", "k").unwrap_err();
    assert_eq!((e.status, e.code.as_str()), (0, "timeout"), "{}", e);
    assert!(t0.elapsed() < Duration::from_secs(10), "the call took {:?}", t0.elapsed());
    #[cfg(feature = "async")]
    {
        let ac = queen_client::AsyncClient::new(Options::new(&url)).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let t0 = std::time::Instant::now();
        let e = rt.block_on(ac.with_timeout(Duration::from_millis(200)).health()).unwrap_err();
        assert_eq!(e.code.as_str(), "timeout", "{}", e);
        assert!(t0.elapsed() < Duration::from_secs(10), "the async call took {:?}", t0.elapsed());
    }
}

#[test]
fn errors_have_a_kind_to_branch_on() {
    // The finer case of a transport failure is the code, under the one kind.
    let mut o = Options::new(&format!("http://127.0.0.1:{}", support::free_port()));
    o.max_attempts = 1;
    let e = Client::new(o).unwrap().get("ns", "k").unwrap_err();
    assert_eq!((e.kind(), e.kind().as_str(), e.code.as_str()), (ErrorKind::Transport, "transport", "unreachable"));
    let mut o = Options::new(&peer(""));
    o.timeout = Duration::from_millis(100);
    o.max_attempts = 1;
    let e = Client::new(o).unwrap().get("ns", "k").unwrap_err();
    assert_eq!((e.kind(), e.code.as_str()), (ErrorKind::Transport, "timeout"));
    let url = peer("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 70\r\nConnection: close\r\n\r\n{\"error\":\"x\",\"code\":\"unavailable\",\"reason\":\"closing\",\"detail\":\"\"}     ");
    let mut o = Options::new(&url);
    o.max_attempts = 1;
    let e = Client::new(o).unwrap().get("ns", "k").unwrap_err();
    assert_eq!((e.status, e.kind()), (503, ErrorKind::Unavailable), "{}", e);
    assert_eq!(format!("{}", ErrorKind::Precondition), "precondition");
}

#[test]
fn push_ack_lease_and_queue_results_are_typed() {
    need_broker!();
    let b = Broker::start(&[]);
    let c = Client::new(Options::new(&b.base)).unwrap();
    let q = format!("rs-typed-{}", token());
    let options = json!({"retryLimit": 5});
    let made = c.configure(&q, Some(&options), Some("typed-ns"), None).unwrap();
    assert_eq!((made.queue.as_str(), made.namespace.as_deref()), (q.as_str(), Some("typed-ns")));
    assert!(made.queue_id.is_some(), "{}", made.raw);
    let items = [PushItem::new(&q, json!({"n": 1})).transaction_id("t-1")];
    let pushed = c.push(&items).unwrap();
    assert_eq!((pushed.len(), pushed[0].status.as_str(), pushed[0].is_duplicate()), (1, "queued", false), "{:?}", pushed);
    assert_eq!(pushed[0].transaction_id.as_deref(), Some("t-1"));
    assert!(pushed[0].message_id.is_some(), "{}", pushed[0].raw);
    assert!(c.push(&items).unwrap()[0].is_duplicate());
    let listed = c.queues().unwrap();
    let mine = listed.iter().find(|i| i.name == q).expect("the queue is listed");
    assert_eq!((mine.namespace.as_deref(), mine.total), (Some("typed-ns"), 1), "{}", mine.raw);
    let p = c.pop(&PopOptions::queue(&q)).unwrap().expect("a message");
    let m = &p.messages()[0];
    let kept = c.lease_extend(&m.lease_id, 60).unwrap();
    assert!(kept.renewed && kept.expires_at.is_some(), "{}", kept.raw);
    assert!(!c.lease_extend("00000000-0000-4000-8000-000000000000", 60).unwrap().renewed);
    let acked = c.ack(&[AckItem::new(&m.transaction_id, &m.partition_id, &m.lease_id)], None).unwrap();
    assert!(acked[0].success && !acked[0].dlq, "{}", acked[0].raw);
    assert_eq!(acked[0].transaction_id.as_deref(), Some("t-1"));
}

/// A self-signed certificate for 127.0.0.1 made by the openssl command: (cert, key) paths.
fn self_signed(dir: &std::path::Path) -> (String, String) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let st = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=queen-rust-test", "-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl");
    assert!(st.success(), "openssl req");
    (cert.display().to_string(), key.display().to_string())
}

#[test]
fn https_broker_with_a_private_ca() {
    need_broker!();
    let dir = std::env::temp_dir().join(format!("queen-rust-tls-{}", token()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = self_signed(&dir);
    let b = Broker::spawn(&[("QUEEN_TLS_CERT", cert.as_str()), ("QUEEN_TLS_KEY", key.as_str())]);
    let url = format!("https://127.0.0.1:{}", b.port);
    let pem = std::fs::read(&cert).unwrap();
    let mut o = Options::new(&url).tls_ca_pem(&pem);
    o.max_attempts = 1;
    let c = Client::new(o).unwrap();
    // Ready when it answers over TLS (the broker's own check is plain HTTP).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while c.health().is_err() {
        assert!(std::time::Instant::now() < deadline, "the TLS broker never answered: {}", std::fs::read_to_string(&b.log).unwrap_or_default());
        thread::sleep(Duration::from_millis(50));
    }
    let ns = format!("rs-tls-{}", token());
    let big: Value = serde_json::from_str("12345678901234567890").unwrap();
    assert!(c.put(&ns, "k", &big, Expiry::Forever, Cond::default()).unwrap().applied());
    assert_eq!(c.get(&ns, "k").unwrap().value().map(Value::to_string).as_deref(), Some("12345678901234567890"));
    // Without the CA the broker's certificate does not verify: no connection, nothing sent.
    let mut o = Options::new(&url);
    o.max_attempts = 1;
    let e = Client::new(o).unwrap().health().unwrap_err();
    assert_eq!((e.kind(), e.code.as_str()), (ErrorKind::Transport, "unreachable"), "{}", e);
    assert!(e.detail.contains("TLS"), "{}", e);
    // Plain http:// to the HTTPS listener gets no answer it can read.
    let mut o = Options::new(&format!("http://127.0.0.1:{}", b.port));
    o.max_attempts = 1;
    o.timeout = Duration::from_secs(2);
    assert!(Client::new(o).unwrap().health().is_err());
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(feature = "async")]
#[tokio::test(flavor = "current_thread")]
async fn async_client_on_tokio() {
    need_broker!();
    let b = Broker::start(&[]);
    let c = queen_client::AsyncClient::new(Options::new(&b.base)).unwrap();
    let (ns, q) = (format!("rs-async-{}", token()), format!("rs-async-{}", token()));
    let made = c.configure(&q, Some(&json!({"retryLimit": 3})), None, None).await.unwrap();
    assert_eq!(made.queue, q);

    // A long poll in flight does not hold the runtime's one thread: the push
    // made after it starts (on the same thread) is what it answers.
    let mut o = PopOptions::queue(&q);
    o.wait = Some(Duration::from_secs(20));
    let waiting = tokio::spawn(c.pop(&o));
    tokio::task::yield_now().await;
    let pushed = c.push(&[PushItem::new(&q, json!("x")).transaction_id("a-1")]).await.unwrap();
    assert_eq!(pushed[0].status, "queued");
    let m = waiting.await.unwrap().unwrap().expect("the pushed message").messages().remove(0);
    assert!(c.lease_extend(&m.lease_id, 60).await.unwrap().renewed);
    let acked = c.ack(&[m.ack_item()], None).await.unwrap();
    assert!(acked[0].success, "{}", acked[0].raw);

    // KV: the same calls, each a future.
    let tenth = json!(0.1);
    let (put, health) = tokio::join!(c.put(&ns, "k1", &tenth, Expiry::Forever, Cond::default()), c.health());
    assert!(put.unwrap().applied());
    assert!(health.unwrap().get("version").is_some());
    assert_eq!(c.get(&ns, "k1").await.unwrap().value().map(Value::to_string).as_deref(), Some("0.1"));
    let again = c.put_if_absent(&ns, "k1", &json!(2), Expiry::Ttl(60), Cond::default()).await.unwrap();
    assert_eq!((again.applied(), again.reason()), (false, Some("exists")));
    assert_eq!(c.incr(&ns, "k2", 5.0, Expiry::Ttl(60), Cond::default()).await.unwrap().value(), Some(&json!(5)));
    assert_eq!(c.get_many(&ns, &["k1", "k2", "k3"]).await.unwrap().rows().len(), 2);
    let page = c.get_prefix(&ns, "k", &queen_client::PrefixOptions { limit: 1, ..Default::default() }).await.unwrap();
    assert!(page.truncated() && page.rows().len() == 1);
    let seen = std::sync::Arc::new(AtomicU64::new(0));
    let count = seen.clone();
    let pages = c.scan(&ns, "k", 1, true, move |_| count.fetch_add(1, Ordering::SeqCst) < 10).await.unwrap();
    assert_eq!((pages, seen.load(Ordering::SeqCst)), (2, 2));
    let ops = [json!({"op": "get", "ns": ns, "key": "k2"})];
    assert_eq!(c.apply(&ops).await.unwrap()[0].value(), Some(&json!(5)));
    assert!(c.namespaces().await.unwrap().to_string().contains(&ns));
    assert!(c.delete(&ns, "k2", Cond::default()).await.unwrap().applied());

    // A transaction and the consume loop, as futures.
    c.push(&[PushItem::new(&q, json!("y")).transaction_id("a-2")]).await.unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let stopper = stop.clone();
    let key = ns.clone();
    let mut co = ConsumeOptions::queue(&q);
    co.poll = Duration::from_millis(200);
    c.consume(&co, stop, move |m, tx| {
        tx.kv_put(&key, "consumed", &m.data, Expiry::Forever, Cond::default())?;
        stopper.store(true, Ordering::SeqCst);
        Ok::<(), queen_client::Error>(())
    })
    .await
    .unwrap();
    assert_eq!(c.get(&ns, "consumed").await.unwrap().value(), Some(&json!("y")));
    let mut tx = Tx::new();
    tx.kv_put(&ns, "tx", &json!(1), Expiry::Forever, Cond::default()).unwrap();
    assert!(c.commit(&tx).await.unwrap().success());

    assert!(c.queues().await.unwrap().iter().any(|i| i.name == q));
    c.queue_delete(&q).await.unwrap();
    assert!(!c.queues().await.unwrap().iter().any(|i| i.name == q));
    let e = c.get("", "k").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{}", e);
}

#[test]
fn answer_that_is_not_json_is_bad_response() {
    let url = peer("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    let mut o = Options::new(&url);
    o.max_attempts = 1;
    let e = Client::new(o).unwrap().get("ns", "k").unwrap_err();
    assert_eq!((e.status, e.code.as_str()), (200, "bad_response"), "{}", e);
}

#[test]
fn exactly_once_consumer_and_clean_stop() {
    need_broker!();
    let b = Broker::start(&[]);
    let c = Client::new(Options::new(&b.base)).unwrap();
    let (q, ns) = (format!("rs-eo-{}", token()), format!("rs-eo-{}", token()));
    let items: Vec<PushItem> = (0..6)
        .map(|i| PushItem::new(&q, serde_json::from_str(r#"{"amount":0.1}"#).unwrap()).transaction_id(&format!("{}-{}", q, i)))
        .collect();
    c.push(&items).unwrap();
    let stop = AtomicBool::new(false);
    let handled = AtomicU64::new(0);
    let mut o = ConsumeOptions::queue(&q);
    o.concurrency = 3;
    o.poll = Duration::from_millis(200);
    // The README's consumer: the marker and the effect commit with the ack.
    c.consume(&o, &stop, |m, tx| {
        tx.kv(json!({"op": "putIfAbsent", "ns": ns, "key": format!("done/{}", m.transaction_id),
                     "value": true, "forever": true, "required": true}));
        tx.kv(json!({"op": "incr", "ns": ns, "key": "total", "delta": 1, "forever": true}));
        if handled.fetch_add(1, Ordering::SeqCst) + 1 == 6 {
            stop.store(true, Ordering::SeqCst);
        }
        Ok::<(), String>(())
    })
    .unwrap();
    let total = c.get(&ns, "total").unwrap();
    assert_eq!(total.value(), Some(&json!(6)), "{:?}", total.raw);
    assert!(c.pop(&PopOptions::queue(&q)).unwrap().is_none(), "nothing left");

    // A loop stopped with nothing to do returns within its poll.
    let idle = AtomicBool::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(100));
            idle.store(true, Ordering::SeqCst);
        });
        c.consume(&o, &idle, |_, _| Ok::<(), String>(())).expect("an idle stop");
    });
}

#[test]
fn consume_returns_the_refusal_of_its_pop() {
    need_broker!();
    let b = Broker::start(&[]);
    let c = Client::new(Options::new(&b.base)).unwrap();
    let e = c.consume(&ConsumeOptions::queue("bad queue name/\u{1}"), &AtomicBool::new(false), |_, _| Ok::<(), String>(())).unwrap_err();
    assert!((400..500).contains(&e.status), "{}", e);
}

#[test]
fn calls_share_one_keep_alive_connection() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let accepted = std::sync::Arc::new(AtomicU64::new(0));
    let counter = accepted.clone();
    thread::spawn(move || {
        for conn in l.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            thread::spawn(move || {
                let mut conn = conn;
                let mut buf = Vec::new();
                let mut byte = [0u8; 1];
                // GETs only: each request ends at its blank line.
                while conn.read(&mut byte).map(|n| n == 1).unwrap_or(false) {
                    buf.push(byte[0]);
                    if buf.ends_with(b"\r\n\r\n") {
                        buf.clear();
                        let body = r#"{"op":"get","key":"k","found":false}"#;
                        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}", body.len(), body);
                        if conn.write_all(answer.as_bytes()).is_err() {
                            break;
                        }
                    }
                }
            });
        }
    });
    let c = Client::new(Options::new(&url)).unwrap();
    for _ in 0..5 {
        assert!(!c.get("ns", "k").unwrap().found());
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "five calls, one connection");
}

#[test]
fn a_connection_the_broker_closed_while_idle_is_not_reused() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let closed = std::sync::Arc::new(AtomicU64::new(0));
    let counter = closed.clone();
    thread::spawn(move || {
        // Answers one request per connection, without saying so, then closes it.
        for mut conn in l.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).map(|n| n == 1).unwrap_or(false) {
                head.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
            let length: usize = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                .unwrap_or(0);
            let mut body = vec![0u8; length];
            let _ = conn.read_exact(&mut body);
            let answer = r#"{"results":[{"index":0,"op":"incr","applied":true,"value":1}]}"#;
            let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}", answer.len(), answer);
            let _ = conn.shutdown(std::net::Shutdown::Both);
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut o = Options::new(&url);
    o.max_attempts = 1;
    let c = Client::new(o).unwrap();
    for round in 1..=2u64 {
        // An incr is never sent twice: only a connection known open may carry it.
        let r = c.incr("ns", "n", 1.0, Expiry::Forever, Cond::default());
        assert!(r.is_ok(), "incr {}: {:?}", round, r.err());
        while closed.load(Ordering::SeqCst) < round {
            thread::yield_now();
        }
    }
}

// clients/API.md as this client holds it: a Ttl(0) never leaves the client,
// the error kinds, the typed transaction kv ops, QUEEN_URL.
#[test]
fn a_zero_ttl_never_leaves_the_client() {
    let dead = format!("http://127.0.0.1:{}", support::free_port()); // a sent call would fail unreachable
    let c = Client::new(Options::new(&dead)).unwrap();
    for e in [
        c.put("ns", "k", &json!(1), Expiry::Ttl(0), Cond::default()).unwrap_err(),
        c.put_if_absent("ns", "k", &json!(1), Expiry::Ttl(0), Cond::default()).unwrap_err(),
        c.incr("ns", "k", 1.0, Expiry::Ttl(0), Cond::default()).unwrap_err(),
        Tx::new().kv_put("ns", "k", &json!(1), Expiry::Ttl(0), Cond::default()).unwrap_err(),
    ] {
        assert_eq!((e.status, e.code.as_str(), e.kind()), (0, "bad_argument", ErrorKind::BadRequest), "{}", e);
        assert!(e.detail.contains("expiry: give ttl (seconds > 0) or forever"), "{}", e);
    }
    assert_eq!(c.retries(), 0);
    let e = c.put("ns", "k", &json!(1), Expiry::Ttl(60), Cond::default()).unwrap_err();
    assert_eq!((e.code.as_str(), e.kind()), ("unreachable", ErrorKind::Transport));
}

/// Every ErrorKind, by an exhaustive match: a kind added without its place
/// here does not compile.
fn every_kind() -> Vec<ErrorKind> {
    use ErrorKind::*;
    let all = vec![BadRequest, Auth, NotFound, Conflict, Precondition, RateLimited, Unavailable, Server, Transport];
    for k in &all {
        match k {
            BadRequest | Auth | NotFound | Conflict | Precondition | RateLimited | Unavailable | Server | Transport => {}
        }
    }
    all
}

#[test]
fn the_kinds_are_exactly_api_md_s() {
    let api = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../API.md")).expect("clients/API.md");
    let table = &api[api.find("| kind | when |").expect("API.md's kind table")..];
    let mut documented: Vec<String> = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('`').nth(1).expect("a `kind` cell").to_string())
        .collect();
    let mut ours: Vec<String> = every_kind().iter().map(|k| k.to_string()).collect();
    documented.sort();
    ours.sort();
    assert_eq!(ours, documented);
}

/// An answer from a peer: status, the envelope's code, and a body of the envelope.
fn answered(status: u16, code: &str) -> queen_client::Error {
    let body = format!(r#"{{"error":"x","code":"{}","reason":"why-{}","detail":"d"}}"#, code, status);
    let answer = format!(
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        status,
        body.len(),
        body
    );
    let mut o = Options::new(&peer(Box::leak(answer.into_boxed_str())));
    o.max_attempts = 1;
    Client::new(o).unwrap().get("ns", "k").unwrap_err()
}

#[test]
fn each_status_has_its_kind() {
    use ErrorKind::*;
    // The finer cases (413, 422, 403 feature_gated, 500 misconfigured, 504) are one of
    // the nine kinds; their status, code and reason stay on the error.
    for (status, code, kind) in [(400, "bad_request", BadRequest), (413, "too_large", BadRequest),
        (422, "x", BadRequest), (401, "unauthorized", Auth), (403, "feature_gated", Auth), (404, "x", NotFound),
        (409, "x", Conflict), (429, "x", RateLimited), (503, "db_outcome_unknown", Unavailable),
        (500, "misconfigured", Server), (502, "x", Server), (504, "x", Server)] {
        let e = answered(status, code);
        assert_eq!((e.status, e.kind()), (status, kind), "{}", e);
        assert_eq!((e.code.as_str(), e.reason.clone()), (code, format!("why-{}", status)));
        assert_eq!(e.to_json()["kind"], json!(kind.as_str()));
    }
    // An answer that is not the route's, whatever its status, is no usable answer.
    let url = peer("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    let mut o = Options::new(&url);
    o.max_attempts = 1;
    let e = Client::new(o).unwrap().get("ns", "k").unwrap_err();
    assert_eq!((e.status, e.code.as_str(), e.kind()), (200, "bad_response", Transport), "{}", e);
}

#[test]
fn typed_transaction_and_queen_url() {
    need_broker!();
    let b = Broker::start(&[]);
    std::env::set_var("QUEEN_URL", format!("http://127.0.0.1:{}, {}", support::free_port(), b.base));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut o = Options::with_urls(vec![]);
    let log = seen.clone();
    o.on_retry = Some(std::sync::Arc::new(move |attempt: u32, e: &queen_client::Error, _wait: Duration| {
        log.lock().unwrap().push(format!("{} {}", attempt, e.code));
    }));
    let c = Client::new(o).unwrap();
    std::env::remove_var("QUEEN_URL");
    let e = Client::new(Options::with_urls(vec![])).err().expect("no URL anywhere is refused");
    assert_eq!((e.kind(), e.status, e.code.as_str()), (ErrorKind::BadRequest, 0, "bad_argument"));
    let (ns, q) = (format!("rs-tx-{}", token()), format!("rs-tx-{}", token()));
    c.push(&[PushItem::new(&q, json!(1)).transaction_id("t1")]).unwrap();
    assert_eq!(c.retries(), 1, "the dead URL of QUEEN_URL first");
    assert_eq!(*seen.lock().unwrap(), vec!["1 unreachable".to_string()], "the retry hook, once");
    let mut o = PopOptions::queue(&q);
    o.wait = Some(Duration::from_secs(5));
    let m = c.pop(&o).unwrap().expect("a message").messages().remove(0);
    let mut tx = Tx::new();
    tx.ack(&m.ack_item());
    tx.kv_put_if_absent(&ns, "done", &json!(true), Expiry::Forever, Cond::default()).unwrap()
        .kv_incr(&ns, "n", 2.0, Expiry::Ttl(3600), Cond::default().max(10.0)).unwrap()
        .kv_put(&ns, "p", &json!("x"), Expiry::Forever, Cond::default()).unwrap()
        .kv_delete(&ns, "nothing", Cond::default());
    let r = c.commit(&tx).unwrap();
    assert!(r.success(), "{}", r.raw);
    assert_eq!(c.get(&ns, "n").unwrap().value(), Some(&json!(2)));
    let e = c.put_if_absent(&ns, "done", &json!(1), Expiry::Forever, Cond::required()).unwrap_err();
    assert_eq!((e.to_string().as_str(), e.kind()), ("kv precondition failed at op 0: exists", ErrorKind::Precondition));
    assert_eq!(e.precondition.as_ref().map(|p| p.kv_reason.as_str()), Some("exists"));
}
