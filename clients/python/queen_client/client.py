"""The blocking client: http.client with keep-alive connections, safe to share between threads."""
from __future__ import annotations

import copy
import dataclasses
import http.client
import signal
import socket
import ssl
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Union, overload
from urllib.parse import urlsplit

from . import _core
from ._core import AckLike, Call, Failed, Ttl
from .errors import QueenError, QueenRefused
from .results import (AckResult, ConfigureResult, ConsumeStats, GetManyResult, GetResult, LeaseResult, Message,
                      PopResult, PrefixPage, PushResult, QueueOptions, Row, TxResult, WriteResult)

__all__ = ["Queen", "StreamsCalls", "Kv", "Batch", "Tx", "QueueHandle", "PrefixScan"]

_KEEP_IDLE = 16  # idle connections kept per URL


class Queen:
    """A client of one or more Queen brokers.

    ``urls``: a base URL or several, tried in order for failover (the client sends to the last one that
    answered). ``token``: a bearer token. ``max_attempts`` per call, the first included; waits between
    attempts are a jittered exponential backoff from ``backoff`` seconds, or the answer's Retry-After when
    longer, capped by ``max_backoff``. ``timeout``: one attempt's whole time in seconds (a long poll adds its
    wait). Calls are retried only where a repeat is safe (clients/conformance/README.md, "Retry rules").
    """

    def __init__(self, urls: Union[str, Iterable[str], None] = None, *, token: Optional[str] = None,
                 max_attempts: int = 3, backoff: float = 0.05, max_backoff: float = 5.0, timeout: float = 30.0,
                 connect_timeout: float = 3.0,
                 on_retry: Optional[Callable[[int, QueenError, float], None]] = None) -> None:
        self._opts = _core.make_options(urls, token, max_attempts, backoff, max_backoff, timeout, connect_timeout,
                                        on_retry)
        self._current = 0
        self._lock = threading.Lock()
        self._idle: dict[int, list[http.client.HTTPConnection]] = {}
        #: attempts made beyond the first, by every call so far
        self.retries = 0
        self.kv = Kv(self)
        self.streams = StreamsCalls(self)

    # ---- lifecycle -------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the idle connections."""
        with self._lock:
            conns = [c for lst in self._idle.values() for c in lst]
            self._idle.clear()
        for c in conns:
            c.close()

    def __enter__(self) -> "Queen":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- transport -------------------------------------------------------------------------------------

    def _take(self, i: int) -> Optional[http.client.HTTPConnection]:
        with self._lock:
            lst = self._idle.get(i)
            return lst.pop() if lst else None

    def _give(self, i: int, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            lst = self._idle.setdefault(i, [])
            if len(lst) < _KEEP_IDLE:
                lst.append(conn)
                return
        conn.close()

    def _new_conn(self, base: str) -> http.client.HTTPConnection:
        u = urlsplit(base)
        if u.scheme == "https":
            return http.client.HTTPSConnection(u.hostname or "", u.port, timeout=self._opts.connect_timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(u.hostname or "", u.port, timeout=self._opts.connect_timeout)

    def _attempt(self, i: int, call: Call[Any], timeout: float) -> tuple[int, Optional[str], bytes]:
        base = self._opts.urls[i]
        path, body, hdrs = _core.request(self._opts, base, call)
        conn = self._take(i)
        reused = conn is not None
        while True:
            if conn is None:
                conn = self._new_conn(base)
                try:
                    conn.connect()
                except OSError as e:  # refused, unreachable, DNS, connect timeout: nothing was sent
                    conn.close()
                    raise Failed("unreachable", f"{base}: {e}") from None
            assert conn.sock is not None
            conn.sock.settimeout(timeout)
            try:
                conn.request(call.method, path, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read()
            except TimeoutError:
                conn.close()
                raise Failed("timeout", f"{base}: no whole answer within {timeout:g} s") from None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                conn.close()
                if reused:
                    # A kept-alive connection the broker had closed while idle: it read nothing of this
                    # request, so it goes once more on a fresh connection (not a retry).
                    conn, reused = None, False
                    continue
                raise Failed("transport", f"{base}: {e!r}") from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise Failed("transport", f"{base}: {e!r}") from None
            if resp.will_close:
                conn.close()
            else:
                self._give(i, conn)
            return resp.status, resp.getheader("Retry-After"), data

    def _run(self, call: Call[_core.T]) -> _core.T:
        run = _core.Attempts(self._opts, self._current, call)
        while True:
            if run.begin():
                with self._lock:
                    self.retries += 1
            try:
                status, retry_after, data = self._attempt(run.index, call, run.timeout)
            except Failed as f:
                wait = run.failed(f)
            else:
                self._current = run.index
                if 200 <= status < 300:
                    return run.value(status, data)
                wait = run.refused(status, data, retry_after)
            time.sleep(wait)

    # ---- calls -----------------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """GET /health: ``{"status": "healthy", "version": ...}``."""
        return self._run(_core.health())

    def push(self, items: Iterable[Mapping[str, Any]], *, tenant: Optional[str] = None) -> list[PushResult]:
        """Push wire items (``queue``, ``payload``, ``partition``?, ``transactionId``?), one result each."""
        return self._run(_core.push([dict(i) for i in items], tenant))

    def pop(self, queue: str, *, partition: Optional[str] = None, group: Optional[str] = None,
            batch: Optional[int] = None, wait: bool = False, timeout: Optional[float] = None,
            lease_seconds: Optional[int] = None, auto_ack: bool = False,
            tenant: Optional[str] = None) -> Optional[PopResult]:
        """Lease up to ``batch`` messages; None when there is none. With ``wait``, a long poll of up to
        ``timeout`` seconds (default 30)."""
        return self._run(_core.pop(queue, partition, group, batch, wait, timeout, lease_seconds, auto_ack, tenant))

    @overload
    def ack(self, acks: AckLike, *, status: Optional[str] = None, error: Optional[str] = None,
            group: Optional[str] = None, tenant: Optional[str] = None) -> AckResult: ...

    @overload
    def ack(self, acks: Iterable[AckLike], *, status: Optional[str] = None, error: Optional[str] = None,
            group: Optional[str] = None, tenant: Optional[str] = None) -> list[AckResult]: ...

    def ack(self, acks: Union[AckLike, Iterable[AckLike]], *, status: Optional[str] = None,
            error: Optional[str] = None, group: Optional[str] = None,
            tenant: Optional[str] = None) -> Union[AckResult, list[AckResult]]:
        """Settle messages (Message objects or wire acks); ``status="failed"`` releases them for redelivery.
        One message gives one AckResult; a list gives a list."""
        results = self._run(_core.ack(_core.ack_items(acks, status, error), group, tenant))
        return results[0] if _core.is_one_ack(acks) else results

    def lease_extend(self, lease: Union[str, Message], seconds: int, *,
                     tenant: Optional[str] = None) -> LeaseResult:
        """Extend a lease (by id, or a message's) to ``seconds`` from now."""
        lease_id = (lease.lease_id or "") if isinstance(lease, Message) else lease
        return self._run(_core.lease_extend(lease_id, seconds, tenant))

    def configure(self, queue: str, options: Optional[QueueOptions] = None, *, namespace: Optional[str] = None,
                  task: Optional[str] = None, tenant: Optional[str] = None) -> ConfigureResult:
        """Create or configure a queue (``options`` as the wire names them: ``leaseTime``, ``retryLimit``, ...)."""
        return self._run(_core.configure(queue, options, namespace, task, tenant))

    def queues(self, *, tenant: Optional[str] = None) -> list[Any]:
        """The queues the broker knows."""
        return self._run(_core.queues(tenant)).get("queues", [])

    def queue_delete(self, queue: str, *, tenant: Optional[str] = None) -> dict[str, Any]:
        return self._run(_core.queue_delete(queue, tenant))

    def with_timeout(self, seconds: float) -> "Queen":
        """This client, its connections and options shared, with one attempt's time set to ``seconds``:
        ``q.with_timeout(2).kv.get(ns, key)`` bounds that call (each attempt; a long poll adds its wait)."""
        view = copy.copy(self)
        view._opts = dataclasses.replace(self._opts, timeout=float(seconds))
        view.kv = Kv(view)
        view.streams = StreamsCalls(view)
        return view

    def queue(self, name: str, *, partition: Optional[str] = None, tenant: Optional[str] = None) -> "QueueHandle":
        """A handle on one queue (and optionally one partition)."""
        return QueueHandle(self, name, partition, tenant)

    def tx(self, *, tenant: Optional[str] = None) -> "Tx":
        """A transaction builder: ``q.tx().ack(m).push("out", [{"payload": 1}]).kv_put_if_absent(...).commit()``."""
        return Tx(self, tenant)

    def consume(self, queue: str, handler: Callable[[Message, "Tx"], Any], *, concurrency: int = 1,
                group: Optional[str] = None, partition: Optional[str] = None, batch: int = 1,
                lease_seconds: int = 30, poll: float = 1.0, stop: Optional[threading.Event] = None,
                handle_signals: bool = True, tenant: Optional[str] = None) -> ConsumeStats:
        """Pop from ``queue`` on ``concurrency`` threads and call ``handler(message, tx)`` per message.

        The handler adds its effects (kv ops, pushes) to ``tx``, which already holds the message's ack:
        when it returns, one transaction commits the ack and the effects together, so an effect happens
        once. A handler that raises or returns False fails the message (an ack with status failed: the
        broker redelivers it); so does a transaction that rolls back. While a handler runs its lease is
        renewed every third of ``lease_seconds``. Stops cleanly when ``stop`` is set or, on the main
        thread with ``handle_signals``, on SIGINT or SIGTERM: no more pops, in-flight handlers finish and
        settle. Raises the broker's refusal of the pop itself (a 4xx); unavailability is waited out.
        """
        return _Consumer(self, queue, handler, concurrency, group, partition, batch, lease_seconds, poll,
                         stop or threading.Event(), tenant).run(handle_signals)


class _Consumer:
    def __init__(self, c: Queen, queue: str, handler: Callable[[Message, "Tx"], Any], concurrency: int,
                 group: Optional[str], partition: Optional[str], batch: int, lease_seconds: int, poll: float,
                 stop: threading.Event, tenant: Optional[str]) -> None:
        self.c, self.queue, self.handler = c, queue, handler
        self.n = max(1, int(concurrency))
        self.group, self.partition, self.batch = group, partition, max(1, int(batch))
        self.lease_seconds = max(1, int(lease_seconds))
        self.poll, self.stop, self.tenant = poll, stop, tenant
        self.lock = threading.Lock()
        self.held: dict[int, str] = {}
        self.stats = ConsumeStats()
        self.fatal: Optional[QueenError] = None
        self.done = threading.Event()

    def run(self, handle_signals: bool) -> ConsumeStats:
        previous: dict[int, Any] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, lambda *_: self.stop.set())
        try:
            renewer = threading.Thread(target=self._renew, name="queen-renew", daemon=True)
            renewer.start()
            workers = [threading.Thread(target=self._work, args=(k,), name=f"queen-consume-{k}", daemon=True)
                       for k in range(self.n)]
            for w in workers:
                w.start()
            for w in workers:
                while w.is_alive():
                    w.join(0.2)  # short joins: the main thread stays free to run signal handlers
            self.done.set()
            renewer.join()
        finally:
            for signum, h in previous.items():
                signal.signal(signum, h)
        if self.fatal is not None:
            raise self.fatal
        return self.stats

    def _stopping(self) -> bool:
        return self.stop.is_set() or self.fatal is not None

    def _work(self, slot: int) -> None:
        idle = 0.05
        while not self._stopping():
            try:
                popped = self.c.pop(self.queue, partition=self.partition, group=self.group, batch=self.batch,
                                    wait=True, timeout=self.poll, lease_seconds=self.lease_seconds,
                                    tenant=self.tenant)
            except QueenRefused as e:
                if 400 <= e.status < 500 and e.status != 408:
                    with self.lock:
                        self.fatal = self.fatal or e
                    return
                self.stop.wait(idle)
                idle = min(idle * 2, 2.0)
                continue
            except QueenError:
                # Unavailable: pop again later, longer each time, up to 2 s.
                self.stop.wait(idle)
                idle = min(idle * 2, 2.0)
                continue
            idle = 0.05
            # Every message popped is handled, even after a stop: it is leased to us.
            for m in popped.messages if popped is not None else []:
                self._handle(slot, m)

    def _handle(self, slot: int, m: Message) -> None:
        tx = Tx(self.c, self.tenant).ack(m, group=self.group)
        if m.lease_id:
            with self.lock:
                self.held[slot] = m.lease_id
        why = "handler returned False"
        try:
            ok = self.handler(m, tx) is not False
        except Exception as e:  # the handler's failure fails the message, never the loop
            ok, why = False, f"handler raised {e!r}"[:500]
        finally:
            with self.lock:
                self.held.pop(slot, None)
        settled = False
        if ok:
            try:
                settled = tx.commit().success
                why = "the transaction rolled back"
            except QueenError as e:
                why = f"the transaction failed: {e}"[:500]
        with self.lock:
            if settled:
                self.stats.handled += 1
            else:
                self.stats.failed += 1
        if not settled:
            try:
                self.c.ack(m, status="failed", error=why, group=self.group, tenant=self.tenant)
            except QueenError:
                pass  # its lease expires and the broker redelivers it anyway

    def _renew(self) -> None:
        period = max(0.1, self.lease_seconds / 3)
        while not self.done.wait(period):
            with self.lock:
                leases = list(self.held.values())
            for lease in leases:
                try:
                    self.c.lease_extend(lease, self.lease_seconds, tenant=self.tenant)
                except QueenError:
                    pass  # the next period tries again; a lost lease shows at commit


class Tx(_core.TxBuilder):
    """The transaction builder bound to a client."""

    def __init__(self, client: Queen, tenant: Optional[str] = None) -> None:
        super().__init__(tenant)
        self._client = client

    def commit(self) -> TxResult:
        """Send it. ``success`` False (rolled back) is a result; a refusal raises."""
        return self._client._run(self.call())


class Batch(_core.BatchBuilder):
    """KV ops applied in one transaction: ``q.kv.batch().put(...).incr(...).apply()``."""

    def __init__(self, client: Queen, tenant: Optional[str] = None) -> None:
        super().__init__(tenant)
        self._client = client

    def apply(self) -> list[Any]:
        """One result element per op, in order; a lost ``required`` op raises PreconditionFailed."""
        return self._client._run(self.call())


class PrefixScan(_core.PrefixPages, Iterator[Row]):
    """Every row under a prefix, in key order, page after page until a page is not truncated."""

    def __init__(self, c: Queen, ns: str, prefix: str, page_size: Optional[int], keys_only: bool,
                 tenant: Optional[str]) -> None:
        super().__init__(ns, prefix, page_size, keys_only, tenant)
        self._c = c

    def __iter__(self) -> "PrefixScan":
        return self

    def __next__(self) -> Row:
        while not self._rows:
            if not self._more:
                raise StopIteration
            self.took(self._c._run(self.next_call()))
        return self._rows.pop(0)


class StreamsCalls:
    """The three streams routes as they are on the wire (clients/STREAMS.md); ``queen_client.streams``
    runs pipelines on them. Bodies and answers are the wire's (docs/openapi.yaml, tag streams)."""

    def __init__(self, c: Queen) -> None:
        self._c = c

    def register(self, body: Mapping[str, Any], *, tenant: Optional[str] = None) -> dict[str, Any]:
        """POST /streams/v1/queries: ``{name, source_queue, sink_queue?, config_hash, reset?}``."""
        return self._c._run(_core.streams_register(dict(body), tenant))

    def cycle(self, body: Mapping[str, Any], *, tenant: Optional[str] = None) -> dict[str, Any]:
        """POST /streams/v1/cycle: state ops, sink pushes and the source ack in one transaction."""
        return self._c._run(_core.streams_cycle(dict(body), tenant))

    def state_get(self, body: Mapping[str, Any], *, tenant: Optional[str] = None) -> dict[str, Any]:
        """POST /streams/v1/state/get: ``{query_id, partition_id, keys?, key_prefix?, ripe_at_or_before?}``."""
        return self._c._run(_core.streams_state_get(dict(body), tenant))


class Kv:
    """The KV calls: ``q.kv.get(ns, key)``. Every write needs ``ttl=`` (seconds) or ``forever=True``; the
    client sends what it is given and the broker refuses a write with neither."""

    def __init__(self, c: Queen) -> None:
        self._c = c

    def get(self, ns: str, key: str, *, tenant: Optional[str] = None) -> GetResult:
        return self._c._run(_core.kv_get(ns, key, tenant))

    def get_many(self, ns: str, keys: Iterable[str], *, tenant: Optional[str] = None) -> GetManyResult:
        return self._c._run(_core.kv_get_many(ns, keys, tenant))

    def get_prefix(self, ns: str, prefix: str, *, after: Optional[str] = None, limit: Optional[int] = None,
                   keys_only: bool = False, tenant: Optional[str] = None) -> PrefixPage:
        """One page: ``rows``, ``truncated``, ``next_after`` (``scan`` reads every page)."""
        return self._c._run(_core.kv_get_prefix(ns, prefix, after, limit, keys_only, tenant))

    def scan(self, ns: str, prefix: str, *, page_size: Optional[int] = None, keys_only: bool = False,
             tenant: Optional[str] = None) -> PrefixScan:
        """An iterator over every row under prefix (it pages to the end)."""
        return PrefixScan(self._c, ns, prefix, page_size, keys_only, tenant)

    def put(self, ns: str, key: str, value: Any, *, ttl: Ttl = None, forever: bool = False,
            expect: Optional[int] = None, required: bool = False, tenant: Optional[str] = None) -> WriteResult:
        """Write value. ``expect``: apply only while the key holds that version (0: absent); a lost
        expect is ``applied=False``, or PreconditionFailed with ``required=True``."""
        return self._c._run(_core.kv_put(ns, key, value, ttl, forever, expect, required, tenant))

    def put_if_absent(self, ns: str, key: str, value: Any, *, ttl: Ttl = None, forever: bool = False,
                      required: bool = False, tenant: Optional[str] = None) -> WriteResult:
        return self._c._run(_core.one_op(_core.op_put_if_absent(ns, key, value, ttl, forever, required),
                                         WriteResult.of, tenant))

    def delete(self, ns: str, key: str, *, expect: Optional[int] = None, required: bool = False,
               tenant: Optional[str] = None) -> WriteResult:
        return self._c._run(_core.kv_delete(ns, key, expect, required, tenant))

    def incr(self, ns: str, key: str, delta: Any = 1, *, min: Any = None, max: Any = None, ttl: Ttl = None,
             forever: bool = False, required: bool = False, tenant: Optional[str] = None) -> WriteResult:
        """Add delta (int, float or Decimal); ``min``/``max`` bound the result (``applied=False``,
        reason ``limit``, past them)."""
        return self._c._run(_core.one_op(_core.op_incr(ns, key, delta, min, max, ttl, forever, required),
                                         WriteResult.of, tenant))

    def apply(self, ops: Iterable[Mapping[str, Any]], *, tenant: Optional[str] = None) -> list[Any]:
        """Wire ops in one transaction; one result element each."""
        return self._c._run(_core.kv_apply([dict(o) for o in ops], tenant))

    def batch(self, *, tenant: Optional[str] = None) -> Batch:
        return Batch(self._c, tenant)

    def namespaces(self, *, tenant: Optional[str] = None) -> list[Any]:
        return self._c._run(_core.kv_namespaces(tenant)).get("namespaces", [])


class QueueHandle:
    """One queue: ``q.queue("orders").push([{"payload": {...}, "transactionId": "o-1"}])``."""

    def __init__(self, c: Queen, name: str, partition: Optional[str], tenant: Optional[str]) -> None:
        self._c, self.name, self.partition, self._tenant = c, name, partition, tenant

    def push(self, items: Iterable[Mapping[str, Any]]) -> list[PushResult]:
        """Items are ``{"payload": ..., "transactionId"?: ..., "partition"?: ...}``."""
        return self._c.push(_core.queue_items(self.name, self.partition, items), tenant=self._tenant)

    def pop(self, **kw: Any) -> Optional[PopResult]:
        kw.setdefault("partition", self.partition)
        return self._c.pop(self.name, tenant=self._tenant, **kw)

    def configure(self, options: Optional[QueueOptions] = None, **kw: Any) -> ConfigureResult:
        return self._c.configure(self.name, options, tenant=self._tenant, **kw)

    def delete(self) -> dict[str, Any]:
        return self._c.queue_delete(self.name, tenant=self._tenant)

    def consume(self, handler: Callable[[Message, Tx], Any], **kw: Any) -> ConsumeStats:
        kw.setdefault("partition", self.partition)
        return self._c.consume(self.name, handler, tenant=self._tenant, **kw)
