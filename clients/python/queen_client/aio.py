"""The asyncio client: the same calls as ``Queen``, awaited, over asyncio streams (HTTP/1.1 with
keep-alive, no third-party library)."""
from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import signal
import ssl
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Optional, Union, overload
from urllib.parse import urlsplit

from . import _core
from ._core import AckLike, Call, Failed, Ttl
from .errors import QueenError, QueenRefused
from .results import (AckResult, ConfigureResult, ConsumeStats, GetManyResult, GetResult, LeaseResult, Message,
                      PopResult, PrefixPage, PushResult, QueueOptions, Row, TxResult, WriteResult)

__all__ = ["AsyncQueen", "AsyncStreamsCalls", "AsyncKv", "AsyncBatch", "AsyncTx", "AsyncQueueHandle", "AsyncPrefixScan"]

_KEEP_IDLE = 16
_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _Stale(Exception):
    """A kept-alive connection was closed by the broker before any answer."""


async def _read_body(reader: asyncio.StreamReader, head: dict[str, str]) -> bytes:
    if head.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size_line = await reader.readline()
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    if "content-length" in head:
        return await reader.readexactly(int(head["content-length"]))
    return await reader.read()  # until the broker closes


async def _exchange(conn: _Conn, request: bytes, reused: bool) -> tuple[int, dict[str, str], bytes]:
    reader, writer = conn
    writer.write(request)
    await writer.drain()
    line = await reader.readline()
    if not line:
        if reused:
            raise _Stale()
        raise ConnectionResetError("the connection closed before an answer")
    parts = line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ValueError(f"not an HTTP status line: {line[:80]!r}")
    status = int(parts[1])
    head: dict[str, str] = {"_version": parts[0]}
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b"\n"):
            break
        if not h:
            raise ConnectionResetError("the connection closed inside the headers")
        name, _, value = h.decode("latin-1").partition(":")
        head[name.strip().lower()] = value.strip()
    body = b"" if status in (204, 304) else await _read_body(reader, head)
    return status, head, body


class AsyncQueen:
    """The asyncio twin of ``Queen``: same options, same names, every call awaited.

    One instance serves any number of tasks of one event loop."""

    def __init__(self, urls: Union[str, Iterable[str], None] = None, *, token: Optional[str] = None,
                 max_attempts: int = 3, backoff: float = 0.05, max_backoff: float = 5.0, timeout: float = 30.0,
                 connect_timeout: float = 3.0,
                 on_retry: Optional[Callable[[int, QueenError, float], None]] = None) -> None:
        self._opts = _core.make_options(urls, token, max_attempts, backoff, max_backoff, timeout, connect_timeout,
                                        on_retry)
        self._current = 0
        self._idle: dict[int, list[_Conn]] = {}
        #: attempts made beyond the first, by every call so far
        self.retries = 0
        self.kv = AsyncKv(self)
        self.streams = AsyncStreamsCalls(self)

    async def close(self) -> None:
        conns = [c for lst in self._idle.values() for c in lst]
        self._idle.clear()
        for _, w in conns:
            w.close()
        for _, w in conns:
            try:
                await w.wait_closed()
            except OSError:
                pass

    async def __aenter__(self) -> "AsyncQueen":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ---- transport -------------------------------------------------------------------------------------

    def _request(self, base: str, call: Call[Any]) -> bytes:
        target, body, hdrs = _core.request(self._opts, base, call)
        hdrs["Host"] = urlsplit(base).netloc
        if body is not None:
            hdrs["Content-Length"] = str(len(body))
        head = f"{call.method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
        return (head + "\r\n").encode("utf-8") + (body or b"")

    async def _connect(self, base: str) -> _Conn:
        u = urlsplit(base)
        tls = ssl.create_default_context() if u.scheme == "https" else None
        port = u.port or (443 if tls else 80)
        try:
            return await asyncio.wait_for(asyncio.open_connection(u.hostname, port, ssl=tls),
                                          self._opts.connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:  # nothing was sent
            raise Failed("unreachable", f"{base}: {e!r}") from None

    async def _attempt(self, i: int, call: Call[Any], timeout: float) -> tuple[int, dict[str, str], bytes]:
        base = self._opts.urls[i]
        request = self._request(base, call)
        lst = self._idle.get(i)
        conn: Optional[_Conn] = lst.pop() if lst else None
        reused = conn is not None
        while True:
            if conn is None:
                conn = await self._connect(base)
            try:
                status, head, body = await asyncio.wait_for(_exchange(conn, request, reused), timeout)
            except _Stale:
                conn[1].close()
                conn, reused = None, False  # closed while idle: it read nothing of this request
                continue
            except asyncio.TimeoutError:
                conn[1].close()
                raise Failed("timeout", f"{base}: no whole answer within {timeout:g} s") from None
            except (OSError, asyncio.IncompleteReadError, ValueError) as e:
                conn[1].close()
                raise Failed("transport", f"{base}: {e!r}") from None
            keep = head.get("connection", "").lower() != "close" and head.get("_version") == "HTTP/1.1"
            idle = self._idle.setdefault(i, [])
            if keep and len(idle) < _KEEP_IDLE:
                idle.append(conn)
            else:
                conn[1].close()
            return status, head, body

    async def _run(self, call: Call[_core.T]) -> _core.T:
        run = _core.Attempts(self._opts, self._current, call)
        while True:
            if run.begin():
                self.retries += 1
            try:
                status, head, data = await self._attempt(run.index, call, run.timeout)
            except Failed as f:
                wait = run.failed(f)
            else:
                self._current = run.index
                if 200 <= status < 300:
                    return run.value(status, data)
                wait = run.refused(status, data, head.get("retry-after"))
            await asyncio.sleep(wait)

    # ---- calls -----------------------------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        return await self._run(_core.health())

    async def push(self, items: Iterable[Mapping[str, Any]], *, tenant: Optional[str] = None) -> list[PushResult]:
        return await self._run(_core.push([dict(i) for i in items], tenant))

    async def pop(self, queue: str, *, partition: Optional[str] = None, group: Optional[str] = None,
                  batch: Optional[int] = None, wait: bool = False, timeout: Optional[float] = None,
                  lease_seconds: Optional[int] = None, auto_ack: bool = False,
                  tenant: Optional[str] = None) -> Optional[PopResult]:
        return await self._run(_core.pop(queue, partition, group, batch, wait, timeout, lease_seconds, auto_ack,
                                         tenant))

    @overload
    async def ack(self, acks: AckLike, *, status: Optional[str] = None, error: Optional[str] = None,
                  group: Optional[str] = None, tenant: Optional[str] = None) -> AckResult: ...

    @overload
    async def ack(self, acks: Iterable[AckLike], *, status: Optional[str] = None, error: Optional[str] = None,
                  group: Optional[str] = None, tenant: Optional[str] = None) -> list[AckResult]: ...

    async def ack(self, acks: Union[AckLike, Iterable[AckLike]], *, status: Optional[str] = None,
                  error: Optional[str] = None, group: Optional[str] = None,
                  tenant: Optional[str] = None) -> Union[AckResult, list[AckResult]]:
        results = await self._run(_core.ack(_core.ack_items(acks, status, error), group, tenant))
        return results[0] if _core.is_one_ack(acks) else results

    async def lease_extend(self, lease: Union[str, Message], seconds: int, *,
                     tenant: Optional[str] = None) -> LeaseResult:
        lease_id = (lease.lease_id or "") if isinstance(lease, Message) else lease
        return await self._run(_core.lease_extend(lease_id, seconds, tenant))

    async def configure(self, queue: str, options: Optional[QueueOptions] = None, *,
                        namespace: Optional[str] = None, task: Optional[str] = None,
                        tenant: Optional[str] = None) -> ConfigureResult:
        return await self._run(_core.configure(queue, options, namespace, task, tenant))

    async def queues(self, *, tenant: Optional[str] = None) -> list[Any]:
        return (await self._run(_core.queues(tenant))).get("queues", [])

    async def queue_delete(self, queue: str, *, tenant: Optional[str] = None) -> dict[str, Any]:
        return await self._run(_core.queue_delete(queue, tenant))

    def with_timeout(self, seconds: float) -> "AsyncQueen":
        """This client, its connections and options shared, with one attempt's time set to ``seconds``."""
        view = copy.copy(self)
        view._opts = dataclasses.replace(self._opts, timeout=float(seconds))
        view.kv = AsyncKv(view)
        view.streams = AsyncStreamsCalls(view)
        return view

    def queue(self, name: str, *, partition: Optional[str] = None,
              tenant: Optional[str] = None) -> "AsyncQueueHandle":
        return AsyncQueueHandle(self, name, partition, tenant)

    def tx(self, *, tenant: Optional[str] = None) -> "AsyncTx":
        return AsyncTx(self, tenant)

    async def consume(self, queue: str, handler: Callable[[Message, "AsyncTx"], Any], *, concurrency: int = 1,
                      group: Optional[str] = None, partition: Optional[str] = None, batch: int = 1,
                      lease_seconds: int = 30, poll: float = 1.0, stop: Optional[asyncio.Event] = None,
                      handle_signals: bool = True, tenant: Optional[str] = None) -> ConsumeStats:
        """``Queen.consume`` on tasks: ``handler`` may be a coroutine function. Stops cleanly when ``stop``
        is set or, with ``handle_signals``, on SIGINT or SIGTERM."""
        return await _AsyncConsumer(self, queue, handler, concurrency, group, partition, batch, lease_seconds, poll,
                                    stop or asyncio.Event(), tenant).run(handle_signals)


class _AsyncConsumer:
    def __init__(self, c: AsyncQueen, queue: str, handler: Callable[[Message, "AsyncTx"], Any], concurrency: int,
                 group: Optional[str], partition: Optional[str], batch: int, lease_seconds: int, poll: float,
                 stop: asyncio.Event, tenant: Optional[str]) -> None:
        self.c, self.queue, self.handler = c, queue, handler
        self.n = max(1, int(concurrency))
        self.group, self.partition, self.batch = group, partition, max(1, int(batch))
        self.lease_seconds = max(1, int(lease_seconds))
        self.poll, self.stop, self.tenant = poll, stop, tenant
        self.held: dict[int, str] = {}
        self.stats = ConsumeStats()
        self.fatal: Optional[QueenError] = None

    async def run(self, handle_signals: bool) -> ConsumeStats:
        loop = asyncio.get_running_loop()
        installed = []
        if handle_signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, self.stop.set)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass  # not the main thread's loop, or a platform without them
        renewer = asyncio.create_task(self._renew())
        try:
            await asyncio.gather(*(self._work(k) for k in range(self.n)))
        finally:
            renewer.cancel()
            try:
                await renewer
            except asyncio.CancelledError:
                pass
            for sig in installed:
                loop.remove_signal_handler(sig)
        if self.fatal is not None:
            raise self.fatal
        return self.stats

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _work(self, slot: int) -> None:
        idle = 0.05
        while not self.stop.is_set() and self.fatal is None:
            try:
                popped = await self.c.pop(self.queue, partition=self.partition, group=self.group, batch=self.batch,
                                          wait=True, timeout=self.poll, lease_seconds=self.lease_seconds,
                                          tenant=self.tenant)
            except QueenRefused as e:
                if 400 <= e.status < 500 and e.status != 408:
                    self.fatal = self.fatal or e
                    return
                await self._pause(idle)
                idle = min(idle * 2, 2.0)
                continue
            except QueenError:
                await self._pause(idle)
                idle = min(idle * 2, 2.0)
                continue
            idle = 0.05
            for m in popped.messages if popped is not None else []:
                await self._handle(slot, m)

    async def _handle(self, slot: int, m: Message) -> None:
        tx = AsyncTx(self.c, self.tenant)
        tx.ack(m, group=self.group)
        if m.lease_id:
            self.held[slot] = m.lease_id
        why = "handler returned False"
        try:
            r = self.handler(m, tx)
            if inspect.isawaitable(r):
                r = await r
            ok = r is not False
        except Exception as e:  # the handler's failure fails the message, never the loop
            ok, why = False, f"handler raised {e!r}"[:500]
        finally:
            self.held.pop(slot, None)
        settled = False
        if ok:
            try:
                settled = (await tx.commit()).success
                why = "the transaction rolled back"
            except QueenError as e:
                why = f"the transaction failed: {e}"[:500]
        if settled:
            self.stats.handled += 1
        else:
            self.stats.failed += 1
            try:
                await self.c.ack(m, status="failed", error=why, group=self.group, tenant=self.tenant)
            except QueenError:
                pass  # its lease expires and the broker redelivers it anyway

    async def _renew(self) -> None:
        period = max(0.1, self.lease_seconds / 3)
        while True:
            await asyncio.sleep(period)
            for lease in list(self.held.values()):
                try:
                    await self.c.lease_extend(lease, self.lease_seconds, tenant=self.tenant)
                except QueenError:
                    pass


class AsyncTx(_core.TxBuilder):
    def __init__(self, client: AsyncQueen, tenant: Optional[str] = None) -> None:
        super().__init__(tenant)
        self._client = client

    async def commit(self) -> TxResult:
        return await self._client._run(self.call())


class AsyncBatch(_core.BatchBuilder):
    def __init__(self, client: AsyncQueen, tenant: Optional[str] = None) -> None:
        super().__init__(tenant)
        self._client = client

    async def apply(self) -> list[Any]:
        return await self._client._run(self.call())


class AsyncPrefixScan(_core.PrefixPages, AsyncIterator[Row]):
    """``async for row in q.kv.scan(ns, prefix)``: every row, page after page."""

    def __init__(self, c: AsyncQueen, ns: str, prefix: str, page_size: Optional[int], keys_only: bool,
                 tenant: Optional[str]) -> None:
        super().__init__(ns, prefix, page_size, keys_only, tenant)
        self._c = c

    def __aiter__(self) -> "AsyncPrefixScan":
        return self

    async def __anext__(self) -> Row:
        while not self._rows:
            if not self._more:
                raise StopAsyncIteration
            self.took(await self._c._run(self.next_call()))
        return self._rows.pop(0)


class AsyncStreamsCalls:
    """StreamsCalls' asyncio twin: the three streams routes as they are on the wire."""

    def __init__(self, c: AsyncQueen) -> None:
        self._c = c

    async def register(self, body: Mapping[str, Any], *, tenant: Optional[str] = None) -> dict[str, Any]:
        return await self._c._run(_core.streams_register(dict(body), tenant))

    async def cycle(self, body: Mapping[str, Any], *, tenant: Optional[str] = None) -> dict[str, Any]:
        return await self._c._run(_core.streams_cycle(dict(body), tenant))

    async def state_get(self, body: Mapping[str, Any], *, tenant: Optional[str] = None) -> dict[str, Any]:
        return await self._c._run(_core.streams_state_get(dict(body), tenant))


class AsyncKv:
    def __init__(self, c: AsyncQueen) -> None:
        self._c = c

    async def get(self, ns: str, key: str, *, tenant: Optional[str] = None) -> GetResult:
        return await self._c._run(_core.kv_get(ns, key, tenant))

    async def get_many(self, ns: str, keys: Iterable[str], *, tenant: Optional[str] = None) -> GetManyResult:
        return await self._c._run(_core.kv_get_many(ns, keys, tenant))

    async def get_prefix(self, ns: str, prefix: str, *, after: Optional[str] = None,
                         limit: Optional[int] = None, keys_only: bool = False,
                         tenant: Optional[str] = None) -> PrefixPage:
        """One page (``scan`` reads every page)."""
        return await self._c._run(_core.kv_get_prefix(ns, prefix, after, limit, keys_only, tenant))

    def scan(self, ns: str, prefix: str, *, page_size: Optional[int] = None, keys_only: bool = False,
             tenant: Optional[str] = None) -> AsyncPrefixScan:
        return AsyncPrefixScan(self._c, ns, prefix, page_size, keys_only, tenant)

    async def put(self, ns: str, key: str, value: Any, *, ttl: Ttl = None, forever: bool = False,
                  expect: Optional[int] = None, required: bool = False, tenant: Optional[str] = None) -> WriteResult:
        return await self._c._run(_core.kv_put(ns, key, value, ttl, forever, expect, required, tenant))

    async def put_if_absent(self, ns: str, key: str, value: Any, *, ttl: Ttl = None, forever: bool = False,
                            required: bool = False, tenant: Optional[str] = None) -> WriteResult:
        return await self._c._run(_core.one_op(_core.op_put_if_absent(ns, key, value, ttl, forever, required),
                                               WriteResult.of, tenant))

    async def delete(self, ns: str, key: str, *, expect: Optional[int] = None, required: bool = False,
                     tenant: Optional[str] = None) -> WriteResult:
        return await self._c._run(_core.kv_delete(ns, key, expect, required, tenant))

    async def incr(self, ns: str, key: str, delta: Any = 1, *, min: Any = None, max: Any = None, ttl: Ttl = None,
                   forever: bool = False, required: bool = False, tenant: Optional[str] = None) -> WriteResult:
        return await self._c._run(_core.one_op(_core.op_incr(ns, key, delta, min, max, ttl, forever, required),
                                               WriteResult.of, tenant))

    async def apply(self, ops: Iterable[Mapping[str, Any]], *,
                    tenant: Optional[str] = None) -> list[dict[str, Any]]:
        return await self._c._run(_core.kv_apply([dict(o) for o in ops], tenant))

    def batch(self, *, tenant: Optional[str] = None) -> AsyncBatch:
        return AsyncBatch(self._c, tenant)

    async def namespaces(self, *, tenant: Optional[str] = None) -> list[Any]:
        return (await self._c._run(_core.kv_namespaces(tenant))).get("namespaces", [])


class AsyncQueueHandle:
    def __init__(self, c: AsyncQueen, name: str, partition: Optional[str], tenant: Optional[str]) -> None:
        self._c, self.name, self.partition, self._tenant = c, name, partition, tenant

    async def push(self, items: Iterable[Mapping[str, Any]]) -> list[PushResult]:
        return await self._c.push(_core.queue_items(self.name, self.partition, items), tenant=self._tenant)

    async def pop(self, **kw: Any) -> Optional[PopResult]:
        kw.setdefault("partition", self.partition)
        return await self._c.pop(self.name, tenant=self._tenant, **kw)

    async def configure(self, options: Optional[QueueOptions] = None, **kw: Any) -> ConfigureResult:
        return await self._c.configure(self.name, options, tenant=self._tenant, **kw)

    async def delete(self) -> dict[str, Any]:
        return await self._c.queue_delete(self.name, tenant=self._tenant)

    async def consume(self, handler: Callable[[Message, AsyncTx], Any], **kw: Any) -> ConsumeStats:
        kw.setdefault("partition", self.partition)
        return await self._c.consume(self.name, handler, tenant=self._tenant, **kw)
