//! A small HTTP/1.1 client on std::net: one request at a time per
//! connection, connections kept alive in a pool and reused across calls and
//! threads. http://, and https:// through native-tls (the system's OpenSSL)
//! with the `tls` feature (on by default).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Why an exchange got no whole answer.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No connection could be made: nothing was sent.
    NoConnection(String),
    /// No whole answer before the deadline.
    Timeout(String),
    /// The connection broke after the request was sent.
    Broken(String),
}

pub(crate) struct Answer {
    pub status: u16,
    pub retry_after: u64,
    pub body: Vec<u8>,
}

/// A connection's byte stream: plain TCP or TLS over it.
enum Stream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<native_tls::TlsStream<TcpStream>>),
}

impl Stream {
    /// The socket under it, for timeouts and the idle check.
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.get_ref(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.flush(),
        }
    }
}

struct Conn {
    /// Pool key: scheme and authority, so an http and an https broker on
    /// one host:port never share a connection.
    key: String,
    authority: String,
    reader: BufReader<Stream>,
}

const POOL_KEEP: usize = 32;

/// How https:// connections verify the broker: the system's roots, plus a
/// CA of one's own (a private broker's self-signed certificate, say).
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsSettings {
    pub ca_pem: Option<Vec<u8>>,
}

pub(crate) struct Pool {
    idle: Mutex<Vec<Conn>>,
    connect_timeout: Duration,
    #[cfg(feature = "tls")]
    tls: native_tls::TlsConnector,
}

/// A broker's base URL taken apart.
struct Target {
    tls: bool,
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    host: String, // for SNI and the certificate's name
    authority: String, // host:port, for the socket and the Host header
}

/// "http://host[:port]/..." or "https://host[:port]/..."; anything else is refused.
fn target(base: &str) -> Option<Target> {
    let (tls, rest, port) = if let Some(r) = base.strip_prefix("https://") {
        (true, r, 443)
    } else {
        (false, base.strip_prefix("http://")?, 80)
    };
    let hostport = rest.split('/').next().unwrap_or("");
    if hostport.is_empty() {
        return None;
    }
    let has_port = hostport.rsplit_once(':').map_or(false, |(h, p)| !p.is_empty() && !p.contains(']') && !h.is_empty());
    let authority = if has_port { hostport.to_string() } else { format!("{}:{}", hostport, port) };
    let host = authority.rsplit_once(':').map(|(h, _)| h).unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    Some(Target { tls, host, authority })
}

/// An idle keep-alive connection is usable when reading it would block: a
/// closed one reads end-of-file at once, and stray bytes mean it is not
/// in step any more.
fn still_open(s: &TcpStream) -> bool {
    // For TLS the raw socket is what counts: a close_notify or any record
    // waiting there means the connection is not simply idle any more.
    if s.set_nonblocking(true).is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    let open = matches!(s.peek(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
    open && s.set_nonblocking(false).is_ok()
}

fn timed_out(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

impl Pool {
    pub fn new(connect_timeout: Duration, tls: &TlsSettings) -> Result<Pool, String> {
        #[cfg(feature = "tls")]
        let connector = {
            let mut b = native_tls::TlsConnector::builder();
            if let Some(pem) = &tls.ca_pem {
                b.add_root_certificate(native_tls::Certificate::from_pem(pem).map_err(|e| format!("the CA: {}", e))?);
            }
            b.build().map_err(|e| format!("TLS: {}", e))?
        };
        #[cfg(not(feature = "tls"))]
        if tls.ca_pem.is_some() {
            return Err("a CA for https:// needs the crate's tls feature".into());
        }
        Ok(Pool {
            idle: Mutex::new(Vec::new()),
            connect_timeout,
            #[cfg(feature = "tls")]
            tls: connector,
        })
    }

    pub fn close_idle(&self) {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// An idle connection under key that the broker has not closed.
    fn take(&self, key: &str) -> Option<Conn> {
        loop {
            let conn = {
                let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
                let i = idle.iter().rposition(|c| c.key == key)?;
                idle.swap_remove(i)
            };
            if still_open(conn.reader.get_ref().tcp()) {
                return Some(conn);
            }
        }
    }

    fn put(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < POOL_KEEP {
            idle.push(conn);
        }
    }

    fn connect(&self, t: &Target, key: &str, deadline: Instant) -> Result<Conn, Failure> {
        let authority = t.authority.as_str();
        let addrs: Vec<_> = authority
            .to_socket_addrs()
            .map_err(|e| Failure::NoConnection(format!("{}: {}", authority, e)))?
            .collect();
        let mut last = format!("{}: no address", authority);
        for addr in addrs {
            let budget = self.connect_timeout.min(deadline.saturating_duration_since(Instant::now()));
            if budget.is_zero() {
                return Err(Failure::Timeout(format!("{}: connect timed out", authority)));
            }
            match TcpStream::connect_timeout(&addr, budget) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    let stream = self.wrap(s, t, deadline)?;
                    return Ok(Conn { key: key.to_string(), authority: authority.to_string(), reader: BufReader::new(stream) });
                }
                Err(e) => last = format!("{}: {}", authority, e),
            }
        }
        Err(Failure::NoConnection(last))
    }

    /// The stream for a fresh socket: the TLS handshake, within the
    /// deadline, for https. Nothing of a request was sent before it, so a
    /// failed handshake is a connection not made.
    fn wrap(&self, s: TcpStream, t: &Target, deadline: Instant) -> Result<Stream, Failure> {
        if !t.tls {
            return Ok(Stream::Plain(s));
        }
        #[cfg(feature = "tls")]
        {
            let budget = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            let _ = s.set_read_timeout(Some(budget));
            let _ = s.set_write_timeout(Some(budget));
            match self.tls.connect(&t.host, s) {
                Ok(tls) => Ok(Stream::Tls(Box::new(tls))),
                Err(native_tls::HandshakeError::Failure(e)) => {
                    Err(Failure::NoConnection(format!("{}: TLS handshake: {}", t.authority, e)))
                }
                Err(native_tls::HandshakeError::WouldBlock(_)) => {
                    Err(Failure::Timeout(format!("{}: TLS handshake timed out", t.authority)))
                }
            }
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = (s, deadline);
            Err(Failure::NoConnection(format!("{}: https:// needs the crate's tls feature", t.authority)))
        }
    }

    /// One exchange with the broker at base. When a pooled connection broke
    /// before any byte of an answer came back (the broker closed it just as
    /// it was taken), a replayable request goes again once on a fresh one;
    /// any other is reported broken, since the broker may have applied it.
    #[allow(clippy::too_many_arguments)] // one request's parts, passed through as they are
    pub fn exchange(
        &self,
        base: &str,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Option<&[u8]>,
        timeout: Duration,
        replayable: bool,
    ) -> Result<Answer, Failure> {
        let t = target(base).ok_or_else(|| Failure::NoConnection(format!("{}: not an http:// or https:// URL", base)))?;
        let auth = t.authority.clone();
        let key = format!("{}{}", if t.tls { "https://" } else { "http://" }, auth);
        let deadline = Instant::now() + timeout;
        let mut request = format!("{} {} HTTP/1.1\r\nHost: {}\r\n", method, path, auth);
        for (k, v) in headers {
            request.push_str(&format!("{}: {}\r\n", k, v));
        }
        let payload = body.unwrap_or(&[]);
        if body.is_some() || method != "GET" {
            request.push_str(&format!("Content-Length: {}\r\n", payload.len()));
        }
        request.push_str("\r\n");
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(payload);

        if let Some(conn) = self.take(&key) {
            match self.on(conn, &bytes, method, deadline) {
                Err((Failure::Broken(_), false)) if replayable => {} // a fresh connection below
                Err((f, _)) => return Err(f),
                Ok(a) => return Ok(a),
            }
        }
        let conn = self.connect(&t, &key, deadline)?;
        self.on(conn, &bytes, method, deadline).map_err(|(f, _)| f)
    }

    /// Sends and reads on conn; on failure, whether any answer byte came.
    fn on(&self, mut conn: Conn, request: &[u8], method: &str, deadline: Instant) -> Result<Answer, (Failure, bool)> {
        let who = conn.authority.clone();
        let fail = |e: io::Error, answered: bool| {
            let f = if timed_out(&e) {
                Failure::Timeout(format!("{}: no whole answer in time", who))
            } else {
                Failure::Broken(format!("{}: {}", who, e))
            };
            (f, answered)
        };
        let remaining = || {
            let d = deadline.saturating_duration_since(Instant::now());
            if d.is_zero() {
                Duration::from_millis(1)
            } else {
                d
            }
        };
        let stream = conn.reader.get_mut();
        stream.tcp().set_write_timeout(Some(remaining())).map_err(|e| fail(e, false))?;
        stream.write_all(request).and_then(|_| stream.flush()).map_err(|e| fail(e, false))?;
        stream.tcp().set_read_timeout(Some(remaining())).map_err(|e| fail(e, false))?;

        let mut line = String::new();
        match conn.reader.read_line(&mut line) {
            Ok(0) => return Err(fail(io::Error::new(io::ErrorKind::UnexpectedEof, "closed before answering"), false)),
            Ok(_) => {}
            Err(e) => return Err(fail(e, false)),
        }
        let bad = |what: &str| (Failure::Broken(format!("{}: {}", who, what)), true);
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("not an HTTP status line"))?;
        let (mut length, mut chunked, mut close, mut retry_after) = (None, false, false, 0u64);
        loop {
            line.clear();
            conn.reader.get_mut().tcp().set_read_timeout(Some(remaining())).map_err(|e| fail(e, true))?;
            if conn.reader.read_line(&mut line).map_err(|e| fail(e, true))? == 0 {
                return Err(bad("closed inside the headers"));
            }
            let h = line.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((name, value)) = h.split_once(':') {
                let value = value.trim();
                match name.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = value.parse::<usize>().ok(),
                    "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                    "connection" => close = value.eq_ignore_ascii_case("close"),
                    // Seconds; the broker never sends an HTTP date.
                    "retry-after" => retry_after = value.parse::<u64>().ok().filter(|v| *v < 86400).unwrap_or(0),
                    _ => {}
                }
            }
        }
        let mut body = Vec::new();
        let no_body = method == "HEAD" || status == 204 || status == 304 || (100..200).contains(&status);
        if !no_body {
            if chunked {
                loop {
                    line.clear();
                    conn.reader.get_mut().tcp().set_read_timeout(Some(remaining())).map_err(|e| fail(e, true))?;
                    conn.reader.read_line(&mut line).map_err(|e| fail(e, true))?;
                    let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                        .map_err(|_| bad("a bad chunk size"))?;
                    let mut chunk = vec![0u8; size + 2];
                    conn.reader.read_exact(&mut chunk).map_err(|e| fail(e, true))?;
                    if size == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..size]);
                }
            } else if let Some(n) = length {
                body.resize(n, 0);
                conn.reader.read_exact(&mut body).map_err(|e| fail(e, true))?;
            } else {
                close = true;
                conn.reader.read_to_end(&mut body).map_err(|e| fail(e, true))?;
            }
        }
        if close {
            let _ = conn.reader.get_ref().tcp().shutdown(Shutdown::Both);
        } else {
            self.put(conn);
        }
        Ok(Answer { status, retry_after, body })
    }
}
