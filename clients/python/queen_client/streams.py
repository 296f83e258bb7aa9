"""Streams: stateful pipelines whose state, output and input advance commit in one transaction.

``Stream.from_(queue).key_by(...).window_tumbling(...).aggregate(...).to(sink)`` builds a pipeline; a
``StreamWorker`` runs it: it pops a batch from one source partition under a lease, runs the batch through
the pipeline against that partition's state, and commits the state changes, the sink pushes and the ack of
the batch in one ``POST /streams/v1/cycle``. Every operator's meaning, the configuration hash and the cycle
are written once in clients/STREAMS.md; this module follows it. ``StreamWorker`` blocks, ``AsyncStreamWorker``
is its asyncio twin; both keep no state of their own between cycles, so a worker stopped anywhere resumes from
what the broker committed.
"""
from __future__ import annotations

import asyncio
import copy
import hashlib
import inspect
import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from .aio import AsyncQueen
from .client import Queen
from .errors import Conflict, QueenError
from .results import Message

__all__ = ["Stream", "StreamWorker", "AsyncStreamWorker", "StreamStats", "GateContext", "config_hash", "canonical_config",
           "token_bucket_gate"]

log = logging.getLogger("queen_client.streams")

SEP = "\u001f"
WATERMARK_KEY = "__wm__"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

Fn = Callable[..., Any]


# ---- the configuration hash (clients/STREAMS.md, "The configuration hash") ---------------------------------

def js_number(x: Union[int, float, Decimal]) -> str:
    """A number as ECMAScript's Number::toString writes it (60 not 60.0; 1e-7; 1e+21), so every runtime
    hashes the same bytes for the same configuration."""
    if isinstance(x, bool) or not isinstance(x, (int, float, Decimal)):
        raise TypeError(f"{x!r} is not a number")
    if isinstance(x, int) and abs(x) < 10 ** 21:
        return str(x)
    f = float(x)
    if not math.isfinite(f):
        raise ValueError(f"{x!r} has no JSON form")
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    t = Decimal(repr(abs(f))).normalize().as_tuple()
    digits = "".join(str(d) for d in t.digits)
    k = len(digits)
    n = int(t.exponent) + k  # the value is 0.digits * 10^n
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        s = (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + ("+" if e > 0 else "-") + str(abs(e))
    return sign + s


def canonical_json(v: Any) -> str:
    """JSON text as ECMAScript's JSON.stringify writes it: no whitespace, members in insertion order."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float, Decimal)):
        return js_number(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(canonical_json(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + canonical_json(x)
                              for k, x in v.items()) + "}"
    raise TypeError(f"{type(v).__name__} has no place in a configuration")


def canonical_config(operators: Iterable["_Op"]) -> str:
    """The text the configuration hash is taken of: one object per operator, in chain order."""
    return canonical_json([op.config() for op in operators])


def config_hash(operators: Iterable["_Op"]) -> str:
    """Lower-case hex SHA-256 of the UTF-8 bytes of canonical_config."""
    return hashlib.sha256(canonical_config(operators).encode("utf-8")).hexdigest()


# ---- helpers --------------------------------------------------------------------------------------------------

def _takes_ctx(fn: Fn) -> bool:
    """Whether fn takes a second positional argument (the emit's context)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(pos) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (JS toISOString): window keys carry it."""
    d = _EPOCH + timedelta(milliseconds=ms)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def _parse_time(v: Any) -> int:
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=timezone.utc)
        return int((v - _EPOCH) / timedelta(milliseconds=1))
    if isinstance(v, (int, float, Decimal)) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, str):
        s = v.strip()
        return _parse_time(datetime.fromisoformat(s[:-1] + "+00:00" if s.endswith("Z") else s))
    raise ValueError(f"event time {v!r} is neither epoch milliseconds, an ISO string nor a datetime")


def key_text(v: Any) -> str:
    """A key as text, the same in every runtime: strings as they are, numbers in ECMAScript form, true,
    false, null, anything else as its canonical JSON."""
    if isinstance(v, str):
        return v
    if v is None or isinstance(v, bool):
        return canonical_json(v)
    if isinstance(v, (int, float, Decimal)):
        return js_number(v)
    return canonical_json(v)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def _add(a: Any, b: Any) -> Any:
    # Values read back from the broker are Decimal where they have a fraction; a float cannot be added
    # to one, so the pair goes to float only when one side already is.
    if isinstance(a, float) and isinstance(b, Decimal):
        return a + float(b)
    if isinstance(a, Decimal) and isinstance(b, float):
        return float(a) + b
    return a + b


def _div(a: Any, b: Any) -> Any:
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return (a if isinstance(a, Decimal) else Decimal(str(a))) / (b if isinstance(b, Decimal) else Decimal(str(b)))
    if isinstance(a, int) and isinstance(b, int) and a % b == 0:
        return a // b
    return a / b


# ---- operators ----------------------------------------------------------------------------------------------

class _Op:
    kind = ""

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind}


class _Map(_Op):
    kind = "map"

    def __init__(self, fn: Fn) -> None:
        self.fn, self.ctx = fn, _takes_ctx(fn)

    def apply(self, value: Any, ctx: dict[str, Any]) -> list[Any]:
        return [self.fn(value, ctx) if self.ctx else self.fn(value)]


class _Filter(_Map):
    kind = "filter"

    def apply(self, value: Any, ctx: dict[str, Any]) -> list[Any]:
        return [value] if (self.fn(value, ctx) if self.ctx else self.fn(value)) else []


class _FlatMap(_Map):
    kind = "flatMap"

    def apply(self, value: Any, ctx: dict[str, Any]) -> list[Any]:
        out = self.fn(value, ctx) if self.ctx else self.fn(value)
        return list(out or [])


class _KeyBy(_Op):
    kind = "keyBy"

    def __init__(self, fn: Fn) -> None:
        self.fn = fn


class _Reduce(_Op):
    kind = "reduce"

    def __init__(self, fn: Fn, initial: Any) -> None:
        self.fn, self.initial = fn, initial

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "hasInitial": self.initial is not None}

    def start(self) -> Any:
        return copy.deepcopy(self.initial)

    def step(self, acc: Any, value: Any) -> Any:
        return self.fn(acc, value)

    def result(self, acc: Any) -> Any:
        return acc


class _Aggregate(_Reduce):
    kind = "aggregate"

    def __init__(self, extractors: Mapping[str, Fn]) -> None:
        if not extractors:
            raise ValueError("aggregate needs at least one field")
        for name, fn in extractors.items():
            if not callable(fn):
                raise TypeError(f"aggregate field {name} must be callable")
        self.fields = dict(extractors)
        init: dict[str, Any] = {}
        for name in self.fields:
            if name in ("min", "max"):
                init[name] = None
            elif name == "avg":
                init.update({"__avg_sum": 0, "__avg_count": 0, "avg": 0})
            else:
                init[name] = 0
        super().__init__(self._fold, init)

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "fields": list(self.fields)}

    def _fold(self, acc: Any, value: Any) -> Any:
        nxt = dict(acc) if isinstance(acc, dict) else self.start()
        for name, ex in self.fields.items():
            v = ex(value)
            if name == "count":
                nxt["count"] = _add(nxt.get("count", 0), v if _num(v) else 1)
            elif name in ("min", "max"):
                if _num(v):
                    cur = nxt.get(name)
                    nxt[name] = v if cur is None else (min(cur, v) if name == "min" else max(cur, v))
            elif name == "avg":
                if _num(v):
                    nxt["__avg_sum"] = _add(nxt.get("__avg_sum", 0), v)
                    nxt["__avg_count"] = nxt.get("__avg_count", 0) + 1
                    nxt["avg"] = _div(nxt["__avg_sum"], nxt["__avg_count"])
            else:
                nxt[name] = _add(nxt.get(name, 0), v if _num(v) else 0)
        return nxt

    def result(self, acc: Any) -> Any:
        # The running sums behind avg are state, not output.
        if isinstance(acc, dict):
            return {k: v for k, v in acc.items() if not k.startswith("__")}
        return acc


class _Window(_Op):
    kind = "window"
    name = ""
    short = ""

    def __init__(self, grace_period: float, event_time: Optional[Fn], allowed_lateness: float) -> None:
        if grace_period < 0 or allowed_lateness < 0:
            raise ValueError("grace_period and allowed_lateness are seconds >= 0")
        self.grace_period, self.allowed_lateness = grace_period, allowed_lateness
        self.grace_ms = int(round(float(grace_period) * 1000))
        self.lateness_ms = int(round(float(allowed_lateness) * 1000))
        self.event_time = event_time

    def shape(self) -> dict[str, Any]:
        return {}

    def config(self) -> dict[str, Any]:
        # idleFlushMs is 0: windows close as the partition's time advances, never on a timer.
        return {"kind": "window-" + self.name, **self.shape(), "gracePeriod": self.grace_period,
                "idleFlushMs": 0, "eventTime": self.event_time is not None,
                "allowedLateness": self.allowed_lateness, "onLate": "drop"}

    def time_of(self, value: Any, msg: Message) -> int:
        if self.event_time is not None:
            return _parse_time(self.event_time(value))
        return _parse_time(msg.raw.get("createdAt"))

    @property
    def tag(self) -> str:
        """The prefix of this window's state keys: its short name and shape (tumb:60, slide:60:10)."""
        return self.short + ":" + ":".join(key_text(v) for v in self.shape().values())


class _Fixed(_Window):
    """Tumbling and sliding: windows that do not depend on the other events."""

    def __init__(self, size: float, slide: float, grace_period: float, event_time: Optional[Fn],
                 allowed_lateness: float, offset_ms: int = 0) -> None:
        super().__init__(grace_period, event_time, allowed_lateness)
        if not _num(size) or size <= 0 or not _num(slide) or slide <= 0:
            raise ValueError("window sizes are seconds > 0")
        self.size_ms = int(round(float(size) * 1000))
        self.slide_ms = int(round(float(slide) * 1000))
        self.offset_ms = offset_ms  # window starts are offset_ms plus a multiple of the slide
        if self.slide_ms < 1:
            raise ValueError("a window's size and slide are 1 ms at least")
        if self.size_ms % self.slide_ms:
            raise ValueError("a sliding window's size must be a whole multiple of its slide")

    def assign(self, ts: int) -> list[tuple[int, int]]:
        last = ((ts - self.offset_ms) // self.slide_ms) * self.slide_ms + self.offset_ms
        return [(s, s + self.size_ms) for s in range(last - self.size_ms + self.slide_ms, last + 1, self.slide_ms)]


class _Tumbling(_Fixed):
    name, short = "tumbling", "tumb"

    def __init__(self, seconds: float, grace_period: float, event_time: Optional[Fn],
                 allowed_lateness: float) -> None:
        super().__init__(seconds, seconds, grace_period, event_time, allowed_lateness)
        self.seconds = seconds

    def shape(self) -> dict[str, Any]:
        return {"seconds": self.seconds}


class _Sliding(_Fixed):
    name, short = "sliding", "slide"

    def __init__(self, size: float, slide: float, grace_period: float, event_time: Optional[Fn],
                 allowed_lateness: float) -> None:
        super().__init__(size, slide, grace_period, event_time, allowed_lateness)
        self.size, self.slide = size, slide

    def shape(self) -> dict[str, Any]:
        return {"size": self.size, "slide": self.slide}


_EVERY = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}


class _Cron(_Fixed):
    name, short = "cron", "cron"

    def __init__(self, every: str, grace_period: float, event_time: Optional[Fn], allowed_lateness: float) -> None:
        if every not in _EVERY:
            raise ValueError("window_cron: every is second, minute, hour, day or week")
        # Weeks start on Monday 00:00 UTC: 1970-01-01 was a Thursday, 4 days after one.
        super().__init__(_EVERY[every], _EVERY[every], grace_period, event_time, allowed_lateness,
                         4 * 86400 * 1000 if every == "week" else 0)
        self.every = every

    def shape(self) -> dict[str, Any]:
        return {"every": self.every}


class _Session(_Window):
    name, short = "session", "sess"

    def __init__(self, gap: float, grace_period: float, event_time: Optional[Fn], allowed_lateness: float) -> None:
        super().__init__(grace_period, event_time, allowed_lateness)
        if not _num(gap) or gap <= 0:
            raise ValueError("a session's gap is seconds > 0")
        self.gap = gap
        self.gap_ms = int(round(float(gap) * 1000))
        if self.gap_ms < 1:
            raise ValueError("a session's gap is 1 ms at least")

    def shape(self) -> dict[str, Any]:
        return {"gap": self.gap}


@dataclass
class GateContext:
    """What a gate function sees beside the value: its key's state (mutable; kept only when the message is
    allowed), the cycle's wall clock in epoch ms, the key and the source partition."""
    state: dict[str, Any]
    stream_time_ms: int
    key: str
    partition: str
    partition_id: str


class _Gate(_Op):
    kind = "gate"

    def __init__(self, fn: Callable[[Any, GateContext], Any]) -> None:
        self.fn = fn

    def allows(self, value: Any, ctx: GateContext) -> bool:
        out = self.fn(value, ctx)
        if isinstance(out, Mapping):
            out = out.get("allow")
        if not isinstance(out, bool):
            raise TypeError("a gate returns a bool or {'allow': bool}")
        return out


class _Sink(_Op):
    kind = "sink"

    def __init__(self, queue: str, partition: Union[None, str, Fn]) -> None:
        if not queue:
            raise ValueError("to() needs a queue name")
        self.queue, self.partition = queue, partition

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "queue": self.queue}

    def item(self, value: Any, source_partition: str) -> dict[str, Any]:
        p = self.partition
        part = str(p(value)) if callable(p) else (p if p is not None else source_partition)
        return {"queue": self.queue, "partition": part, "payload": value}


class _Foreach(_Op):
    kind = "foreach"

    def __init__(self, fn: Fn) -> None:
        self.fn, self.ctx = fn, _takes_ctx(fn)


def token_bucket_gate(capacity: float, refill_per_sec: float,
                      cost: Callable[[Any], Any] = lambda _v: 1) -> Callable[[Any, GateContext], bool]:
    """A gate function: a token bucket per key, ``capacity`` tokens refilled at ``refill_per_sec`` by the
    cycle's clock; a message costing more than the tokens left is denied (and so are the ones after it)."""
    if not _num(capacity) or capacity <= 0 or not _num(refill_per_sec) or refill_per_sec <= 0:
        raise ValueError("token_bucket_gate: capacity and refill_per_sec are numbers > 0")

    def gate(value: Any, ctx: GateContext) -> bool:
        s, now = ctx.state, ctx.stream_time_ms
        tokens = float(s["tokens"]) if _num(s.get("tokens")) else float(capacity)
        last = int(s["lastRefillAt"]) if _num(s.get("lastRefillAt")) else now
        tokens = min(float(capacity), tokens + max(0, now - last) / 1000.0 * float(refill_per_sec))
        s["lastRefillAt"] = now
        c = cost(value)
        c = float(c) if _num(c) and float(c) >= 0 else 1.0
        if tokens < c:
            s["tokens"] = tokens
            return False
        s["tokens"] = tokens - c
        return True

    return gate


# ---- the builder --------------------------------------------------------------------------------------------

class Stream:
    """An immutable pipeline: each method returns a new Stream with one operator more."""

    def __init__(self, source: str, operators: tuple[_Op, ...] = ()) -> None:
        if not source:
            raise ValueError("a stream needs a source queue")
        self.source = source
        self.operators = operators

    @classmethod
    def from_(cls, queue: str) -> "Stream":
        """The stream of the messages of ``queue`` (``from`` is a Python keyword)."""
        return cls(queue)

    def _with(self, op: _Op) -> "Stream":
        return Stream(self.source, self.operators + (op,))

    def map(self, fn: Fn) -> "Stream":
        """Each value becomes fn(value[, ctx])."""
        return self._with(_Map(fn))

    def filter(self, fn: Fn) -> "Stream":
        """Only the values for which fn(value[, ctx]) is true go on."""
        return self._with(_Filter(fn))

    def flat_map(self, fn: Fn) -> "Stream":
        """Each value becomes the values of the list fn(value[, ctx]) (none, one or many)."""
        return self._with(_FlatMap(fn))

    def key_by(self, fn: Fn) -> "Stream":
        """The key of each value is the text of fn(value) (default: the source partition's name)."""
        return self._with(_KeyBy(fn))

    def window_tumbling(self, seconds: float, *, grace_period: float = 0, event_time: Optional[Fn] = None,
                        allowed_lateness: float = 0) -> "Stream":
        """Consecutive windows of ``seconds``, per key."""
        return self._with(_Tumbling(seconds, grace_period, event_time, allowed_lateness))

    def window_sliding(self, size: float, slide: float, *, grace_period: float = 0,
                       event_time: Optional[Fn] = None, allowed_lateness: float = 0) -> "Stream":
        """Windows of ``size`` seconds starting every ``slide`` seconds, per key."""
        return self._with(_Sliding(size, slide, grace_period, event_time, allowed_lateness))

    def window_cron(self, every: str, *, grace_period: float = 0, event_time: Optional[Fn] = None,
                    allowed_lateness: float = 0) -> "Stream":
        """Windows of one calendar unit, UTC: ``every`` is second, minute, hour, day or week (from Monday)."""
        return self._with(_Cron(every, grace_period, event_time, allowed_lateness))

    def window_session(self, gap: float, *, grace_period: float = 0, event_time: Optional[Fn] = None,
                       allowed_lateness: float = 0) -> "Stream":
        """Per key, a window that lasts while events come less than ``gap`` seconds apart."""
        return self._with(_Session(gap, grace_period, event_time, allowed_lateness))

    def reduce(self, fn: Fn, initial: Any = None) -> "Stream":
        """Fold values per key (per window after a window): acc = fn(acc, value)."""
        return self._with(_Reduce(fn, initial))

    def aggregate(self, fields: Mapping[str, Fn]) -> "Stream":
        """A reduce into named fields: count, sum, min, max, avg, or any other name (summed)."""
        return self._with(_Aggregate(fields))

    def gate(self, fn: Callable[[Any, GateContext], Any]) -> "Stream":
        """Per message in order: allowed (True) goes on; the first denied one stops the batch there."""
        return self._with(_Gate(fn))

    def to(self, queue: str, *, partition: Union[None, str, Fn] = None) -> "Stream":
        """Push each value to ``queue`` (partition: the source's, a name, or fn(value)), in the cycle."""
        return self._with(_Sink(queue, partition))

    def foreach(self, fn: Fn) -> "Stream":
        """Call fn(value[, ctx]) for each value before the cycle commits (at least once)."""
        return self._with(_Foreach(fn))

    def config_hash(self) -> str:
        return config_hash(self.operators)

    def worker(self, client: Queen, name: str, **options: Any) -> "StreamWorker":
        """A worker running this pipeline as the query ``name`` (StreamWorker's options)."""
        return StreamWorker(self, client, name, **options)

    def async_worker(self, client: AsyncQueen, name: str, **options: Any) -> "AsyncStreamWorker":
        """The asyncio twin of worker()."""
        return AsyncStreamWorker(self, client, name, **options)


@dataclass
class _Plan:
    pre: list[Union[_Map, _KeyBy]] = field(default_factory=list)  # in chain order, key_by among them
    key_by: Optional[_KeyBy] = None
    window: Optional[_Window] = None
    reducer: Optional[_Reduce] = None
    gate: Optional[_Gate] = None
    post: list[_Map] = field(default_factory=list)
    sink: Optional[_Sink] = None
    foreach: Optional[_Foreach] = None


def _compile(ops: tuple[_Op, ...]) -> _Plan:
    p = _Plan()
    for i, op in enumerate(ops):
        if isinstance(op, (_Sink, _Foreach)):
            if i != len(ops) - 1:
                raise ValueError(f"{op.kind} must end the stream")
            if isinstance(op, _Sink):
                p.sink = op
            else:
                p.foreach = op
        elif isinstance(op, _Map):
            if p.window is not None and p.reducer is None:
                raise ValueError(f"{op.kind} between a window and its reduce: put it before the window")
            if p.reducer is not None or p.gate is not None:
                p.post.append(op)
            else:
                p.pre.append(op)
        elif isinstance(op, _KeyBy):
            if p.key_by is not None or p.window or p.reducer or p.gate:
                raise ValueError("one key_by, before any window, reduce or gate")
            p.key_by = op
            p.pre.append(op)
        elif isinstance(op, _Window):
            if p.window is not None or p.reducer or p.gate:
                raise ValueError("one window, before its reduce and without a gate")
            p.window = op
        elif isinstance(op, _Reduce):
            if p.reducer is not None or p.gate:
                raise ValueError("one reduce or aggregate, without a gate")
            p.reducer = op
        elif isinstance(op, _Gate):
            if p.gate is not None or p.window or p.reducer:
                raise ValueError("one gate, without window or reduce")
            p.gate = op
    if p.window is not None and p.reducer is None:
        raise ValueError("a window needs a reduce or aggregate after it")
    return p


# ---- the shard: one partition's state, read once per cycle, written as ops ------------------------------------

class _Shard:
    def __init__(self, rows: dict[str, Any]) -> None:
        self.loaded = rows
        self.live = dict(rows)
        self.touched: dict[str, None] = {}

    def get(self, key: str) -> Any:
        return self.live.get(key)

    def put(self, key: str, value: Any) -> None:
        self.live[key] = value
        self.touched[key] = None

    def delete(self, key: str) -> None:
        self.live.pop(key, None)
        self.touched[key] = None

    def ops(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for k in self.touched:
            if k in self.live:
                out.append({"type": "upsert", "key": k, "value": self.live[k]})
            elif k in self.loaded:
                out.append({"type": "delete", "key": k})
        return out


@dataclass
class _Emit:
    key: str
    value: Any
    ctx: dict[str, Any]


@dataclass
class StreamStats:
    cycles: int = 0
    messages: int = 0
    pushed: int = 0
    state_ops: int = 0
    late: int = 0
    denied: int = 0
    lease_lost: int = 0
    errors: int = 0


class _Worker:
    """What the blocking and the asyncio worker share: the options, the registration body, and one batch
    turned into its cycle's body (no I/O here)."""

    def __init__(self, stream: Stream, name: str, *, batch: int = 100, group: Optional[str] = None,
                 lease_seconds: Optional[int] = None, wait: float = 1.0, reset: bool = False,
                 tenant: Optional[str] = None, clock: Callable[[], float] = time.time) -> None:
        self.stream, self.name = stream, name
        self.plan = _compile(stream.operators)
        self.hash = stream.config_hash()
        self.batch, self.lease_seconds, self.wait, self.reset = batch, lease_seconds, wait, reset
        self.group = group or f"streams.{name}"
        self.tenant = tenant
        self.clock = clock
        self.query_id: Optional[str] = None
        #: source partition name -> id, for each partition this worker has run a cycle on
        self.partitions: dict[str, str] = {}
        self.stats = StreamStats()

    def _register_body(self) -> dict[str, Any]:
        return {"name": self.name, "source_queue": self.stream.source,
                "sink_queue": self.plan.sink.queue if self.plan.sink else None,
                "config_hash": self.hash, "reset": self.reset}

    def _pop_args(self) -> dict[str, Any]:
        return {"group": self.group, "batch": self.batch, "wait": self.wait > 0, "timeout": self.wait,
                "lease_seconds": self.lease_seconds, "tenant": self.tenant}

    def _stateful(self) -> bool:
        return self.plan.reducer is not None or self.plan.gate is not None

    def _state_query(self, pid: str) -> dict[str, Any]:
        assert self.query_id is not None
        return {"query_id": self.query_id, "partition_id": pid}

    @staticmethod
    def _rows(answer: dict[str, Any]) -> dict[str, Any]:
        return {row["key"]: row["value"] for row in answer.get("rows", [])}

    def _compute(self, msgs: list[Message], pid: str, pname: str, lease: Optional[str],
                 rows: dict[str, Any]) -> Optional[dict[str, Any]]:
        """The cycle of one batch given its partition's state; None when nothing is to be committed."""
        self.partitions[pname] = pid
        plan = self.plan
        shard = _Shard(rows)
        base_ctx = {"partition": pname, "partitionId": pid}

        # Each message becomes zero or more (index of the source message, key, value) envelopes, through
        # the operators before the stateful stage in chain order.
        envs: list[tuple[int, str, Any]] = [(i, pname, m.data) for i, m in enumerate(msgs)]
        for op in plan.pre:
            if isinstance(op, _KeyBy):
                envs = [(i, key_text(op.fn(v)), v) for i, _, v in envs]
            else:
                envs = [(i, k, o) for i, k, v in envs for o in op.apply(v, {**base_ctx, "key": k})]

        allowed = len(msgs)
        if plan.gate is not None:
            emits, allowed = self._gate(plan.gate, envs, msgs, shard, pid, pname)
        elif plan.window is not None:
            assert plan.reducer is not None
            emits = self._window(plan.window, plan.reducer, envs, msgs, shard, base_ctx)
        elif plan.reducer is not None:
            emits = self._running(plan.reducer, envs, shard, base_ctx)
        else:
            emits = [_Emit(k, v, {**base_ctx, "key": k}) for _, k, v in envs]

        for op in plan.post:
            emits = [_Emit(e.key, o, e.ctx) for e in emits for o in op.apply(e.value, e.ctx)]

        if allowed == 0:
            # The first message was denied: nothing to commit; the batch stays leased until its lease
            # ends and comes back in order.
            self.stats.denied += len(msgs)
            return None
        if plan.foreach is not None:
            fe = plan.foreach
            for e in emits:
                fe.fn(e.value, e.ctx) if fe.ctx else fe.fn(e.value)
        last = msgs[allowed - 1]
        return {
            "query_id": self.query_id, "partition_id": pid, "consumer_group": self.group,
            "state_ops": shard.ops(),
            "push_items": [plan.sink.item(e.value, pname) for e in emits] if plan.sink else [],
            "ack": {"transactionId": last.transaction_id, "leaseId": lease, "status": "completed",
                    "count": allowed},
            # A gate's denied tail stays leased to this worker (not re-popped at once, in a busy loop);
            # a whole batch ends its lease with the ack anyway.
            "release_lease": allowed == len(msgs),
        }

    def _committed(self, body: dict[str, Any], popped: int) -> None:
        self.stats.cycles += 1
        self.stats.messages += body["ack"]["count"]
        self.stats.denied += popped - body["ack"]["count"]
        self.stats.pushed += len(body["push_items"])
        self.stats.state_ops += len(body["state_ops"])

    def _refused(self, e: Conflict) -> None:
        if e.reason != "streams_lease_lost":
            raise e
        # Another worker has the batch now (or this cycle committed and its answer was lost): the work is
        # dropped, nothing of it was written; the next pop starts from the committed cursor.
        self.stats.lease_lost += 1

    # ---- the stateful stages -----------------------------------------------------------------------------

    def _running(self, red: _Reduce, envs: list[tuple[int, str, Any]], shard: _Shard,
                 base_ctx: dict[str, Any]) -> list[_Emit]:
        out: list[_Emit] = []
        for _, key, v in envs:
            sk = f"{red.kind}{SEP}{key}"
            row = shard.get(sk)
            acc = red.step(row["acc"] if isinstance(row, dict) else red.start(), v)
            shard.put(sk, {"acc": acc})
            out.append(_Emit(key, red.result(acc), {**base_ctx, "key": key}))
        return out

    def _window(self, win: _Window, red: _Reduce, envs: list[tuple[int, str, Any]], msgs: list[Message],
                shard: _Shard, base_ctx: dict[str, Any]) -> list[_Emit]:
        out: list[_Emit] = []
        wm_row = shard.get(WATERMARK_KEY)
        wm: Optional[int] = int(wm_row["eventTimeMs"]) if isinstance(wm_row, dict) else None
        prefix = win.tag + SEP
        for i, key, v in envs:
            ts = win.time_of(v, msgs[i])
            if isinstance(win, _Session):
                if not self._session_add(win, red, shard, key, v, ts, wm, out, base_ctx):
                    self.stats.late += 1
            else:
                assert isinstance(win, _Fixed)
                for s, e in win.assign(ts):
                    if wm is not None and e + win.grace_ms <= wm:
                        self.stats.late += 1  # its window has closed already
                        continue
                    sk = f"{win.tag}{SEP}{iso_ms(s)}{SEP}{key}"
                    row = shard.get(sk)
                    acc = red.step(row["acc"] if isinstance(row, dict) else red.start(), v)
                    shard.put(sk, {"acc": acc, "windowStart": s, "windowEnd": e})
            mark = ts - win.lateness_ms
            if wm is None or mark > wm:
                wm = mark
                shard.put(WATERMARK_KEY, {"eventTimeMs": wm})
                out.extend(self._close(win, red, shard, prefix, wm, base_ctx))
        return out

    def _close(self, win: _Window, red: _Reduce, shard: _Shard, prefix: str, wm: int,
               base_ctx: dict[str, Any]) -> list[_Emit]:
        ripe = []
        for sk, row in shard.live.items():
            if not sk.startswith(prefix) or not isinstance(row, dict):
                continue
            if isinstance(win, _Session):
                end = int(row["lastEventTime"]) + win.gap_ms
            else:
                end = int(row["windowEnd"])
            if end + win.grace_ms <= wm:
                start = int(row["windowStart"] if "windowStart" in row else row["sessionStart"])
                ripe.append((start, sk.rsplit(SEP, 1)[1], sk, row, end))
        ripe.sort(key=lambda r: (r[0], r[1]))
        out = []
        for start, key, sk, row, end in ripe:
            shard.delete(sk)
            out.append(_Emit(key, red.result(row["acc"]), {**base_ctx, "key": key, "windowStart": start,
                                                             "windowEnd": end, "windowKey": iso_ms(start)}))
        return out

    def _session_add(self, win: _Session, red: _Reduce, shard: _Shard, key: str, v: Any, ts: int,
                     wm: Optional[int], out: list[_Emit], base_ctx: dict[str, Any]) -> bool:
        sk = f"{win.tag}{SEP}open{SEP}{key}"
        row = shard.get(sk)
        if isinstance(row, dict) and ts > int(row["lastEventTime"]) + win.gap_ms:
            # The gap has passed: that session ends, this event starts the next.
            start, end = int(row["sessionStart"]), int(row["lastEventTime"]) + win.gap_ms
            out.append(_Emit(key, red.result(row["acc"]), {**base_ctx, "key": key, "windowStart": start,
                                                             "windowEnd": end, "windowKey": iso_ms(start)}))
            shard.delete(sk)
            row = None
        if not isinstance(row, dict):
            if wm is not None and ts + win.gap_ms + win.grace_ms <= wm:
                return False  # a session of this event alone would have closed already
            row = {"acc": red.start(), "sessionStart": ts, "lastEventTime": ts}
        acc = red.step(row["acc"], v)
        shard.put(sk, {"acc": acc, "sessionStart": min(int(row["sessionStart"]), ts),
                       "lastEventTime": max(int(row["lastEventTime"]), ts)})
        return True

    def _gate(self, gate: _Gate, envs: list[tuple[int, str, Any]], msgs: list[Message], shard: _Shard,
              pid: str, pname: str) -> tuple[list[_Emit], int]:
        now = int(self.clock() * 1000)
        out: list[_Emit] = []
        i = 0
        while i < len(envs):
            # One source message's values pass together or not at all: the ack is per message.
            idx = envs[i][0]
            group = [e for e in envs[i:] if e[0] == idx]
            staged: dict[str, Any] = {}
            for _, key, v in group:
                sk = f"gate{SEP}{key}"
                st = copy.deepcopy(staged[sk] if sk in staged else (shard.get(sk) or {}))
                if not gate.allows(v, GateContext(st, now, key, pname, pid)):
                    # Denied: its state changes go with it; the messages before it pass.
                    return out, idx
                staged[sk] = st
            for sk, st in staged.items():
                shard.put(sk, st)
            out.extend(_Emit(k, v, {"partition": pname, "partitionId": pid, "key": k}) for _, k, v in group)
            i += len(group)
        return out, len(msgs)


class StreamWorker(_Worker):
    """Runs a Stream as the query ``name``: pop a batch from one source partition (``batch`` messages,
    consumer group ``group``, default ``streams.<name>``), run it, commit one cycle; repeat.

    ``lease_seconds``: the source lease (a gate's denied tail waits that long); ``wait``: a pop's long
    poll in seconds; ``reset``: consent to deleting the state of a query registered with another
    pipeline (otherwise that registration is refused, 409 streams_config_mismatch); ``clock``: the
    gate's clock (seconds)."""

    def __init__(self, stream: Stream, client: Queen, name: str, **options: Any) -> None:
        super().__init__(stream, name, **options)
        self.client = client
        self._stop = threading.Event()

    def register(self) -> dict[str, Any]:
        """Register (or resume) the query; the first step does it when not done."""
        r = self.client.streams.register(self._register_body(), tenant=self.tenant)
        self.query_id = str(r["query_id"])
        return r

    def stop(self) -> None:
        """Ask run() to return after the cycle in flight."""
        self._stop.set()

    def run(self) -> StreamStats:
        """Cycle until stop(); an error is logged and the batch left to its lease (it is popped again)."""
        while not self._stop.is_set():
            try:
                self.step()
            except QueenError as e:
                self.stats.errors += 1
                log.warning("stream %s: %s", self.name, e)
                self._stop.wait(0.5)
        return self.stats

    def drain(self, max_cycles: int = 100000) -> StreamStats:
        """Cycle until a pop finds nothing (tests, batch jobs)."""
        for _ in range(max_cycles):
            if self.step() == 0:
                break
        return self.stats

    def state(self, partition: str) -> dict[str, Any]:
        """The committed state of a source partition (by name) this worker has seen: {key: value}."""
        return self._read_state(self.partitions[partition])

    def _read_state(self, pid: str) -> dict[str, Any]:
        return self._rows(self.client.streams.state_get(self._state_query(pid), tenant=self.tenant))

    def step(self) -> int:
        """Pop one batch and commit its cycle. Returns the messages popped (0: none came)."""
        if self.query_id is None:
            self.register()
        res = self.client.pop(self.stream.source, **self._pop_args())
        if res is None or not res.messages:
            return 0
        msgs = res.messages
        pid = res.partition_id or msgs[0].partition_id
        rows = self._read_state(pid) if self._stateful() else {}
        body = self._compute(msgs, pid, msgs[0].partition or "", res.lease_id or msgs[0].lease_id, rows)
        if body is not None:
            try:
                self.client.streams.cycle(body, tenant=self.tenant)
            except Conflict as e:
                self._refused(e)
            else:
                self._committed(body, len(msgs))
        return len(msgs)


class AsyncStreamWorker(_Worker):
    """StreamWorker's asyncio twin on an AsyncQueen: the same options, the same cycle, awaited. User
    functions stay plain functions (called in the event loop's thread: keep them short)."""

    def __init__(self, stream: Stream, client: AsyncQueen, name: str, **options: Any) -> None:
        super().__init__(stream, name, **options)
        self.client = client
        self._stopping = False

    async def register(self) -> dict[str, Any]:
        r = await self.client.streams.register(self._register_body(), tenant=self.tenant)
        self.query_id = str(r["query_id"])
        return r

    def stop(self) -> None:
        self._stopping = True

    async def run(self) -> StreamStats:
        while not self._stopping:
            try:
                await self.step()
            except QueenError as e:
                self.stats.errors += 1
                log.warning("stream %s: %s", self.name, e)
                await asyncio.sleep(0.5)
        return self.stats

    async def drain(self, max_cycles: int = 100000) -> StreamStats:
        for _ in range(max_cycles):
            if await self.step() == 0:
                break
        return self.stats

    async def state(self, partition: str) -> dict[str, Any]:
        return await self._read_state(self.partitions[partition])

    async def _read_state(self, pid: str) -> dict[str, Any]:
        return self._rows(await self.client.streams.state_get(self._state_query(pid), tenant=self.tenant))

    async def step(self) -> int:
        if self.query_id is None:
            await self.register()
        res = await self.client.pop(self.stream.source, **self._pop_args())
        if res is None or not res.messages:
            return 0
        msgs = res.messages
        pid = res.partition_id or msgs[0].partition_id
        rows = await self._read_state(pid) if self._stateful() else {}
        body = self._compute(msgs, pid, msgs[0].partition or "", res.lease_id or msgs[0].lease_id, rows)
        if body is not None:
            try:
                await self.client.streams.cycle(body, tenant=self.tenant)
            except Conflict as e:
                self._refused(e)
            else:
                self._committed(body, len(msgs))
        return len(msgs)
