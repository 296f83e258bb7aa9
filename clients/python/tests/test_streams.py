"""Streams (queen_client.streams) on a real broker: the shared scenarios of clients/conformance/streams, the
configuration hash vectors, a worker stopped between cycles, a cycle whose lease was lost, the token bucket."""
from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import unittest
from typing import Any, Optional

from harness import HERE, Broker, psql
from queen_client import AsyncQueen, Conflict, NotFound, Queen
from queen_client.streams import (AsyncStreamWorker, GateContext, Stream, StreamStats, StreamWorker, canonical_config,
                                  token_bucket_gate)
from streams_kill_worker import pipeline
from streams_scenarios import DIR, build, scenarios

_broker: Optional[Broker] = None


def setUpModule() -> None:
    global _broker
    _broker = Broker()


def tearDownModule() -> None:
    if _broker is not None:
        _broker.stop()


def client() -> Queen:
    assert _broker is not None
    return Queen(_broker.base, timeout=10)


def fresh(q: Queen, *queues: str) -> None:
    for name in queues:
        try:
            q.queue_delete(name)
        except NotFound:
            pass


def sink_of(q: Queen, queue: str, partition: str) -> list[Any]:
    r = q.pop(queue, partition=partition, batch=1000, auto_ack=True)
    return [m.data for m in r.messages] if r else []


def feed(q: Queen, source: str, inputs: dict[str, list[Any]]) -> None:
    for p, items in inputs.items():
        q.push([{"queue": source, "partition": p, "payload": x} for x in items])


class Scenarios(unittest.TestCase):
    def prepare(self, sc: dict[str, Any], q: Queen) -> Stream:
        sinks = [op["queue"] for op in sc["pipeline"] if op["op"] == "to"]
        fresh(q, sc["source"], *sinks)
        feed(q, sc["source"], sc["input"])
        stream = build(sc["source"], sc["pipeline"])
        self.assertEqual(stream.config_hash(), sc["configHash"], canonical_config(stream.operators))
        return stream

    def options(self, sc: dict[str, Any]) -> dict[str, Any]:
        return {"batch": sc["batch"], "wait": 0.2, "reset": True, "lease_seconds": sc.get("leaseSeconds")}

    def check(self, sc: dict[str, Any], q: Queen, stats: StreamStats, states: dict[str, Any], group: str) -> None:
        exp = sc["expect"]
        sinks = [op["queue"] for op in sc["pipeline"] if op["op"] == "to"]
        for p, want in exp["sink"].items():
            self.assertEqual(sink_of(q, sinks[0], p), want, f"sink partition {p}")
        self.assertEqual(states, exp["state"])
        self.assertEqual(stats.messages, exp["acked"])
        self.assertEqual(stats.late, exp["late"])
        for p, want in exp.get("tail", {}).items():
            # The denied tail is still leased to the worker: it comes back, in order, once the lease ends
            # (the leased part of it first, as its own batch).
            got: list[Any] = []
            until = time.monotonic() + 15
            while len(got) < len(want) and time.monotonic() < until:
                r = q.pop(sc["source"], partition=p, group=group, batch=1000, wait=True, timeout=1,
                          auto_ack=True)
                got += [m.data for m in r.messages] if r else []
            self.assertEqual(got, want, f"tail of {p}")

    def test_scenarios(self) -> None:
        with client() as q:
            for name, sc in scenarios():
                with self.subTest(scenario=name):
                    w = self.prepare(sc, q).worker(q, f"conf.{sc['name']}.py", **self.options(sc))
                    w.drain()
                    self.check(sc, q, w.stats, {p: w.state(p) for p in sc["expect"]["state"]}, w.group)

    def test_scenarios_asyncio(self) -> None:
        assert _broker is not None
        base = _broker.base

        async def run(stream: Stream, sc: dict[str, Any]) -> tuple[AsyncStreamWorker, dict[str, Any]]:
            async with AsyncQueen(base, timeout=10) as aq:
                w = stream.async_worker(aq, f"conf.{sc['name']}.py-aio", **self.options(sc))
                await w.drain()
                return w, {p: await w.state(p) for p in sc["expect"]["state"]}

        with client() as q:
            for name, sc in scenarios():
                with self.subTest(scenario=name):
                    w, states = asyncio.run(run(self.prepare(sc, q), sc))
                    self.check(sc, q, w.stats, states, w.group)

    def test_hash_vectors(self) -> None:
        with open(os.path.join(DIR, "hash_vectors.json"), encoding="utf-8") as f:
            vectors = json.load(f)["vectors"]
        for v in vectors:
            with self.subTest(vector=v["name"]):
                s = build("src", v["pipeline"])
                self.assertEqual(canonical_config(s.operators), v["canonical"])
                self.assertEqual(s.config_hash(), v["configHash"])

    def test_restart_between_cycles(self) -> None:
        # A worker stopped after any cycle: the next one (a new process, a new client) resumes from the
        # committed state and cursor; the sink has every output once.
        sc = dict(next(s for n, s in scenarios() if s.get("name") == "tumbling"))
        for stop_after in range(1, 4):
            with self.subTest(stop_after=stop_after), client() as q:
                sinks = [op["queue"] for op in sc["pipeline"] if op["op"] == "to"]
                fresh(q, sc["source"], *sinks)
                feed(q, sc["source"], sc["input"])
                stream = build(sc["source"], sc["pipeline"])
                first = stream.worker(q, "conf.restart.py", batch=2, wait=0.2, reset=True)
                for _ in range(stop_after):
                    first.step()
                with client() as q2:
                    second = build(sc["source"], sc["pipeline"]).worker(q2, "conf.restart.py", batch=2, wait=0.2)
                    self.assertFalse(second.register()["fresh"])
                    second.drain()
                    total = first.stats.messages + second.stats.messages
                    self.assertEqual(total, sc["expect"]["acked"])
                    self.assertEqual(sink_of(q2, sinks[0], "p1"), sc["expect"]["sink"]["p1"])
                    self.assertEqual(second.state("p1"), sc["expect"]["state"]["p1"])

    def test_other_pipeline_refused(self) -> None:
        with client() as q:
            fresh(q, "streams-py-cfg")
            Stream.from_("streams-py-cfg").map(lambda v: v).worker(q, "conf.cfg.py", reset=True).register()
            other = Stream.from_("streams-py-cfg").filter(lambda v: True).worker(q, "conf.cfg.py")
            with self.assertRaises(Conflict) as cm:
                other.register()
            self.assertEqual(cm.exception.reason, "streams_config_mismatch")
            self.assertTrue(Stream.from_("streams-py-cfg").filter(lambda v: True)
                            .worker(q, "conf.cfg.py", reset=True).register()["reset"])

    def test_lease_lost_cycle_writes_nothing(self) -> None:
        # Worker A stalls inside its cycle until its lease has ended and worker B has run the batch: A's
        # commit is refused (409 streams_lease_lost) and the sink holds each output once.
        with client() as qa, client() as qb:
            fresh(qa, "streams-py-lease", "streams-py-lease-sink")
            feed(qa, "streams-py-lease", {"p1": [1, 2, 3]})
            a_in, b_done = threading.Event(), threading.Event()

            def stall(v: Any) -> Any:
                a_in.set()
                b_done.wait(30)
                return v

            a = Stream.from_("streams-py-lease").map(stall).to("streams-py-lease-sink").worker(
                qa, "conf.lease.py", batch=10, wait=0.2, reset=True, lease_seconds=1)
            b = Stream.from_("streams-py-lease").map(lambda v: v).to("streams-py-lease-sink").worker(
                qb, "conf.lease.py", batch=10, wait=0.5)
            t = threading.Thread(target=a.step)
            t.start()
            self.assertTrue(a_in.wait(20), "worker A never popped the batch")
            until = time.monotonic() + 20
            while b.stats.messages < 3 and time.monotonic() < until:
                b.step()
            b_done.set()
            t.join(30)
            self.assertEqual(b.stats.messages, 3)
            self.assertEqual(a.stats.lease_lost, 1)
            self.assertEqual(a.stats.messages, 0)
            self.assertEqual(sink_of(qa, "streams-py-lease-sink", "p1"), [1, 2, 3])

    def test_killed_worker_never_duplicates(self) -> None:
        # Worker processes killed at random points (SIGKILL; or their own exit before a call or after its
        # answer, streams_kill_worker.py), before, inside or after a cycle's commit, then replaced: the sink holds each partition's running sums exactly once and in order, and
        # the state the final sum; a sink output without its ack, or an ack without it, would show.
        assert _broker is not None
        src, sink, n = "streams-py-kill", "streams-py-kill-sink", 120
        with client() as q:
            fresh(q, src, sink)
            # Every killed worker's batch comes back once its lease expires, and counts a delivery: past the
            # queue's retryLimit (3) a batch would go to the dead letters and skip the sums. The property
            # here is the cycle's, so no run may reach the limit.
            q.configure(src, {"retryLimit": 1000000})
            parts = {f"p{i}": [{"n": k} for k in range(1, n + 1)] for i in range(3)}
            feed(q, src, parts)
            pipeline(src, sink).worker(q, "conf.kill.py", reset=True).register()
            rng = random.Random(39)
            kills = 0
            for _ in range(20):
                proc = subprocess.Popen([sys.executable, "-B", os.path.join(HERE, "streams_kill_worker.py"),
                                         _broker.base, src, sink, "conf.kill.py", str(rng.randrange(1 << 30))])
                try:
                    proc.wait(rng.uniform(0.3, 1.2))  # the kill point, not a synchronisation
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGKILL)
                kills += proc.wait() in (9, -signal.SIGKILL)
            last = pipeline(src, sink).worker(q, "conf.kill.py", batch=50, wait=0.5)
            last.register()
            assert last.query_id is not None
            pids = {p: self.partition_id(src, p) for p in parts}
            sums = [k * (k + 1) // 2 for k in range(1, n + 1)]
            done = {p: {"reduce\u001f" + p: {"acc": sums[-1]}} for p in parts}
            until = time.monotonic() + 60
            # The killed workers' leases end within a second; the last worker cycles until every
            # partition's committed state is its final sum (the state commits with the last ack).
            while time.monotonic() < until and {p: last._read_state(pids[p]) for p in parts} != done:
                last.step()
            self.assertGreater(kills, 10)
            for p in parts:
                self.assertEqual(last._read_state(pids[p]), done[p])
                self.assertEqual(sink_of(q, sink, p), sums, f"sink of {p}")

    def partition_id(self, queue: str, partition: str) -> str:
        return psql("SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues qu ON qu.id = lp.queue_id "
                    f"WHERE qu.name = '{queue}' AND lp.name = '{partition}'")

    def test_token_bucket(self) -> None:
        # Two tokens, one more per 1000 s of the worker's clock: two pass, the third waits for its token.
        now = [1_000_000.0]
        with client() as q:
            fresh(q, "streams-py-tb", "streams-py-tb-sink")
            feed(q, "streams-py-tb", {"p1": [1, 2, 3, 4]})
            w = (Stream.from_("streams-py-tb").gate(token_bucket_gate(2, 0.001)).to("streams-py-tb-sink")
                 .worker(q, "conf.tb.py", batch=10, wait=0.2, reset=True, lease_seconds=1, clock=lambda: now[0]))
            w.drain()
            self.assertEqual((w.stats.messages, w.stats.denied), (2, 2))
            self.assertEqual(sink_of(q, "streams-py-tb-sink", "p1"), [1, 2])
            now[0] += 1000
            until = time.monotonic() + 15
            while w.stats.messages < 3 and time.monotonic() < until:
                w.step()
            self.assertEqual(w.stats.messages, 3)
            self.assertEqual(sink_of(q, "streams-py-tb-sink", "p1"), [3])
            self.assertLess(float(w.state("p1")["gate\u001fp1"]["tokens"]), 1)

    def test_gate_context(self) -> None:
        seen: list[tuple[str, str]] = []

        def gate(v: Any, ctx: GateContext) -> bool:
            seen.append((ctx.key, ctx.partition))
            return True

        with client() as q:
            fresh(q, "streams-py-gctx")
            feed(q, "streams-py-gctx", {"p9": [{"u": "x"}]})
            Stream.from_("streams-py-gctx").key_by(lambda v: v["u"]).gate(gate).worker(
                q, "conf.gctx.py", wait=0.2, reset=True).drain()
            self.assertEqual(seen, [("x", "p9")])


if __name__ == "__main__":
    unittest.main()
