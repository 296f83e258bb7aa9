//! The test harness: real brokers (QUEEN_BIN serve) on the private
//! PostgreSQL that scripts/test.sh starts (QUEEN_TEST_PG_URL).
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub struct Broker {
    child: Option<Child>,
    pub port: u16,
    pub base: String,
    pub log: String,
}

/// QUEEN_BIN and QUEEN_TEST_PG_URL, or None when the suite runs outside make test.
pub fn env() -> Option<(String, String)> {
    Some((std::env::var("QUEEN_BIN").ok()?, std::env::var("QUEEN_TEST_PG_URL").ok()?))
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// A fresh token of [a-z0-9] for names no other run uses.
pub fn token() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut x = nanos ^ ((std::process::id() as u64) << 32) ^ (free_port() as u64) << 16;
    let mut s = String::new();
    for _ in 0..12 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push(b"abcdefghijklmnopqrstuvwxyz0123456789"[(x % 36) as usize] as char);
    }
    s
}

impl Broker {
    /// Starts `queen serve` on a free port; does not wait.
    pub fn spawn(extra_env: &[(&str, &str)]) -> Broker {
        let (bin, pg) = env().expect("QUEEN_BIN and QUEEN_TEST_PG_URL");
        let port = free_port();
        let log = std::env::temp_dir().join(format!("queen-rust-test-broker-{}-{}.log", std::process::id(), port));
        let f = std::fs::File::create(&log).expect("the broker's log");
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .env("QUEEN_PG_URL", pg)
            .env("QUEEN_PORT", port.to_string())
            .env("QUEEN_BIND", "127.0.0.1")
            .stdin(Stdio::null())
            .stdout(f.try_clone().expect("log"))
            .stderr(f);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start the broker");
        Broker { child: Some(child), port, base: format!("http://127.0.0.1:{}", port), log: log.display().to_string() }
    }

    /// Spawns a broker and waits until /health answers 200.
    pub fn start(extra_env: &[(&str, &str)]) -> Broker {
        let mut b = Broker::spawn(extra_env);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(c) = b.child.as_mut() {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
            }
            if health_status(b.port) == Some(200) {
                return b;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(&b.log).unwrap_or_default();
        b.stop();
        panic!("the broker never became healthy: {}", log);
    }

    /// SIGTERM, then wait for the exit (SIGKILL after 30 s).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match c.try_wait() {
                    Ok(Some(_)) => break,
                    _ if Instant::now() > deadline => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                    _ => thread::sleep(Duration::from_millis(20)),
                }
            }
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// GET /health on a fresh connection: the status, or None without an answer.
pub fn health_status(port: u16) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.split_whitespace().nth(1)?.parse().ok()
}

/// Runs one statement on the test database.
pub fn psql(sql: &str) {
    let (_, pg) = env().expect("QUEEN_TEST_PG_URL");
    let out = Command::new("psql").arg(pg).arg("-qtAc").arg(sql).output().expect("psql");
    assert!(out.status.success(), "psql {}: {}", sql, String::from_utf8_lossy(&out.stderr));
}
