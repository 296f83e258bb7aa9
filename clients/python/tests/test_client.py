"""The Python client's own tests, against real brokers: exact numbers end to end, the bearer token on
an authenticated broker, keep-alive and its stale connections, typed timeouts and what is retried after
them, the builders, the iterator, the consume loop's clean stop on SIGTERM, and the example program."""
from __future__ import annotations

import asyncio
import http.server
import os
import uuid
import random
import select
import signal
import socket
import string
import subprocess
import sys
import threading
import time
import unittest
from datetime import timedelta
from decimal import Decimal
from typing import Any

from harness import HERE, Broker, dead_url, mint_hs256, psql

from queen_client._core import Call
from queen_client import (AckResult, AsyncQueen, AuthError, BadArgument, BadRequest, ConfigureResult, Conflict,
                          NotFound, PreconditionFailed, Queen, QueenBadResponse, QueenError, QueenRefused,
                          QueenUnavailable, RateLimited, ServerError, TransportError, Unavailable, _json)

PKG = os.path.dirname(HERE)
broker: Broker


def setUpModule() -> None:
    global broker
    broker = Broker()


def tearDownModule() -> None:
    broker.stop()


def unique(prefix: str) -> str:
    return prefix + "-" + "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(10))


def wait_until(cond: Any, timeout: float = 20.0) -> None:
    until = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > until:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


class JsonTest(unittest.TestCase):
    def test_numbers_keep_their_text(self) -> None:
        doc = _json.loads('{"a":0.1,"b":12345678901234567890,"c":[1E+2,-0.0,"\\u00e9"]}')
        self.assertIsInstance(doc["a"], Decimal)
        self.assertEqual(doc["b"], 12345678901234567890)
        self.assertEqual(_json.dumps(doc), '{"a":0.1,"b":12345678901234567890,"c":[1E+2,-0.0,"é"]}')
        self.assertEqual(_json.dumps(0.1), "0.1")  # a float goes out as its shortest text

    def test_what_json_cannot_hold_is_refused(self) -> None:
        for bad in (float("nan"), float("inf"), Decimal("NaN"), object(), {1: 2}):
            with self.assertRaises((ValueError, TypeError)):
                _json.dumps(bad)


class NumbersEndToEnd(unittest.TestCase):
    def test_kv_and_messages_round_trip_exactly(self) -> None:
        ns, q = unique("py"), unique("q")
        with Queen(broker.base) as c:
            for key, value in (("tenth", Decimal("0.1")), ("float", 0.1), ("big", 12345678901234567890),
                               ("doc", {"x": [Decimal("0.1"), 12345678901234567890, "é\n"]})):
                c.kv.put(ns, key, value, forever=True)
                got = c.kv.get(ns, key).value
                self.assertEqual(_json.dumps(got), _json.dumps(value), key)
            self.assertEqual(c.kv.get(ns, "tenth").value, Decimal("0.1"))
            self.assertEqual(c.kv.incr(ns, "n", Decimal("0.1"), forever=True).value, Decimal("0.1"))
            self.assertEqual(c.kv.incr(ns, "n", Decimal("0.2"), forever=True).value, Decimal("0.3"))
            c.queue(q).push([{"payload": {"n": 12345678901234567890, "f": Decimal("0.1")}, "transactionId": "m"}])
            popped = c.pop(q, wait=True, timeout=5)
            assert popped is not None
            data = popped.messages[0].data  # jsonb orders members its own way: compare each
            self.assertEqual((_json.dumps(data["n"]), _json.dumps(data["f"])), ("12345678901234567890", "0.1"))


class Errors(unittest.TestCase):
    def test_refusal_and_verdict_are_typed(self) -> None:
        ns = unique("py")
        with Queen(broker.base) as c:
            c.kv.put(ns, "k", "live", forever=True)
            with self.assertRaises(PreconditionFailed) as p:
                c.kv.put_if_absent(ns, "k", 2, forever=True, required=True)
            self.assertEqual((p.exception.status, p.exception.kv_reason, p.exception.value), (200, "exists", "live"))
            self.assertEqual(str(p.exception), "kv precondition failed at op 0: exists")
            self.assertEqual(p.exception.kind, "precondition")
            self.assertFalse(c.kv.put_if_absent(ns, "k", 2, forever=True).applied)


class Auth(unittest.TestCase):
    SECRET = "a-test-secret-of-enough-length-for-hs256-0123456789"

    TENANT = str(uuid.uuid4())

    @classmethod
    def setUpClass(cls) -> None:
        cls.b = Broker({"QUEEN_AUTH": "jwt", "QUEEN_JWT_SECRET": cls.SECRET, "QUEEN_JWT_DEFAULT_TENANT": "1"})
        # With tokens tenancy is on: the token's tenant needs its kv grant (its own, so the suite runs alone).
        psql(f"INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ('{cls.TENANT}', true) "
             "ON CONFLICT (tenant_id) DO UPDATE SET enabled = true")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.b.stop()

    def token(self) -> str:
        return mint_hs256(self.SECRET, {"sub": "py-producer", "role": "admin", "tenant": self.TENANT,
                                        "exp": int(time.time()) + 600})

    def test_blocking_client_sends_the_token(self) -> None:
        ns, q = unique("py"), unique("q")
        with Queen(self.b.base) as anon:
            with self.assertRaises(QueenRefused) as r:
                anon.kv.get(ns, "k")
            self.assertEqual((r.exception.status, r.exception.code), (401, "unauthorized"))
        with Queen(self.b.base, token=self.token()) as c:
            self.assertTrue(c.kv.put(ns, "k", 1, forever=True).applied)
            self.assertEqual(c.kv.get(ns, "k").value, 1)
            c.push([{"queue": q, "payload": 1, "transactionId": "t"}])
            popped = c.pop(q, wait=True, timeout=5)
            assert popped is not None
            self.assertEqual(popped.messages[0].producer, "py-producer")  # the token's sub

    def test_consume_raises_the_refusal_of_its_pop(self) -> None:
        narrow = mint_hs256(self.SECRET, {"sub": "py", "role": "write", "scope": "queue:elsewhere:read",
                                          "exp": int(time.time()) + 600})
        with Queen(self.b.base, token=narrow) as c:
            stop = threading.Event()
            timer = threading.Timer(15, stop.set)  # a loop that waits the refusal out ends, and the test fails
            timer.start()
            with self.assertRaises(QueenRefused) as r:
                c.consume(unique("q"), lambda m, tx: None, poll=0.3, stop=stop, handle_signals=False)
            timer.cancel()
            self.assertEqual((r.exception.status, r.exception.reason), (403, "auth_forbidden_scope"))

        async def go() -> None:
            async with AsyncQueen(self.b.base, token=narrow) as ac:
                stop = asyncio.Event()
                asyncio.get_running_loop().call_later(15, stop.set)
                with self.assertRaises(QueenRefused) as r:
                    await ac.consume(unique("q"), lambda m, tx: None, poll=0.3, stop=stop, handle_signals=False)
                self.assertEqual(r.exception.status, 403)
        asyncio.run(go())

    def test_asyncio_client_sends_the_token(self) -> None:
        async def go() -> None:
            ns = unique("py")
            async with AsyncQueen(self.b.base) as anon:
                with self.assertRaises(QueenRefused) as r:
                    await anon.kv.get(ns, "k")
                self.assertEqual(r.exception.status, 401)
            async with AsyncQueen(self.b.base, token=self.token()) as c:
                self.assertTrue((await c.kv.put(ns, "k", 1, forever=True)).applied)
                self.assertEqual((await c.kv.get(ns, "k")).value, 1)
        asyncio.run(go())


class Connections(unittest.TestCase):
    def test_one_connection_is_kept_and_reused(self) -> None:
        ns = unique("py")
        with Queen(broker.base) as c:
            c.kv.put(ns, "k", 1, forever=True)
            sock = c._idle[0][0].sock
            for _ in range(5):
                c.kv.get(ns, "k")
            self.assertEqual(len(c._idle[0]), 1)
            self.assertIs(c._idle[0][0].sock, sock)

    def test_a_connection_closed_while_idle_is_replaced_without_a_retry(self) -> None:
        b = Broker({"QUEEN_IDLE_TIMEOUT_MS": "300"})
        try:
            ns = unique("py")
            with Queen(b.base, max_attempts=1) as c:
                c.kv.incr(ns, "n", 1, forever=True)
                sock = c._idle[0][0].sock
                # the broker closes it: the socket reads end of file
                wait_until(lambda: select.select([sock], [], [], 0)[0] and sock.recv(1, socket.MSG_PEEK) == b"")
                # an incr is never retried, yet it goes through: the dead connection was not sent on
                self.assertEqual(c.kv.incr(ns, "n", 1, forever=True).value, 2)
                self.assertEqual(c.retries, 0)

            async def go() -> None:
                async with AsyncQueen(b.base, max_attempts=1) as ac:
                    await ac.kv.incr(ns, "m", 1, forever=True)
                    reader = ac._idle[0][0][0]
                    until = time.monotonic() + 20
                    while not reader.at_eof():  # the broker closed it: end of file is fed in
                        self.assertLess(time.monotonic(), until)
                        await asyncio.sleep(0.02)
                    self.assertEqual((await ac.kv.incr(ns, "m", 1, forever=True)).value, 2)
                    self.assertEqual(ac.retries, 0)
            asyncio.run(go())
        finally:
            b.stop()


class SilentPeer:
    """A listener that accepts and reads but never answers: every attempt times out."""

    def __init__(self) -> None:
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(16)
        self.url = f"http://127.0.0.1:{self.s.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.s.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self) -> None:
        self.s.close()
        for c in self.conns:
            c.close()


class Timeouts(unittest.TestCase):
    def test_timeout_is_typed_and_retried_only_for_what_is_safe(self) -> None:
        peer = SilentPeer()
        try:
            with Queen(peer.url, max_attempts=2, timeout=0.2, backoff=0.01) as c:
                with self.assertRaises(QueenUnavailable) as r:
                    c.kv.get("ns", "k")
                self.assertEqual((r.exception.status, r.exception.code, r.exception.attempts), (0, "timeout", 2))
                with self.assertRaises(QueenUnavailable) as r:
                    c.kv.incr("ns", "k", 1, forever=True)
                self.assertEqual((r.exception.code, r.exception.attempts), ("timeout", 1))

            async def go() -> None:
                async with AsyncQueen(peer.url, max_attempts=2, timeout=0.2, backoff=0.01) as ac:
                    with self.assertRaises(QueenUnavailable) as r:
                        await ac.kv.get("ns", "k")
                    self.assertEqual((r.exception.code, r.exception.attempts), ("timeout", 2))
                    with self.assertRaises(QueenUnavailable) as r:
                        await ac.push([{"queue": "q", "payload": 1}])  # no transactionId: never repeated
                    self.assertEqual(r.exception.attempts, 1)
            asyncio.run(go())
        finally:
            peer.close()

    def test_unreachable_moves_on_even_for_an_incr(self) -> None:
        ns = unique("py")
        with Queen([dead_url(), broker.base]) as c:
            self.assertEqual(c.kv.incr(ns, "n", 1, forever=True).value, 1)
            self.assertEqual(c.retries, 1)
            c.kv.get(ns, "n")
            self.assertEqual(c.retries, 1)  # the live URL is remembered

    def test_a_body_that_is_not_json_is_a_bad_response(self) -> None:
        with Queen(broker.base) as c:
            with self.assertRaises(QueenBadResponse):
                c._run(Call("GET", "/metrics/prometheus", lambda s, b: b, safe=True))


class AnsweringPeer:
    """An HTTP listener that answers every request with one status and the error envelope."""

    def __init__(self, status: int, code: str = "x", reason: str = "x") -> None:
        body = _json.dumps({"error": code, "code": code, "reason": reason, "detail": "d"}).encode()

        class H(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *a: Any) -> None:
                pass
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


class Vocabulary(unittest.TestCase):
    """clients/API.md as this client holds it: expiry, error kinds, names, QUEEN_URL, the retry hook."""

    def test_a_write_without_one_valid_expiry_never_leaves_the_client(self) -> None:
        with Queen(dead_url(), max_attempts=3, backoff=0.01) as c:  # nothing listens: a sent call would say so
            bad: list[dict[str, Any]] = [{}, {"ttl": 0}, {"ttl": -5}, {"ttl": 1.5}, {"ttl": timedelta(0)},
                                         {"ttl": 60, "forever": True}, {"ttl": True}]
            for kw in bad:
                for write in (lambda: c.kv.put("ns", "k", 1, **kw), lambda: c.kv.incr("ns", "k", 1, **kw),
                              lambda: c.kv.put_if_absent("ns", "k", 1, **kw),
                              lambda: c.tx().kv_put("ns", "k", 1, **kw), lambda: c.kv.batch().incr("ns", "k", **kw)):
                    with self.assertRaises(BadArgument, msg=repr(kw)) as r:
                        write()
                    self.assertIsInstance(r.exception, ValueError)
                    self.assertEqual((r.exception.status, r.exception.code, r.exception.kind),
                                     (0, "bad_argument", "bad_request"))
                    self.assertIn("expiry: give ttl (seconds > 0) or forever", str(r.exception))
            self.assertEqual(c.retries, 0)
            self.assertEqual(c.tx().kv_put("ns", "k", 1, ttl=timedelta(minutes=1)).bundle()["kv"][0]["ttlSeconds"], 60)

    def test_each_status_has_its_kind_and_class(self) -> None:
        cases = [(400, BadRequest, "bad_request"), (413, BadRequest, "bad_request"), (401, AuthError, "auth"),
                 (403, AuthError, "auth"), (404, NotFound, "not_found"), (409, Conflict, "conflict"),
                 (429, RateLimited, "rate_limited"), (503, Unavailable, "unavailable"), (500, ServerError, "server"),
                 (502, ServerError, "server")]
        for status, cls, kind in cases:
            peer = AnsweringPeer(status)
            try:
                with Queen(peer.url, max_attempts=1) as c:
                    with self.assertRaises(cls, msg=str(status)) as r:
                        c.kv.get("ns", "k")
                    self.assertEqual((r.exception.status, r.exception.kind, r.exception.to_dict()["kind"]),
                                     (status, kind, kind))
                    # A 500 is the broker's failure, not a refusal of the input: not a QueenRefused.
                    self.assertEqual(isinstance(r.exception, QueenRefused), 400 <= status < 500 and status != 429)
            finally:
                peer.close()
        with Queen(dead_url(), max_attempts=1) as c:
            with self.assertRaises(TransportError) as t:
                c.health()
            self.assertEqual((t.exception.kind, t.exception.code), ("transport", "unreachable"))

    def test_ack_of_one_message_answers_one_result(self) -> None:
        q = unique("q")
        with Queen(broker.base) as c:
            c.push([{"queue": q, "payload": i, "transactionId": f"t{i}"} for i in range(3)])
            popped = c.pop(q, batch=3, wait=True, timeout=5)
            assert popped is not None and len(popped.messages) == 3
            one = c.ack(popped.messages[0])
            self.assertIsInstance(one, AckResult)
            self.assertTrue(one.success)
            many = c.ack(popped.messages[1:])
            self.assertEqual([type(r) for r in many], [AckResult, AckResult])

    def test_configure_answers_a_typed_result(self) -> None:
        q = unique("q")
        with Queen(broker.base) as c:
            r = c.configure(q, {"leaseTime": 45, "retryLimit": 2}, namespace="py-ns", task="py-task")
            self.assertIsInstance(r, ConfigureResult)
            self.assertEqual((r.queue, r.namespace, r.task), (q, "py-ns", "py-task"))
            self.assertEqual(str(uuid.UUID(r.queue_id)), r.queue_id)
            self.assertEqual((r.options["leaseTime"], r.options["retryLimit"]), (45, 2))
            self.assertIsInstance(r.stored_only, list)
            self.assertEqual(r.raw["queueId"], r.queue_id)
            again = c.queue(q).configure({"leaseTime": 50})
            self.assertEqual((type(again), again.queue_id, again.options["leaseTime"]),
                             (ConfigureResult, r.queue_id, 50))

        async def go() -> ConfigureResult:
            async with AsyncQueen(broker.base) as ac:
                return await ac.configure(q, {"leaseTime": 60})
        ar = asyncio.run(go())
        self.assertEqual((type(ar), ar.queue, ar.queue_id, ar.options["leaseTime"]),
                         (ConfigureResult, q, r.queue_id, 60))

    def test_queen_url_is_read_when_no_url_is_given(self) -> None:
        old = os.environ.get("QUEEN_URL")
        os.environ["QUEEN_URL"] = f"{dead_url()}, {broker.base}"
        try:
            with Queen() as c:
                self.assertIn("version", c.health())
                self.assertEqual(c.retries, 1)  # the dead URL first: the list is the failover order
            del os.environ["QUEEN_URL"]
            with self.assertRaises(ValueError):
                Queen()
        finally:
            if old is not None:
                os.environ["QUEEN_URL"] = old

    def test_every_retry_is_hooked_and_logged(self) -> None:
        seen: list[tuple[int, str, float]] = []
        with self.assertLogs("queen_client", level="INFO") as logs:
            with Queen([dead_url(), broker.base], on_retry=lambda n, e, w: seen.append((n, e.code, w))) as c:
                c.health()
        self.assertEqual([(n, code) for n, code, _ in seen], [(1, "unreachable")])
        self.assertGreaterEqual(seen[0][2], 0)
        self.assertIn("retrying", logs.output[0])

    def test_with_timeout_bounds_one_call(self) -> None:
        peer = SilentPeer()
        try:
            with Queen(peer.url, max_attempts=1, timeout=60) as c:
                t0 = time.monotonic()
                with self.assertRaises(TransportError) as r:
                    c.with_timeout(0.2).kv.get("ns", "k")
                self.assertEqual(r.exception.code, "timeout")
                self.assertLess(time.monotonic() - t0, 10)

            async def go() -> None:
                async with AsyncQueen(peer.url, max_attempts=1, timeout=60) as ac:
                    with self.assertRaises(TransportError):
                        await ac.with_timeout(0.2).health()
            asyncio.run(go())
        finally:
            peer.close()


class Builders(unittest.TestCase):
    def test_consecutive_pushes_share_one_operation(self) -> None:
        with Queen(broker.base) as c:
            tx = (c.tx().push("a", [{"payload": 1}]).push("b", [{"payload": 2, "transactionId": "t"}])
                  .ack({"transactionId": "x", "partitionId": "p", "leaseId": "l"}).push("a", [{"payload": 3}])
                  .kv_put_if_absent("ns", "done/x", True, forever=True, required=True).require_lease("l"))
            b = tx.bundle()
            self.assertEqual([op["type"] for op in b["operations"]], ["push", "ack", "push"])
            self.assertEqual(len(b["operations"][0]["items"]), 2)
            self.assertEqual(b["kv"], [{"op": "putIfAbsent", "ns": "ns", "key": "done/x", "value": True,
                                        "forever": True, "required": True}])
            self.assertEqual(b["requiredLeases"], ["l"])
            self.assertTrue(tx.call().safe)
            self.assertFalse(c.tx().push("a", [{"payload": 1}]).call().safe)

    def test_batch_and_prefix_iterator(self) -> None:
        ns = unique("py")
        with Queen(broker.base) as c:
            batch = c.kv.batch()
            for k in range(7):
                batch.put(ns, f"p/{k}", k, forever=True)
            self.assertEqual(len(batch.incr(ns, "n", 2, forever=True).apply()), 8)
            scan = c.kv.scan(ns, "p/", page_size=3)
            self.assertEqual([r.value for r in scan], list(range(7)))
            self.assertEqual(scan.pages, 3)
            page = c.kv.get_prefix(ns, "p/", limit=3)  # one page, as in every client
            self.assertEqual(([r.value for r in page.rows], page.truncated, page.next_after), ([0, 1, 2], True, "p/2"))

            async def go() -> list[Any]:
                async with AsyncQueen(broker.base) as ac:
                    return [r.key async for r in ac.kv.scan(ns, "p/", page_size=2, keys_only=True)]
            self.assertEqual(asyncio.run(go()), [f"p/{k}" for k in range(7)])


CONSUMER = r"""
import sys, asyncio
sys.path.insert(0, sys.argv[1])
from queen_client import Queen, AsyncQueen
url, queue, mode = sys.argv[2], sys.argv[3], sys.argv[4]
def handler(m, tx):
    tx.kv_incr("NS", "handled", 1, forever=True)
    print("handled", m.transaction_id, flush=True)
async def ahandler(m, tx):
    handler(m, tx)
print("ready", flush=True)
if mode == "sync":
    with Queen(url) as q:
        stats = q.consume(queue, handler, concurrency=2, poll=0.3)
else:
    async def main():
        async with AsyncQueen(url) as q:
            return await q.consume(queue, ahandler, concurrency=2, poll=0.3)
    stats = asyncio.run(main())
print("stopped", stats.handled, flush=True)
"""


class ConsumeStop(unittest.TestCase):
    def _run(self, mode: str) -> None:
        ns, queue = unique("py"), unique("q")
        p = subprocess.Popen([sys.executable, "-c", CONSUMER.replace("NS", ns), PKG, broker.base, queue, mode],
                             stdout=subprocess.PIPE, text=True)
        try:
            assert p.stdout is not None
            self.assertEqual(p.stdout.readline().strip(), "ready")
            with Queen(broker.base) as c:
                c.push([{"queue": queue, "payload": 1, "transactionId": "a"}])
                self.assertEqual(p.stdout.readline().split()[:2], ["handled", "a"])
                wait_until(lambda: c.kv.get(ns, "handled").found)
                p.send_signal(signal.SIGTERM)
                self.assertEqual(p.wait(20), 0)
                self.assertEqual(p.stdout.read().split(), ["stopped", "1"])
                self.assertEqual(c.kv.get(ns, "handled").value, 1)
                self.assertIsNone(c.pop(queue))  # acked with its effect
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()

    def test_blocking_consume_stops_cleanly_on_sigterm(self) -> None:
        self._run("sync")

    def test_asyncio_consume_stops_cleanly_on_sigterm(self) -> None:
        self._run("async")


class Example(unittest.TestCase):
    def test_exactly_once_example(self) -> None:
        r = subprocess.run([sys.executable, os.path.join(PKG, "examples", "exactly_once.py"), broker.base],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": PKG})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("effect applied once", r.stdout)


if __name__ == "__main__":
    unittest.main()
