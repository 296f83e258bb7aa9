"""The conformance runner of the Python clients: every scenario of clients/conformance/scenarios (as
that folder's README defines them), one test each, run with the blocking client and again with the
asyncio client, against real brokers on the private PostgreSQL."""
from __future__ import annotations

import asyncio
import inspect
import os
import random
import socket
import string
import threading
import time
import unittest
import uuid
from decimal import Decimal
from typing import Any, Optional

from harness import Broker, dead_url, psql, status_of

from queen_client import AsyncQueen, Queen, QueenError, _json

SCENARIOS = os.environ.get("QUEEN_CONFORMANCE_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "conformance", "scenarios")
ONLY = os.environ.get("QUEEN_CONFORMANCE_ONLY")  # a name substring, to run a few while working

main_broker: Optional[Broker] = None


def setUpModule() -> None:
    global main_broker
    main_broker = Broker()


def tearDownModule() -> None:
    if main_broker is not None:
        main_broker.stop()


class StepFailed(AssertionError):
    pass


# ---- variables -----------------------------------------------------------------------------------------

def _text(v: Any) -> str:
    return v if isinstance(v, str) else _json.dumps(v)


def _subst_str(s: str, vs: dict[str, Any]) -> str:
    out, rest = [], s
    while True:
        i = rest.find("${")
        j = rest.find("}", i + 2) if i >= 0 else -1
        if i < 0 or j < 0:
            out.append(rest)
            return "".join(out)
        name = rest[i + 2:j]
        if name not in vs:
            raise StepFailed(f"unknown variable {name} in {s}")
        out.append(rest[:i])
        out.append(_text(vs[name]))
        rest = rest[j + 1:]


def subst(v: Any, vs: dict[str, Any]) -> Any:
    if isinstance(v, str):
        if v.startswith("${") and v.endswith("}") and v.find("}") == len(v) - 1:
            if v[2:-1] not in vs:
                raise StepFailed(f"unknown variable {v}")
            return vs[v[2:-1]]
        return _subst_str(v, vs)
    if isinstance(v, list):
        return [subst(x, vs) for x in v]
    if isinstance(v, dict):
        return {_subst_str(k, vs): subst(x, vs) for k, x in v.items()}
    return v


# ---- patterns ------------------------------------------------------------------------------------------

_ABSENT = object()


def is_number(v: Any) -> bool:
    return isinstance(v, (int, Decimal)) and not isinstance(v, bool)


def equal(a: Any, b: Any) -> bool:
    if is_number(a) and is_number(b):
        return Decimal(a) == Decimal(b)  # exact decimal values, never through a double
    if is_number(a) or is_number(b):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if is_number(v):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def match(p: Any, v: Any, path: str = "") -> Optional[str]:
    """None when v matches p, else why not."""
    at = path or "/"
    if isinstance(p, dict) and len(p) == 1 and next(iter(p)).startswith("$"):
        m, arg = next(iter(p.items()))
        if m == "$absent":
            return None if v is _ABSENT else f"at {at}: present, expected absent"
        if v is _ABSENT:
            return f"at {at}: absent"
        if m == "$any":
            return None
        if m == "$type":
            ok = type_name(v) == arg or (arg == "integer" and isinstance(v, int) and not isinstance(v, bool))
            return None if ok else f"at {at}: {type_name(v)}, expected {arg}"
        if m == "$raw":
            return None if _json.dumps(v) == arg else f"at {at}: raw text {_json.dumps(v)}, expected {arg}"
        if m == "$len":
            return None if isinstance(v, list) and equal(len(v), arg) else f"at {at}: {v!r}, expected length {arg}"
        if m == "$ne":
            return None if not equal(arg, v) else f"at {at}: equal to {arg!r}"
        return f"at {at}: unknown matcher {m}"
    if v is _ABSENT:
        return f"at {at}: absent, expected {p!r}"
    if isinstance(p, dict):
        if not isinstance(v, dict):
            return f"at {at}: {type_name(v)}, expected an object"
        for k, sub in p.items():
            why = match(sub, v.get(k, _ABSENT), f"{path}/{k}")
            if why:
                return why
        return None
    if isinstance(p, list):
        if not isinstance(v, list) or len(v) != len(p):
            return f"at {at}: {_json.dumps(v)[:200]}, expected {len(p)} elements"
        for i, (sub, x) in enumerate(zip(p, v)):
            why = match(sub, x, f"{path}/{i}")
            if why:
                return why
        return None
    return None if equal(p, v) else f"at {at}: {_json.dumps(v)[:200]}, expected {_json.dumps(p)}"


def pointer(doc: Any, ptr: str) -> Any:
    if ptr == "":
        return doc
    cur = doc
    for part in ptr.lstrip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _ABSENT
    return cur


# ---- the calls -----------------------------------------------------------------------------------------

def wire(r: Any) -> Any:
    """A result as the broker's JSON (dataclasses keep it in raw)."""
    if hasattr(r, "raw"):
        return r.raw
    if isinstance(r, list):
        return [wire(x) for x in r]
    return r


async def maybe(x: Any) -> Any:
    return await x if inspect.isawaitable(x) else x


def expiry(a: dict[str, Any]) -> dict[str, Any]:
    return {"ttl": a.get("ttlSeconds"), "forever": bool(a.get("forever"))}


async def run_consume(c: Any, a: dict[str, Any]) -> Any:
    h = a.get("handler") or {}
    lock = threading.Lock()
    deliveries: dict[str, int] = {}
    counts = {"handled": 0, "failed": 0}
    stop_after = int(a.get("stopAfter", 1))
    asynchronous = isinstance(c, AsyncQueen)
    stop: Any = asyncio.Event() if asynchronous else threading.Event()

    def account(m: Any) -> int:
        with lock:
            deliveries[m.transaction_id] = deliveries.get(m.transaction_id, 0) + 1
            return deliveries[m.transaction_id]

    def settle(tx: Any, delivery: int) -> bool:
        if h.get("failFirst") and delivery == 1:
            with lock:
                counts["failed"] += 1
            return False
        if h.get("effect") is not None:
            tx.kv(h["effect"])
        with lock:
            counts["handled"] += 1
            if counts["handled"] >= stop_after:
                stop.set()
        return True

    def sync_handler(m: Any, tx: Any) -> bool:
        d = account(m)
        time.sleep(int(h.get("sleepMs", 0)) / 1000)
        return settle(tx, d)

    async def async_handler(m: Any, tx: Any) -> bool:
        d = account(m)
        await asyncio.sleep(int(h.get("sleepMs", 0)) / 1000)
        return settle(tx, d)

    kw = dict(concurrency=int(a.get("concurrency", 1)), group=a.get("group"), batch=int(a.get("batch", 1)),
              lease_seconds=int(a.get("leaseSeconds", 30)), poll=0.3, stop=stop, handle_signals=False,
              tenant=a.get("tenant"))
    limit = int(a.get("timeoutMs", 30000)) / 1000
    fired = []
    if asynchronous:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(limit, lambda: (fired.append(1), stop.set()))
        try:
            await c.consume(a["queue"], async_handler, **kw)
        finally:
            timer.cancel()
    else:
        t = threading.Timer(limit, lambda: (fired.append(1), stop.set()))
        t.start()
        try:
            c.consume(a["queue"], sync_handler, **kw)
        finally:
            t.cancel()
    if fired:
        raise StepFailed(f"consume did not stop within {limit} s ({counts})")
    return {"handled": counts["handled"], "failed": counts["failed"], "deliveries": deliveries}


async def do_call(c: Any, call: str, a: dict[str, Any]) -> Any:
    t = a.get("tenant")
    ns, key = a.get("ns"), a.get("key")
    if call == "health":
        return await maybe(c.health())
    if call == "kv_get":
        return wire(await maybe(c.kv.get(ns, key, tenant=t)))
    if call == "kv_put":
        return wire(await maybe(c.kv.put(ns, key, a.get("value"), expect=a.get("expect"),
                                         required=bool(a.get("required")), tenant=t, **expiry(a))))
    if call == "kv_put_if_absent":
        return wire(await maybe(c.kv.put_if_absent(ns, key, a.get("value"), required=bool(a.get("required")),
                                                   tenant=t, **expiry(a))))
    if call == "kv_delete":
        return wire(await maybe(c.kv.delete(ns, key, expect=a.get("expect"), required=bool(a.get("required")),
                                            tenant=t)))
    if call == "kv_incr":
        return wire(await maybe(c.kv.incr(ns, key, a.get("delta"), min=a.get("min"), max=a.get("max"),
                                          required=bool(a.get("required")), tenant=t, **expiry(a))))
    if call == "kv_get_many":
        return wire(await maybe(c.kv.get_many(ns, a.get("keys", []), tenant=t)))
    if call == "kv_get_prefix":
        return wire(await maybe(c.kv.get_prefix(ns, a.get("prefix"), after=a.get("after"),
                                                limit=a.get("limit"), keys_only=bool(a.get("keysOnly")),
                                                tenant=t)))
    if call == "kv_scan":
        scan = c.kv.scan(ns, a.get("prefix"), page_size=a.get("limit"), keys_only=bool(a.get("keysOnly")),
                         tenant=t)
        if isinstance(c, AsyncQueen):
            keys = [row.key async for row in scan]
        else:
            keys = [row.key for row in scan]
        return {"keys": keys, "pages": scan.pages}
    if call == "kv_apply":
        return await maybe(c.kv.apply(a.get("ops", []), tenant=t))
    if call == "kv_namespaces":
        return {"namespaces": await maybe(c.kv.namespaces(tenant=t))}
    if call == "push":
        return wire(await maybe(c.push(a.get("items", []), tenant=t)))
    if call == "pop":
        timeout = a.get("timeoutMs")
        return wire(await maybe(c.pop(a["queue"], partition=a.get("partition"), group=a.get("group"),
                                      batch=a.get("batch"), wait=bool(a.get("wait")),
                                      timeout=int(timeout) / 1000 if timeout is not None else None,
                                      lease_seconds=a.get("leaseSeconds"), auto_ack=bool(a.get("autoAck")),
                                      tenant=t)))
    if call == "ack":
        return wire(await maybe(c.ack(list(a.get("acks", [])), group=a.get("group"), tenant=t)))
    if call == "lease_extend":
        return wire(await maybe(c.lease_extend(a["leaseId"], int(a.get("seconds", 60)), tenant=t)))
    if call == "configure":
        return wire(await maybe(c.configure(a["queue"], a.get("options"), namespace=a.get("namespace"),
                                            task=a.get("task"), tenant=t)))
    if call == "queues":
        return {"queues": await maybe(c.queues(tenant=t))}
    if call == "queue_delete":
        return await maybe(c.queue_delete(a["queue"], tenant=t))
    if call == "transaction":
        tx = c.tx(tenant=t)
        for op in a.get("ops", []):
            if "ack" in op:
                tx.ack(op["ack"])
            elif "push" in op:
                item = dict(op["push"])
                tx.push(item.pop("queue"), [item])
            elif "kv" in op:
                tx.kv(op["kv"])
            else:
                raise StepFailed(f"unknown transaction op {op}")
        for lease in a.get("requiredLeases", []):
            tx.require_lease(lease)
        return wire(await maybe(tx.commit()))
    if call == "consume":
        return await run_consume(c, a)
    raise StepFailed(f"unknown call {call}")


# ---- needs: the brokers a scenario runs against --------------------------------------------------------

class World:
    def __init__(self, needs: Optional[dict[str, Any]]) -> None:
        self.brokers: list[Broker] = []
        self.urls: list[str] = []
        self.held: Optional[socket.socket] = None
        self.tenant: Optional[str] = None
        assert main_broker is not None
        if not needs:
            self.urls.append(main_broker.base)
        elif needs.get("noBroker"):
            self.urls.append(dead_url())
        elif needs.get("saturated"):
            self._saturate()
        elif "quota" in needs:
            self.tenant = str(uuid.uuid4())
            cols = "".join(f", {k}" for k in needs["quota"])
            vals = "".join(f", {_json.dumps(v)}" for v in needs["quota"].values())
            psql(f"INSERT INTO queen.kv_quota (tenant_id, enabled{cols}) VALUES ('{self.tenant}', true{vals})")
            self.brokers.append(Broker({"QUEEN_TENANCY_HEADER": "1", "QUEEN_TRUSTED_PROXY": "1"}))
            self.urls.append(self.brokers[0].base)
        else:
            if needs.get("deadUrlFirst"):
                self.urls.append(dead_url())
            n = int(needs.get("brokers", 0))
            for _ in range(n):
                self.brokers.append(Broker())
            self.urls += [b.base for b in self.brokers] if n else [main_broker.base]

    def _saturate(self) -> None:
        b = Broker({"QUEEN_MAX_CONNECTIONS": "1", "QUEEN_HTTP_THREADS": "1", "QUEEN_IDLE_TIMEOUT_MS": "600000",
                    "QUEEN_REQUEST_READ_TIMEOUT_MS": "600000"}, wait=False)
        self.brokers.append(b)
        self.urls.append(b.base)
        # The broker admits connections in the order they open: the one held here is its first,
        # before any probe, so it takes the only place.
        until = time.monotonic() + 30
        while True:
            s = socket.socket()
            try:
                s.connect(("127.0.0.1", b.port))
                self.held = s
                break
            except OSError:
                s.close()
                if time.monotonic() > until:
                    raise RuntimeError(f"the broker never listened (log: {b.log})")
                time.sleep(0.02)
        while True:  # up once a request is answered; with the place held, the answer is 503
            st = status_of(b.base)
            if st == 503:
                return
            if st == 200:
                raise RuntimeError("the held connection did not take the broker's only place")
            if time.monotonic() > until:
                raise RuntimeError(f"the broker never answered (log: {b.log})")
            time.sleep(0.02)

    def close(self) -> None:
        if self.held is not None:
            self.held.close()
        for b in self.brokers:
            b.stop()
        if self.tenant:
            psql(f"DELETE FROM queen.kv_quota WHERE tenant_id = '{self.tenant}'")


def run_token() -> str:
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(12))


async def run_scenario(sc: dict[str, Any], asynchronous: bool) -> None:
    world = World(sc.get("needs"))
    co = sc.get("client") or {}
    opts = dict(max_attempts=int(co.get("max_attempts", 3)), backoff=int(co.get("backoff_ms", 50)) / 1000,
                max_backoff=int(co.get("max_backoff_ms", 2000)) / 1000, timeout=int(co.get("timeout_ms", 10000)) / 1000)
    c: Any = AsyncQueen(world.urls, **opts) if asynchronous else Queen(world.urls, **opts)
    try:
        vs: dict[str, Any] = {"run": run_token()}
        if world.tenant:
            vs["tenant"] = world.tenant
        for i, step in enumerate(sc["steps"]):
            if "harness" in step:
                b = int(step.get("broker", 0))
                if step["harness"] != "stop_broker" or b >= len(world.brokers):
                    raise StepFailed(f"step {i}: harness {step['harness']} broker {b} is not something this runner can do")
                world.brokers[b].stop()
                continue
            call = step["call"]
            args = subst(step.get("args") or {}, vs)
            expect = subst(step.get("expect"), vs) or {}
            before = c.retries
            got: Any
            try:
                result, failed = await do_call(c, call, args), False
                got = result
            except QueenError as e:
                failed, got = True, e.to_dict()
            retries = c.retries - before
            if "error" in expect:
                if not failed:
                    raise StepFailed(f"step {i} ({call}): succeeded with {_json.dumps(got)[:300]}, expected an error")
                why = match(expect["error"], got)
                if why:
                    raise StepFailed(f"step {i} ({call}): error {why}: {_json.dumps(got)}")
            else:
                if failed:
                    raise StepFailed(f"step {i} ({call}): failed with {_json.dumps(got)}")
                if "result" in expect:
                    why = match(expect["result"], got)
                    if why:
                        raise StepFailed(f"step {i} ({call}): result {why}: {_json.dumps(got)[:500]}")
            if "retries" in step and not equal(retries, step["retries"]):
                raise StepFailed(f"step {i} ({call}): {retries} retries, expected {step['retries']}")
            for name, ptr in (step.get("save") or {}).items():
                v = pointer(got, ptr)
                if v is _ABSENT:
                    raise StepFailed(f"step {i} ({call}): save {name}: nothing at {ptr} in {_json.dumps(got)[:300]}")
                vs[name] = v
    finally:
        if asynchronous:
            await c.close()
        else:
            c.close()
        world.close()


def load_scenarios() -> list[dict[str, Any]]:
    out = []
    for name in sorted(os.listdir(SCENARIOS)):
        if name.endswith(".json"):
            with open(os.path.join(SCENARIOS, name), encoding="utf-8") as f:
                out += _json.loads(f.read())["scenarios"]
    return [s for s in out if not ONLY or ONLY in s["name"]]


class Conformance(unittest.TestCase):
    """One test per scenario and client (filled in below)."""


def _add(sc: dict[str, Any], asynchronous: bool) -> None:
    def test(self: unittest.TestCase) -> None:
        asyncio.run(run_scenario(sc, asynchronous))
    name = f"test_{'async' if asynchronous else 'sync'}_{sc['name'].replace('.', '_')}"
    test.__name__ = name
    test.__doc__ = f"{'asyncio' if asynchronous else 'blocking'} client: {sc['name']}"
    setattr(Conformance, name, test)


for _sc in load_scenarios():
    _add(_sc, False)
    _add(_sc, True)

if __name__ == "__main__":
    unittest.main()
