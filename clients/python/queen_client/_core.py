"""What the blocking and the asyncio client share: each call shaped as a ``Call`` (method, path, body,
whether a repeat is safe, how to read the answer), what goes on the wire for it (target, body, headers),
the attempts and the retry policy (``Attempts``: which URL, the value of an answer, the error or the wait),
the error envelope, and the builders. No I/O here: ``client.py`` and ``aio.py`` send the calls."""
from __future__ import annotations

import logging
import os
import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Generic, Iterable, Mapping, Optional, Self, TypeVar, Union
from urllib.parse import quote, urlsplit

from . import _json
from .errors import BadArgument, PreconditionFailed, QueenBadResponse, QueenError, TransportError, error_class
from .results import (AckResult, ConfigureResult, GetManyResult, GetResult, LeaseResult, Message, PopResult,
                      PrefixPage, PushResult, Row, TxResult, WriteResult)

#: every retry is logged here (WARNING when the attempts run out is the caller's to log: it gets the error)
log = logging.getLogger("queen_client")

Ttl = Union[int, float, timedelta, None]
AckLike = Union[Message, Mapping[str, Any]]
T = TypeVar("T")


@dataclass
class Call(Generic[T]):
    """One HTTP call and how to read its 2xx answer (a T)."""
    method: str
    path: str
    finish: Callable[[int, Any], T]
    body: Any = None
    has_body: bool = False
    #: whether repeating it after a lost answer, a 429 or a 503 cannot harm (the conformance README's
    #: retry rules); a refused connection sent nothing and is retried whatever this says
    safe: bool = False
    tenant: Optional[str] = None
    #: a long poll's wait, added to the attempt's timeout
    extra_ms: int = 0

    def body_bytes(self) -> Optional[bytes]:
        return _json.dumps(self.body).encode("utf-8") if self.has_body else None


@dataclass
class Options:
    """Client options. ``timeout`` and the backoffs are in seconds."""
    urls: list[str]
    token: Optional[str] = None
    max_attempts: int = 3
    backoff: float = 0.05
    max_backoff: float = 5.0
    timeout: float = 30.0
    connect_timeout: float = 3.0
    #: called before every retry with (attempt just failed, its error, seconds it will wait)
    on_retry: Optional[Callable[[int, QueenError, float], None]] = field(default=None, repr=False)


def make_options(urls: Union[str, Iterable[str], None], token: Optional[str], max_attempts: int, backoff: float,
                 max_backoff: float, timeout: float, connect_timeout: float,
                 on_retry: Optional[Callable[[int, QueenError, float], None]] = None) -> Options:
    if urls is None:
        # clients/API.md: with no URL given every client reads QUEEN_URL (a comma-separated list).
        urls = [u.strip() for u in os.environ.get("QUEEN_URL", "").split(",") if u.strip()]
    lst = [urls] if isinstance(urls, str) else list(urls)
    if not lst:
        raise ValueError("at least one broker URL is needed (give urls, or set QUEEN_URL)")
    return Options([u.rstrip("/") for u in lst], token or None, max(1, int(max_attempts)), backoff, max_backoff,
                   timeout, connect_timeout, on_retry)


def backoff_wait(opts: Options, attempt: int, retry_after: int) -> float:
    """Seconds to wait before attempt+1: a jittered exponential backoff in [d/2, d] (d the base doubled per
    attempt), or the answer's Retry-After when longer; both capped by max_backoff."""
    d = opts.backoff * (2 ** (attempt - 1))
    d = min(d, opts.max_backoff)
    wait = d / 2 + random.random() * d / 2
    if retry_after > 0 and retry_after > wait:
        wait = float(retry_after)
    return float(min(wait, opts.max_backoff))


def headers(opts: Options, call: "Call[Any]") -> dict[str, str]:
    h = {"Accept": "application/json"}
    if call.has_body:
        h["Content-Type"] = "application/json"
    if opts.token:
        h["Authorization"] = f"Bearer {opts.token}"
    if call.tenant:
        h["x-queen-tenant"] = call.tenant
    return h


def request(opts: Options, base: str, call: "Call[Any]") -> tuple[str, Optional[bytes], dict[str, str]]:
    """What goes on the wire for call sent to the broker at base: the request target (the base URL's
    path, then the call's), the body, and the headers (the transport adds Host and Content-Length)."""
    return urlsplit(base).path + call.path, call.body_bytes(), headers(opts, call)


def parse_retry_after(value: Optional[str]) -> int:
    try:
        n = int((value or "").strip())
    except ValueError:
        return 0  # an HTTP date: the broker never sends one
    return n if 0 < n < 86400 else 0


def error_from_answer(status: int, body: bytes, retry_after: int, attempts: int) -> QueenError:
    """The typed error of a non-2xx answer: the envelope's members as sent; a body that is not the
    envelope keeps its status and says so."""
    env: Any = None
    try:
        env = _json.loads(body) if body else None
    except ValueError:
        env = None
    cls = error_class(status)
    if isinstance(env, dict) and isinstance(env.get("code"), str):
        detail = env.get("detail") or env.get("error") or ""
        return cls(status, env["code"], str(env.get("reason") or env["code"]), str(detail), retry_after, attempts)
    return cls(status, f"http_{status}", f"http_{status}", f"HTTP {status} without the error envelope",
               retry_after, attempts)


def own_error(code: str, detail: str, attempts: int) -> QueenError:
    """The client's own failure: no whole answer was had (status 0)."""
    return TransportError(0, code, code, detail, 0, attempts)


class Failed(Exception):
    """No whole answer: code is unreachable (nothing was sent), timeout or transport."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class Attempts(Generic[T]):
    """One call's attempts: which broker URL the next one goes to, how long it may take, and what each
    outcome means: the value, the error to raise, or the seconds to wait before the next attempt. The
    client sends each attempt and sleeps its own way (a thread, or the event loop)."""

    def __init__(self, opts: Options, current: int, call: Call[T]) -> None:
        self.opts, self.call = opts, call
        self.index = current % len(opts.urls)
        self.timeout = opts.timeout + call.extra_ms / 1000.0
        #: attempts begun, the first included
        self.number = 0

    def begin(self) -> bool:
        """Counts the attempt about to be sent; True when it is a retry."""
        self.number += 1
        return self.number > 1

    def value(self, status: int, data: bytes) -> T:
        """What a 2xx answer means for the call; raises QueenBadResponse when it does not read."""
        try:
            body = _json.loads(data) if data else None
        except ValueError:
            raise QueenBadResponse(status, "bad_response", "bad_response", "the answer is not JSON", 0,
                                   self.number) from None
        try:
            return self.call.finish(status, body)
        except QueenError as e:
            e.attempts = self.number
            raise

    def refused(self, status: int, data: bytes, retry_after: Optional[str]) -> float:
        """Any other answer: the seconds to wait before the next attempt, or raises its error."""
        err = error_from_answer(status, data, parse_retry_after(retry_after), self.number)
        # A rate limit is the tenant's on every broker: the next attempt stays on this URL.
        return self._again(err, status in (429, 503) and self.call.safe, status != 429)

    def failed(self, f: Failed) -> float:
        """No whole answer: the seconds to wait before the next attempt, or raises the client's error.
        A refused connection sent nothing, so it is tried again whatever the call."""
        return self._again(own_error(f.code, f.detail, self.number), f.code == "unreachable" or self.call.safe,
                           True)

    def _again(self, err: QueenError, retry: bool, next_url: bool) -> float:
        if not retry or self.number >= self.opts.max_attempts:
            raise err
        wait = backoff_wait(self.opts, self.number, err.retry_after)
        log.info("attempt %d of %s %s failed (%s); retrying in %.3f s", self.number, self.call.method,
                 self.call.path, err, wait)
        if self.opts.on_retry is not None:
            self.opts.on_retry(self.number, err, wait)
        if next_url:
            self.index = (self.index + 1) % len(self.opts.urls)
        return wait


# ---- reading answers -----------------------------------------------------------------------------------

def _verdict(body: Any) -> bool:
    return isinstance(body, dict) and body.get("ok") is False and body.get("reason") == "kv_precondition"


def _object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise QueenBadResponse(200, "bad_response", "bad_response", f"{what} answered {type(body).__name__}")
    return body


def _array(body: Any, what: str) -> list[Any]:
    if not isinstance(body, list):
        raise QueenBadResponse(200, "bad_response", "bad_response", f"{what} answered {type(body).__name__}")
    return body


def _kv_single(of: Callable[[dict[str, Any]], T]) -> Callable[[int, Any], T]:
    def finish(status: int, body: Any) -> T:
        if _verdict(body):
            raise PreconditionFailed.from_verdict(body)
        return of(_object(body, "a kv call"))
    return finish


def _kv_results(status: int, body: Any) -> list[Any]:
    if _verdict(body):
        raise PreconditionFailed.from_verdict(body)
    results = _object(body, "a kv batch").get("results")
    return _array(results, "a kv batch's results")


def _kv_one(of: Callable[[dict[str, Any]], T]) -> Callable[[int, Any], T]:
    def finish(status: int, body: Any) -> T:
        results = _kv_results(status, body)
        if not results:
            raise QueenBadResponse(200, "bad_response", "bad_response", "a one-op batch answered no element")
        return of(_object(results[0], "a kv op"))
    return finish


def _plain(status: int, body: Any) -> dict[str, Any]:
    return _object(body, "the call")


def _health(status: int, body: Any) -> dict[str, Any]:
    b = _object(body, "health")
    if not isinstance(b.get("version"), str):
        raise QueenBadResponse(status, "bad_response", "bad_response", "the health answer has no version")
    return b


def _pop(status: int, body: Any) -> Optional[PopResult]:
    if status == 204 or body is None:
        return None
    return PopResult.of(_object(body, "pop"))


# ---- shaping calls -----------------------------------------------------------------------------------

def pct(s: str) -> str:
    """A path segment escaped once: '/' and '%' stay inside the segment."""
    return quote(s, safe="")


def key_path(ns: str, key: str) -> str:
    return f"/api/v1/kv/{pct(ns)}/{pct(key)}"


EXPIRY_RULE = "expiry: give ttl (seconds > 0) or forever"


def expiry(op: dict[str, Any], ttl: Ttl, forever: bool) -> dict[str, Any]:
    """Exactly one expiry, checked before anything is sent (clients/API.md, "Expiry"): neither, both, or a
    ttl that is not a whole number of seconds > 0 would store a key for a time nobody chose."""
    if forever and ttl is None:
        op["forever"] = True
        return op
    if forever or ttl is None or isinstance(ttl, bool):
        raise BadArgument(EXPIRY_RULE + (" (not both)" if forever else ""))
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else ttl
    if seconds != int(seconds) or int(seconds) <= 0:
        raise BadArgument(f"{EXPIRY_RULE} (ttl {ttl!r})")
    op["ttlSeconds"] = int(seconds)
    return op


def kv_op_repeatable(op: Mapping[str, Any]) -> bool:
    """Reads, and puts and deletes without expect: the same final state however often they run."""
    name = op.get("op")
    return name in ("get", "getMany", "getPrefix") or (name in ("put", "delete") and "expect" not in op)


def health() -> Call[dict[str, Any]]:
    return Call("GET", "/health", _health, safe=True)


def kv_get(ns: str, key: str, tenant: Optional[str]) -> Call[GetResult]:
    return Call("GET", key_path(ns, key), _kv_single(GetResult.of), safe=True, tenant=tenant)


def kv_put(ns: str, key: str, value: Any, ttl: Ttl, forever: bool, expect: Optional[int], required: bool,
           tenant: Optional[str]) -> Call[WriteResult]:
    body = expiry({"value": value}, ttl, forever)
    if expect is not None:
        body["expect"] = int(expect)
    if required:
        body["required"] = True
    return Call("PUT", key_path(ns, key), _kv_single(WriteResult.of), body, True, expect is None, tenant)


def kv_delete(ns: str, key: str, expect: Optional[int], required: bool, tenant: Optional[str]) -> Call[WriteResult]:
    body: dict[str, Any] = {}
    if expect is not None:
        body["expect"] = int(expect)
    if required:
        body["required"] = True
    return Call("DELETE", key_path(ns, key), _kv_single(WriteResult.of), body if body else None, bool(body),
                expect is None, tenant)


def one_op(op: dict[str, Any], of: Callable[[dict[str, Any]], T], tenant: Optional[str]) -> Call[T]:
    return Call("POST", "/api/v1/kv", _kv_one(of), [op], True, kv_op_repeatable(op), tenant)


def op_put_if_absent(ns: str, key: str, value: Any, ttl: Ttl, forever: bool, required: bool) -> dict[str, Any]:
    op = expiry({"op": "putIfAbsent", "ns": ns, "key": key, "value": value}, ttl, forever)
    if required:
        op["required"] = True
    return op


def op_put(ns: str, key: str, value: Any, ttl: Ttl, forever: bool, expect: Optional[int],
           required: bool) -> dict[str, Any]:
    op = expiry({"op": "put", "ns": ns, "key": key, "value": value}, ttl, forever)
    if expect is not None:
        op["expect"] = int(expect)
    if required:
        op["required"] = True
    return op


def op_delete(ns: str, key: str, expect: Optional[int], required: bool) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "delete", "ns": ns, "key": key}
    if expect is not None:
        op["expect"] = int(expect)
    if required:
        op["required"] = True
    return op


def op_incr(ns: str, key: str, delta: Any, min: Any, max: Any, ttl: Ttl, forever: bool,
            required: bool) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "incr", "ns": ns, "key": key, "delta": delta}
    if min is not None:
        op["min"] = min
    if max is not None:
        op["max"] = max
    expiry(op, ttl, forever)
    if required:
        op["required"] = True
    return op


def op_get_prefix(ns: str, prefix: str, after: Optional[str], limit: Optional[int],
                  keys_only: bool) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "getPrefix", "ns": ns, "prefix": prefix}
    if after is not None:
        op["after"] = after
    if limit:
        op["limit"] = int(limit)
    if keys_only:
        op["keysOnly"] = True
    return op


def kv_get_many(ns: str, keys: Iterable[str], tenant: Optional[str]) -> Call[GetManyResult]:
    return one_op({"op": "getMany", "ns": ns, "keys": list(keys)}, GetManyResult.of, tenant)


def kv_get_prefix(ns: str, prefix: str, after: Optional[str], limit: Optional[int], keys_only: bool,
                       tenant: Optional[str]) -> Call[PrefixPage]:
    return one_op(op_get_prefix(ns, prefix, after, limit, keys_only), PrefixPage.of, tenant)


def kv_apply(ops: list[dict[str, Any]], tenant: Optional[str]) -> Call[list[Any]]:
    safe = all(isinstance(o, Mapping) and kv_op_repeatable(o) for o in ops)
    return Call("POST", "/api/v1/kv", _kv_results, list(ops), True, safe, tenant)


def kv_namespaces(tenant: Optional[str]) -> Call[dict[str, Any]]:
    return Call("GET", "/api/v1/resources/kv/namespaces", _plain, safe=True, tenant=tenant)


def push(items: list[dict[str, Any]], tenant: Optional[str]) -> Call[list[PushResult]]:
    # A repeat is answered "duplicate" only when every item names itself.
    safe = bool(items) and all(isinstance(i, Mapping) and i.get("transactionId") for i in items)
    return Call("POST", "/api/v1/push", lambda s, b: [PushResult.of(r) for r in _array(b, "push")],
                {"items": list(items)}, True, safe, tenant)


def pop(queue: str, partition: Optional[str], group: Optional[str], batch: Optional[int], wait: bool,
        timeout: Optional[float], lease_seconds: Optional[int], auto_ack: bool,
        tenant: Optional[str]) -> Call[Optional[PopResult]]:
    path = f"/api/v1/pop/queue/{pct(queue)}"
    if partition is not None:
        path += f"/partition/{pct(partition)}"
    q: list[str] = []
    if group is not None:
        q.append(f"consumerGroup={pct(group)}")
    if batch:
        q.append(f"batch={int(batch)}")
    if lease_seconds:
        q.append(f"leaseSeconds={int(lease_seconds)}")
    if auto_ack:
        q.append("autoAck=true")
    wait_ms = 0
    if wait:
        wait_ms = int(timeout * 1000) if timeout is not None and timeout > 0 else 30000
        q.append("wait=true")
        q.append(f"timeout={wait_ms}")
    if q:
        path += "?" + "&".join(q)
    # Never repeated on a lost answer: what it leased comes back when the lease expires.
    return Call("GET", path, _pop, safe=False, tenant=tenant, extra_ms=wait_ms)


def queue_items(queue: str, partition: Optional[str], items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A queue handle's items as push takes them: each names the queue, and the handle's partition unless
    it names its own."""
    wire = []
    for it in items:
        w = {"queue": queue, **dict(it)}
        if partition is not None and "partition" not in w:
            w["partition"] = partition
        wire.append(w)
    return wire


def ack_items(acks: Union[AckLike, Iterable[AckLike]], status: Optional[str], error: Optional[str]) -> list[dict[str, Any]]:
    if isinstance(acks, (Message, Mapping)):
        acks = [acks]
    out: list[dict[str, Any]] = []
    for a in acks:
        item = a.ack_item() if isinstance(a, Message) else dict(a)
        if status is not None:
            item["status"] = status
        if error is not None:
            item["error"] = error
        out.append(item)
    return out


def is_one_ack(acks: Any) -> bool:
    """Whether ack was given one message (its answer is then one result, not a list)."""
    return isinstance(acks, (Message, Mapping))


def ack(acks: list[dict[str, Any]], group: Optional[str], tenant: Optional[str]) -> Call[list[AckResult]]:
    body: dict[str, Any] = {"acknowledgments": acks}
    if group is not None:
        body["consumerGroup"] = group
    # Each ack names its message by transactionId: a repeat settles nothing twice.
    return Call("POST", "/api/v1/ack/batch", lambda s, b: [AckResult.of(r) for r in _array(b, "ack")], body, True,
                True, tenant)


def lease_extend(lease_id: str, seconds: int, tenant: Optional[str]) -> Call[LeaseResult]:
    return Call("POST", f"/api/v1/lease/{pct(lease_id)}/extend",
                lambda s, b: LeaseResult.of(_object(b, "lease_extend")),
                {"seconds": int(seconds)}, True, True, tenant)


def configure(queue: str, options: Optional[Mapping[str, Any]], namespace: Optional[str], task: Optional[str],
              tenant: Optional[str]) -> Call[ConfigureResult]:
    body: dict[str, Any] = {"queue": queue}
    if options is not None:
        body["options"] = dict(options)
    if namespace is not None:
        body["namespace"] = namespace
    if task is not None:
        body["task"] = task
    return Call("POST", "/api/v1/configure", lambda s, b: ConfigureResult.of(_object(b, "configure")), body, True,
                True, tenant)


def queues(tenant: Optional[str]) -> Call[dict[str, Any]]:
    return Call("GET", "/api/v1/resources/queues", _plain, safe=True, tenant=tenant)


def queue_delete(queue: str, tenant: Optional[str]) -> Call[dict[str, Any]]:
    return Call("DELETE", f"/api/v1/resources/queues/{pct(queue)}", _plain, safe=True, tenant=tenant)


def streams_register(body: dict[str, Any], tenant: Optional[str]) -> Call[dict[str, Any]]:
    # The same name and hash resume: a repeat registers nothing new.
    return Call("POST", "/streams/v1/queries", _plain, body, True, True, tenant)


def streams_state_get(body: dict[str, Any], tenant: Optional[str]) -> Call[dict[str, Any]]:
    return Call("POST", "/streams/v1/state/get", _plain, body, True, True, tenant)


def streams_cycle(body: dict[str, Any], tenant: Optional[str]) -> Call[dict[str, Any]]:
    # Never repeated: a cycle whose answer was lost is settled by re-popping (its lease either
    # committed the batch or still holds it), never by sending it again (clients/STREAMS.md).
    return Call("POST", "/streams/v1/cycle", _plain, body, True, False, tenant)


def transaction(bundle: dict[str, Any], carries_id: bool, tenant: Optional[str]) -> Call[TxResult]:
    # A bundle naming a message (an ack, or an item with a transactionId) rolls back whole when
    # repeated after it committed, so nothing applies twice; one naming none is never repeated.
    return Call("POST", "/api/v1/transaction", lambda s, b: TxResult.of(_object(b, "transaction")), bundle, True,
                carries_id, tenant)


# ---- builders ------------------------------------------------------------------------------------------

class PrefixPages:
    """Where a walk over every row under a prefix stands: the rows of the page in hand, the cursor of the
    next, and whether there is one (a page that is not truncated is the last). The clients' iterators
    send ``next_call()`` and hand its page to ``took``."""

    def __init__(self, ns: str, prefix: str, page_size: Optional[int], keys_only: bool,
                 tenant: Optional[str]) -> None:
        self._ns, self._prefix = ns, prefix
        self._page_size, self._keys_only, self._tenant = page_size, keys_only, tenant
        self._rows: list[Row] = []
        self._after: Optional[str] = None
        self._more = True
        #: pages read so far
        self.pages = 0

    def next_call(self) -> Call[PrefixPage]:
        return kv_get_prefix(self._ns, self._prefix, self._after, self._page_size, self._keys_only,
                                  self._tenant)

    def took(self, page: PrefixPage) -> None:
        self.pages += 1
        self._rows = list(page.rows)
        self._more = page.truncated and page.next_after is not None
        self._after = page.next_after


class TxBuilder:
    """Collects a transaction: operations in the order added (consecutive pushes share one push
    operation), kv ops, required leases. ``commit`` sends it (the client's subclass)."""

    def __init__(self, tenant: Optional[str] = None) -> None:
        self._ops: list[dict[str, Any]] = []
        self._kv: list[dict[str, Any]] = []
        self._leases: list[str] = []
        self._open_push = False
        self._carries_id = False
        self._tenant = tenant

    def ack(self, message: AckLike, status: Optional[str] = None, group: Optional[str] = None) -> Self:
        """Settle a popped message (``status`` None: completed; ``group``: its consumer group)."""
        item = message.ack_item() if isinstance(message, Message) else dict(message)
        op: dict[str, Any] = {"type": "ack", "transactionId": item.get("transactionId"),
                              "partitionId": item.get("partitionId")}
        if item.get("leaseId") is not None:
            op["leaseId"] = item["leaseId"]
        if (status or item.get("status")) is not None:
            op["status"] = status or item.get("status")
        g = group if group is not None else item.get("consumerGroup")
        if g is not None:
            op["consumerGroup"] = g
        self._ops.append(op)
        self._open_push = False
        self._carries_id = True
        return self

    def push(self, queue: str, items: Iterable[Mapping[str, Any]], partition: Optional[str] = None) -> Self:
        """Push items (each ``{"payload": ..., "transactionId"?: ..., "partition"?: ...}``) to queue."""
        if not self._open_push:
            self._ops.append({"type": "push", "items": []})
            self._open_push = True
        target = self._ops[-1]["items"]
        for it in items:
            item: dict[str, Any] = {"queue": queue}
            part = it.get("partition", partition)
            if part is not None:
                item["partition"] = part
            item["payload"] = it.get("payload")
            if it.get("transactionId") is not None:
                item["transactionId"] = it["transactionId"]
                self._carries_id = True
            target.append(item)
        return self

    def kv(self, op: Mapping[str, Any]) -> Self:
        """Add a kv op as the wire has it (``{"op": "put", "ns": ..., ...}``)."""
        self._kv.append(dict(op))
        return self

    def kv_put(self, ns: str, key: str, value: Any, *, ttl: Ttl = None, forever: bool = False,
               expect: Optional[int] = None, required: bool = False) -> Self:
        return self.kv(op_put(ns, key, value, ttl, forever, expect, required))

    def kv_put_if_absent(self, ns: str, key: str, value: Any, *, ttl: Ttl = None, forever: bool = False,
                         required: bool = False) -> Self:
        return self.kv(op_put_if_absent(ns, key, value, ttl, forever, required))

    def kv_delete(self, ns: str, key: str, *, expect: Optional[int] = None, required: bool = False) -> Self:
        return self.kv(op_delete(ns, key, expect, required))

    def kv_incr(self, ns: str, key: str, delta: Any = 1, *, min: Any = None, max: Any = None, ttl: Ttl = None,
                forever: bool = False, required: bool = False) -> Self:
        return self.kv(op_incr(ns, key, delta, min, max, ttl, forever, required))

    def require_lease(self, lease: Union[str, Message]) -> Self:
        """Roll back unless this lease is still held when the transaction runs."""
        self._leases.append((lease.lease_id or "") if isinstance(lease, Message) else lease)
        return self

    def bundle(self) -> dict[str, Any]:
        """The wire body."""
        b: dict[str, Any] = {}
        if self._ops:
            b["operations"] = self._ops
        if self._kv:
            b["kv"] = self._kv
        if self._leases:
            b["requiredLeases"] = self._leases
        return b

    def call(self) -> Call[TxResult]:
        return transaction(self.bundle(), self._carries_id, self._tenant)


class BatchBuilder:
    """Collects kv ops for one atomic batch (``apply`` sends it: the client's subclass)."""

    def __init__(self, tenant: Optional[str] = None) -> None:
        self.ops: list[dict[str, Any]] = []
        self._tenant = tenant

    def op(self, op: Mapping[str, Any]) -> Self:
        self.ops.append(dict(op))
        return self

    def get(self, ns: str, key: str) -> Self:
        return self.op({"op": "get", "ns": ns, "key": key})

    def get_many(self, ns: str, keys: Iterable[str]) -> Self:
        return self.op({"op": "getMany", "ns": ns, "keys": list(keys)})

    def put(self, ns: str, key: str, value: Any, *, ttl: Ttl = None, forever: bool = False,
            expect: Optional[int] = None, required: bool = False) -> Self:
        return self.op(op_put(ns, key, value, ttl, forever, expect, required))

    def put_if_absent(self, ns: str, key: str, value: Any, *, ttl: Ttl = None, forever: bool = False,
                      required: bool = False) -> Self:
        return self.op(op_put_if_absent(ns, key, value, ttl, forever, required))

    def delete(self, ns: str, key: str, *, expect: Optional[int] = None, required: bool = False) -> Self:
        return self.op(op_delete(ns, key, expect, required))

    def incr(self, ns: str, key: str, delta: Any = 1, *, min: Any = None, max: Any = None, ttl: Ttl = None,
             forever: bool = False, required: bool = False) -> Self:
        return self.op(op_incr(ns, key, delta, min, max, ttl, forever, required))

    def call(self) -> Call[list[Any]]:
        return kv_apply(self.ops, self._tenant)
