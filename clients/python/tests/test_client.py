"""The Python client's own tests, against real brokers: exact numbers end to end, the bearer token on
an authenticated broker, keep-alive and its stale connections, typed timeouts and what is retried after
them, the builders, the iterator, the consume loop's clean stop on SIGTERM, and the example program."""
from __future__ import annotations

import asyncio
import os
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
from decimal import Decimal
from typing import Any

from harness import HERE, Broker, dead_url, mint_hs256

from queen_client._core import Call
from queen_client import (AsyncQueen, PreconditionFailed, Queen, QueenBadResponse, QueenRefused, QueenUnavailable,
                          _json)

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
            with self.assertRaises(QueenRefused) as r:
                c.kv.put(ns, "k", 1)  # no expiry: the broker's 400, the client invents none
            self.assertEqual((r.exception.status, r.exception.reason), (400, "kv_expiry_not_specified"))
            c.kv.put(ns, "k", "live", forever=True)
            with self.assertRaises(PreconditionFailed) as p:
                c.kv.put_if_absent(ns, "k", 2, forever=True, required=True)
            self.assertEqual((p.exception.status, p.exception.kv_reason, p.exception.value), (200, "exists", "live"))
            self.assertFalse(c.kv.put_if_absent(ns, "k", 2, forever=True).applied)


class Auth(unittest.TestCase):
    SECRET = "a-test-secret-of-enough-length-for-hs256-0123456789"

    @classmethod
    def setUpClass(cls) -> None:
        cls.b = Broker({"QUEEN_AUTH": "jwt", "QUEEN_JWT_SECRET": cls.SECRET, "QUEEN_JWT_DEFAULT_TENANT": "1"})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.b.stop()

    def token(self) -> str:
        return mint_hs256(self.SECRET, {"sub": "py-producer", "role": "admin", "exp": int(time.time()) + 600})

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
            scan = c.kv.get_prefix(ns, "p/", page_size=3)
            self.assertEqual([r.value for r in scan], list(range(7)))
            self.assertEqual(scan.pages, 3)

            async def go() -> list[Any]:
                async with AsyncQueen(broker.base) as ac:
                    return [r.key async for r in ac.kv.get_prefix(ns, "p/", page_size=2, keys_only=True)]
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
