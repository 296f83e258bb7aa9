//! The handle: options, failover across broker URLs and the retrying
//! transport (clients/conformance/README.md, "Retry rules", is the contract).

use crate::error::{Error, Result};
use crate::http::{Failure, Pool, TlsSettings};
use serde_json::Value;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The retry hook (clients/API.md): called before every retry with the
/// attempt that failed (1 for the first), its error and the wait.
pub type RetryHook = Arc<dyn Fn(u32, &Error, Duration) + Send + Sync>;

/// Client options. `Options::new(url)` takes the defaults shown.
#[derive(Clone)]
pub struct Options {
    /// Broker base URLs (`http://127.0.0.1:6632`, `https://queen.internal`),
    /// tried in order for failover.
    pub urls: Vec<String>,
    /// Sent as `Authorization: Bearer`.
    pub token: Option<String>,
    /// Attempts per call, the first included (default 3; 1: never retry).
    pub max_attempts: u32,
    /// Base of the jittered exponential backoff (default 50 ms).
    pub backoff: Duration,
    /// Cap of one wait, Retry-After included (default 5 s).
    pub max_backoff: Duration,
    /// One attempt; a long poll adds its wait (default 30 s).
    pub timeout: Duration,
    /// Default 3 s.
    pub connect_timeout: Duration,
    /// https:// brokers: a CA certificate (PEM) trusted besides the
    /// system's roots, for a broker whose certificate a private CA signed.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// None: no hook.
    pub on_retry: Option<RetryHook>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("urls", &self.urls)
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .field("max_backoff", &self.max_backoff)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("tls_ca_pem", &self.tls_ca_pem.as_ref().map(|_| "(set)"))
            .field("on_retry", &self.on_retry.as_ref().map(|_| "(set)"))
            .finish()
    }
}

impl Options {
    pub fn new(url: &str) -> Options {
        Options::with_urls(vec![url.to_string()])
    }

    pub fn with_urls(urls: Vec<String>) -> Options {
        Options {
            urls,
            token: None,
            max_attempts: 3,
            backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(5),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(3),
            tls_ca_pem: None,
            on_retry: None,
        }
    }

    pub fn token(mut self, token: &str) -> Options {
        self.token = Some(token.to_string());
        self
    }

    /// Trusts the CA certificate in pem (besides the system's roots) for https:// brokers.
    pub fn tls_ca_pem(mut self, pem: &[u8]) -> Options {
        self.tls_ca_pem = Some(pem.to_vec());
        self
    }
}

struct Shared {
    urls: Vec<String>,
    token: Option<String>,
    max_attempts: u32,
    backoff: Duration,
    max_backoff: Duration,
    timeout: Duration,
    on_retry: Option<RetryHook>,
    pool: Pool,
    current: AtomicUsize, // the URL that answered last
    retries: AtomicU64,
    seed: Mutex<u64>,
}

/// A client of one or more brokers. Cheap to clone (clones share the
/// connections) and safe to use from many threads.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    tenant: Option<String>,
    /// with_timeout's bound on each attempt of this view's calls; None: Options::timeout.
    timeout: Option<Duration>,
}

pub(crate) struct Request<'a> {
    pub method: &'a str,
    pub path: String,
    pub body: Option<Vec<u8>>,
    /// A repeat cannot apply twice: retried on 429, 503, timeouts, broken connections.
    pub safe: bool,
    pub extra: Duration,
}

pub(crate) struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON, numbers keeping their text.
    pub fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.body)
            .map_err(|e| Error::bad_response(self.status, format!("the answer is not the JSON the route gives: {}", e)))
    }
}

impl Client {
    /// Makes a client; it connects on the first call. With no URLs it reads
    /// QUEEN_URL (a comma-separated list), as every Queen client does.
    pub fn new(mut o: Options) -> Result<Client> {
        if o.urls.is_empty() {
            let env = std::env::var("QUEEN_URL").unwrap_or_default();
            o.urls = env.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect();
        }
        if o.urls.is_empty() {
            return Err(Error::bad_argument("no broker URL given (Options::urls, or QUEEN_URL)"));
        }
        let connect_timeout = if o.connect_timeout.is_zero() { Duration::from_secs(3) } else { o.connect_timeout };
        let pool = Pool::new(connect_timeout, &TlsSettings { ca_pem: o.tls_ca_pem.clone() })
            .map_err(Error::bad_argument)?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
        Ok(Client {
            shared: Arc::new(Shared {
                // Paths bring their own '/'.
                urls: o.urls.iter().map(|u| u.trim_end_matches('/').to_string()).collect(),
                token: o.token.filter(|t| !t.is_empty()),
                max_attempts: o.max_attempts.max(1),
                backoff: if o.backoff.is_zero() { Duration::from_millis(50) } else { o.backoff },
                max_backoff: if o.max_backoff.is_zero() { Duration::from_secs(5) } else { o.max_backoff },
                timeout: if o.timeout.is_zero() { Duration::from_secs(30) } else { o.timeout },
                on_retry: o.on_retry,
                pool,
                current: AtomicUsize::new(0),
                retries: AtomicU64::new(0),
                seed: Mutex::new(nanos | 1),
            }),
            tenant: None,
            timeout: None,
        })
    }

    /// A client sharing this one's connections whose calls send tenant (a
    /// uuid) as the x-queen-tenant header, for a broker behind a proxy with
    /// tenancy on.
    pub fn with_tenant(&self, tenant: &str) -> Client {
        Client { shared: self.shared.clone(), tenant: Some(tenant.to_string()), timeout: self.timeout }
    }

    /// A client sharing this one's connections whose calls give each attempt
    /// d (a long poll adds its wait) instead of Options::timeout: a deadline
    /// for one call, `c.with_timeout(Duration::from_secs(2)).get(ns, key)`.
    /// Past it the call is Transport `timeout`, retried only when safe.
    pub fn with_timeout(&self, d: Duration) -> Client {
        Client { shared: self.shared.clone(), tenant: self.tenant.clone(), timeout: Some(d) }
    }

    /// Attempts made beyond the first by every call of this client and its
    /// clones so far (for tests and metrics).
    pub fn retries(&self) -> u64 {
        self.shared.retries.load(Ordering::SeqCst)
    }

    /// Drops the idle connections.
    pub fn close_idle(&self) {
        self.shared.pool.close_idle();
    }

    /// A random wait in [d/2, d], d the base doubled per attempt, so
    /// clients retrying together spread out.
    fn backoff_for(&self, attempt: u32) -> Duration {
        let s = &self.shared;
        let mut d = s.backoff;
        for _ in 1..attempt {
            if d >= s.max_backoff {
                break;
            }
            d *= 2;
        }
        d = d.min(s.max_backoff);
        let mut seed = s.seed.lock().unwrap_or_else(|p| p.into_inner());
        // xorshift64: jitter needs spread, not secrecy.
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let half = d.as_millis() as u64 / 2;
        Duration::from_millis(half + *seed % (half + 1))
    }

    pub(crate) fn call(&self, rq: Request<'_>) -> Result<Reply> {
        let s = &self.shared;
        let mut url_index = s.current.load(Ordering::SeqCst) % s.urls.len();
        let mut headers = vec![("Content-Type".to_string(), "application/json".to_string())];
        if let Some(t) = &s.token {
            headers.push(("Authorization".into(), format!("Bearer {}", t)));
        }
        if let Some(t) = &self.tenant {
            headers.push(("x-queen-tenant".into(), t.clone()));
        }
        let timeout = self.timeout.unwrap_or(s.timeout);
        let mut attempt = 1u32;
        loop {
            if attempt > 1 {
                s.retries.fetch_add(1, Ordering::SeqCst);
            }
            let base = &s.urls[url_index];
            let outcome =
                s.pool.exchange(base, rq.method, &rq.path, &headers, rq.body.as_deref(), timeout + rq.extra, rq.safe);
            let (mut err, retry, next_url) = match outcome {
                Ok(a) if (200..300).contains(&a.status) => {
                    s.current.store(url_index, Ordering::SeqCst);
                    return Ok(Reply { status: a.status, body: a.body });
                }
                Ok(a) => {
                    s.current.store(url_index, Ordering::SeqCst);
                    let e = Error::envelope(a.status, &a.body, a.retry_after);
                    // A rate limit is the tenant's on every broker: retry where it was asked.
                    ((e), (a.status == 429 || a.status == 503) && rq.safe, a.status != 429)
                }
                // Nothing was sent without a connection: any call may go again.
                Err(Failure::NoConnection(d)) => (Error::own("unreachable", d), true, true),
                Err(Failure::Timeout(d)) => (Error::own("timeout", d), rq.safe, true),
                Err(Failure::Broken(d)) => (Error::own("transport", d), rq.safe, true),
            };
            err.attempts = attempt;
            if !retry || attempt >= s.max_attempts {
                return Err(err);
            }
            let mut wait = self.backoff_for(attempt).max(Duration::from_secs(err.retry_after));
            wait = wait.min(s.max_backoff);
            if next_url {
                url_index = (url_index + 1) % s.urls.len();
            }
            if let Some(hook) = &s.on_retry {
                hook(attempt, &err, wait);
            }
            thread::sleep(wait);
            attempt += 1;
        }
    }

    /// A call whose repeat sets the same state again; the body's JSON.
    pub(crate) fn json_call(&self, method: &str, path: String, body: Option<&Value>) -> Result<Value> {
        let body = body.map(|b| b.to_string().into_bytes());
        self.call(Request { method, path, body, safe: true, extra: Duration::ZERO })?.json()
    }

    /// GET /health's body (status, version, ...).
    pub fn health(&self) -> Result<Value> {
        self.json_call("GET", "/health".into(), None)
    }
}

/// Percent-encodes everything but the unreserved characters, so '/' and
/// '%' stay inside one path segment.
pub(crate) fn path_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.' || b == b'~' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{:02X}", b));
        }
    }
    out
}
