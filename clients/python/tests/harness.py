"""Real brokers for the tests: ``queen serve`` ($QUEEN_BIN) on the private PostgreSQL
($QUEEN_TEST_PG_URL) that scripts/test.sh starts."""
from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package, uninstalled


def env(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        raise RuntimeError(f"{name} is not set: run through make test-python (scripts/test.sh)")
    return v


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def dead_url() -> str:
    """A loopback URL where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


def psql(sql: str) -> str:
    r = subprocess.run(["psql", env("QUEEN_TEST_PG_URL"), "-qtAX", "-v", "ON_ERROR_STOP=1", "-c", sql],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"psql: {r.stderr.strip()}")
    return r.stdout.strip()


def status_of(base: str, path: str = "/health", timeout: float = 2.0) -> Optional[int]:
    """The status of one GET on a fresh connection, None when no answer."""
    host, port = base.rsplit("//", 1)[1].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        c.request("GET", path)
        return c.getresponse().status
    except OSError:
        return None
    finally:
        c.close()


class Broker:
    """One ``queen serve`` process on a free loopback port."""

    def __init__(self, extra_env: Optional[dict[str, str]] = None, wait: bool = True) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = f"/tmp/queen-pytest-broker-{os.getpid()}-{self.port}.log"
        e = dict(os.environ)
        e.update({"QUEEN_PG_URL": env("QUEEN_TEST_PG_URL"), "QUEEN_PORT": str(self.port), "QUEEN_BIND": "127.0.0.1"})
        e.update(extra_env or {})
        with open(self.log, "wb") as out:
            self.proc: Optional[subprocess.Popen[bytes]] = subprocess.Popen(
                [env("QUEEN_BIN"), "serve"], env=e, stdout=out, stderr=subprocess.STDOUT)
        if wait:
            self.wait_healthy()

    def wait_healthy(self, timeout: float = 30.0) -> None:
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            assert self.proc is not None
            if self.proc.poll() is not None:
                break
            if status_of(self.base) == 200:
                return
            time.sleep(0.05)
        raise RuntimeError(f"the broker never answered (log: {self.log})")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def mint_hs256(secret: str, claims: dict) -> str:
    """An HS256 JWT (standard library: hmac, hashlib, base64)."""
    import base64
    import hashlib
    import hmac
    import json

    def b64(b: bytes) -> str:
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    sig = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"
