// The client: options, the retrying loop with failover, the calls, the consume loop.
import * as calls from './calls.js';
import { QueenBadResponse, QueenError, QueenRefused, TransportError, errorClass } from './errors.js';
import { parse, stringify } from './json.js';
import { AttemptFailed, fetchTransport, isNode, nodeTransport } from './transport.js';

const sleep = (ms, signal) => new Promise((resolve) => {
  if (signal?.aborted) { resolve(); return; }
  const t = setTimeout(done, ms);
  function done() { clearTimeout(t); signal?.removeEventListener('abort', done); resolve(); }
  signal?.addEventListener('abort', done, { once: true });
});

function parseRetryAfter(v) {
  const n = Number.parseInt(String(v ?? '').trim(), 10);
  return Number.isFinite(n) && n > 0 && n < 86400 ? n : 0; // an HTTP date: the broker never sends one
}

/** The typed error of a non-2xx answer: the envelope's members as sent. */
function answerError(status, text, retryAfter, attempts) {
  let env = null;
  try { env = text ? parse(text) : null; } catch { env = null; }
  const Cls = errorClass(status);
  if (env && typeof env === 'object' && typeof env.code === 'string') {
    return new Cls(status, env.code, String(env.reason ?? env.code), String(env.detail ?? env.error ?? ''), retryAfter, attempts);
  }
  return new Cls(status, `http_${status}`, `http_${status}`, `HTTP ${status} without the error envelope`, retryAfter, attempts);
}

export class Queen {
  /**
   * @param {{urls?: string|string[], token?: string, maxAttempts?: number, backoffMs?: number,
   *   maxBackoffMs?: number, timeoutMs?: number, connectTimeoutMs?: number, transport?: 'node'|'fetch',
   *   onRetry?: (attempt: number, error: QueenError, waitMs: number) => void}} [options]
   */
  constructor(options) {
    const o = typeof options === 'string' || Array.isArray(options) ? { urls: options } : options ?? {};
    // clients/API.md: with no URL given every client reads QUEEN_URL (a comma-separated list).
    const env = globalThis.process?.env?.QUEEN_URL ?? '';
    const given = o.urls ?? env.split(',').map((u) => u.trim()).filter((u) => u !== '');
    const urls = typeof given === 'string' ? [given] : [...given];
    if (urls.length === 0) throw new TypeError('at least one broker URL is needed (urls, or QUEEN_URL)');
    this._onRetry = o.onRetry;
    this._urls = urls.map((u) => u.replace(/\/+$/, ''));
    this._token = o.token || undefined;
    this._maxAttempts = Math.max(1, o.maxAttempts ?? 3);
    this._backoffMs = o.backoffMs ?? 50;
    this._maxBackoffMs = o.maxBackoffMs ?? 5000;
    this._timeoutMs = o.timeoutMs ?? 30000;
    this._connectTimeoutMs = o.connectTimeoutMs ?? 3000;
    const kind = o.transport ?? (isNode() ? 'node' : 'fetch');
    this._transport = kind === 'node' ? nodeTransport() : fetchTransport();
    this._current = 0;
    /** attempts made beyond the first, by every call so far */
    this.retries = 0;
    this.kv = new Kv(this);
    this.streams = new StreamsCalls(this);
  }

  /** Close kept-alive connections. */
  async close() { (await this._transport).close(); }

  _wait(attempt, retryAfter) {
    let d = Math.min(this._backoffMs * 2 ** (attempt - 1), this._maxBackoffMs);
    let w = d / 2 + Math.random() * (d / 2); // jittered, so clients retrying together spread out
    if (retryAfter > 0 && retryAfter * 1000 > w) w = retryAfter * 1000;
    return Math.min(w, this._maxBackoffMs);
  }

  /** Send one call with the retry rules and failover; its result, or a typed error. `signal` aborts it. */
  async _run(call, { signal } = {}) {
    const transport = await this._transport;
    const n = this._urls.length;
    let i = this._current % n;
    const body = call.hasBody ? stringify(call.body) : undefined;
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (this._token) headers.Authorization = `Bearer ${this._token}`;
    if (call.tenant) headers['x-queen-tenant'] = call.tenant;
    for (let attempt = 1; ; attempt++) {
      if (attempt > 1) this.retries++;
      let err, retry, nextUrl = true;
      try {
        const a = await transport.send({ method: call.method, url: this._urls[i] + call.path, headers, body,
          timeoutMs: this._timeoutMs + call.extraMs, connectTimeoutMs: this._connectTimeoutMs, signal });
        this._current = i;
        if (a.status >= 200 && a.status < 300) {
          let parsed;
          try { parsed = a.body ? parse(a.body) : undefined; } catch {
            throw new QueenBadResponse(a.status, 'bad_response', 'bad_response', 'the answer is not JSON', 0, attempt);
          }
          try { return call.finish(a.status, parsed); } catch (e) {
            if (e instanceof QueenError) e.attempts = attempt;
            throw e;
          }
        }
        err = answerError(a.status, a.body, parseRetryAfter(a.retryAfter), attempt);
        retry = (a.status === 429 || a.status === 503) && call.safe;
        nextUrl = a.status !== 429; // a rate limit is the tenant's on every broker
      } catch (e) {
        if (!(e instanceof AttemptFailed)) throw e;
        err = new TransportError(0, e.code, e.code, e.detail, 0, attempt);
        if (e.code === 'aborted') err.cause = signal?.reason;
        retry = e.code === 'unreachable' || (call.safe && e.code !== 'aborted'); // nothing was sent without a connection
      }
      if (!retry || attempt >= this._maxAttempts || signal?.aborted) throw err;
      const w = this._wait(attempt, err.retryAfter);
      if (nextUrl) i = (i + 1) % n;
      this._onRetry?.(attempt, err, w);
      await sleep(w, signal);
      if (signal?.aborted) {
        throw Object.assign(new TransportError(0, 'aborted', 'aborted', "aborted by the call's signal", 0, attempt),
          { cause: signal.reason });
      }
    }
  }

  /** GET /health. Every call's options take `signal` (an AbortSignal): aborting it ends the call. */
  health(o = {}) { return this._run(calls.health(), o); }

  /** Push wire items ({queue, payload (or data), partition?, transactionId?}); one result each. */
  async push(items, o = {}) { return this._run(calls.push([...items], o.tenant), o); }

  /** Lease messages; null when none. With wait, a long poll of up to timeoutMs (default 30000). */
  pop(queue, options = {}) { return this._run(calls.pop(queue, options), options); }

  /** Settle messages (popped messages or wire acks); status 'failed' releases them for redelivery. One
   * message gives one result; an array gives an array. */
  async ack(acks, o = {}) {
    const one = !Array.isArray(acks);
    const list = one ? [acks] : acks;
    const results = await this._run(calls.ack(list.map((m) => calls.ackItem(m, o.status, o.error)),
      { group: o.group, tenant: o.tenant }), o);
    return one ? results[0] : results;
  }

  /** Extend a lease (its id, or a message's) to seconds from now. */
  leaseExtend(lease, seconds, o = {}) {
    return this._run(calls.leaseExtend(typeof lease === 'string' ? lease : lease.leaseId, seconds, o.tenant), o);
  }

  configure(queue, options, extra = {}) { return this._run(calls.configure(queue, options, extra), extra); }
  queues(o = {}) { return this._run(calls.queues(o.tenant), o); }
  queueDelete(queue, o = {}) { return this._run(calls.queueDelete(queue, o.tenant), o); }

  /** A handle on one queue (and optionally one partition). */
  queue(name, { partition, tenant } = {}) { return new QueueHandle(this, name, partition, tenant); }

  /** A transaction builder: q.tx().ack(m).push('out', [{payload}]).kvPutIfAbsent(...).commit(). */
  tx({ tenant } = {}) { return new Tx(this, tenant); }

  /**
   * Pop from queue with `concurrency` loops and call handler(message, tx) per message. The handler adds
   * its effects to tx, which already holds the message's ack: when it resolves, one transaction commits
   * the ack and the effects together, so an effect happens once. A handler that throws or returns false
   * fails the message (an ack with status failed: the broker redelivers it); so does a transaction that
   * rolls back. A running handler's lease is renewed every third of leaseSeconds. Stops cleanly when
   * `signal` aborts: no more pops, running handlers finish and settle. Rejects with the broker's refusal
   * of the pop itself (a 4xx); unavailability is waited out.
   */
  async consume(queue, handler, o = {}) {
    const n = Math.max(1, o.concurrency ?? 1);
    const leaseSeconds = Math.max(1, o.leaseSeconds ?? 30);
    const stats = { handled: 0, failed: 0 };
    let fatal = null;
    const stopping = () => o.signal?.aborted || fatal !== null;
    const settleFailed = async (m, why) => {
      stats.failed++;
      try { await this.ack(m, { status: 'failed', error: why.slice(0, 500), group: o.group, tenant: o.tenant }); } catch {
        // its lease expires and the broker redelivers it anyway
      }
    };
    const handle = async (m) => {
      const tx = new Tx(this, o.tenant).ack(m, { group: o.group });
      const period = Math.max(100, (leaseSeconds * 1000) / 3);
      const renewing = setInterval(() => {
        this.leaseExtend(m.leaseId, leaseSeconds, { tenant: o.tenant }).catch(() => {}); // a lost lease shows at commit
      }, period);
      let ok, why = 'handler returned false';
      try {
        ok = (await handler(m, tx)) !== false;
      } catch (e) {
        ok = false;
        why = `handler threw ${e && e.message ? e.message : String(e)}`;
      } finally {
        clearInterval(renewing);
      }
      if (!ok) { await settleFailed(m, why); return; }
      try {
        const r = await tx.commit();
        if (r.success) { stats.handled++; return; }
        why = `the transaction rolled back: ${r.reason}`;
      } catch (e) {
        why = `the transaction failed: ${e.message}`;
      }
      await settleFailed(m, why);
    };
    const worker = async () => {
      let idle = 50;
      while (!stopping()) {
        let body;
        try {
          body = await this.pop(queue, { partition: o.partition, group: o.group, batch: o.batch ?? 1, wait: true,
            timeoutMs: o.pollMs ?? 1000, leaseSeconds, tenant: o.tenant });
        } catch (e) {
          if (e instanceof QueenRefused && e.status >= 400 && e.status < 500 && e.status !== 408) {
            fatal = fatal ?? e;
            return;
          }
          if (!(e instanceof QueenError)) throw e;
          await sleep(idle, o.signal); // unavailable: pop again later, longer each time, up to 2 s
          idle = Math.min(idle * 2, 2000);
          continue;
        }
        idle = 50;
        // Every message popped is handled, even after a stop: it is leased to us.
        for (const m of body?.messages ?? []) await handle(m);
      }
    };
    await Promise.all(Array.from({ length: n }, worker));
    if (fatal) throw fatal;
    return stats;
  }
}

/** The three streams routes as the wire has them (clients/STREAMS.md); streams.js runs pipelines on them. */
export class StreamsCalls {
  constructor(client) { this._c = client; }
  /** POST /streams/v1/queries: {name, source_queue, sink_queue?, config_hash, reset?}. */
  register(body, o = {}) { return this._c._run(calls.streamsRegister({ ...body }, o.tenant), o); }
  /** POST /streams/v1/cycle: state ops, sink pushes and the source ack in one transaction. */
  cycle(body, o = {}) { return this._c._run(calls.streamsCycle({ ...body }, o.tenant), o); }
  /** POST /streams/v1/state/get: {query_id, partition_id, keys?, key_prefix?, ripe_at_or_before?}. */
  stateGet(body, o = {}) { return this._c._run(calls.streamsStateGet({ ...body }, o.tenant), o); }
}

/** The transaction builder bound to a client. */
export class Tx extends calls.TxBuilder {
  constructor(client, tenant) { super(tenant); this._client = client; }
  /** Send it. success false (rolled back) is a result; a refusal rejects. */
  commit(o = {}) { return this._client._run(this.call(), o); }
}

/** KV ops applied in one transaction: q.kv.batch().put(...).incr(...).apply(). */
export class Batch extends calls.BatchBuilder {
  constructor(client, tenant) { super(tenant); this._client = client; }
  apply(o = {}) { return this._client._run(this.call(), o); }
}

/** The KV calls. Every write needs exactly one of ttlSeconds (> 0) and forever: true, else it throws
 * BadArgument before anything is sent. */
export class Kv {
  constructor(c) { this._c = c; }
  get(ns, key, o = {}) { return this._c._run(calls.kvGet(ns, key, o.tenant), o); }
  getMany(ns, keys, o = {}) { return this._c._run(calls.oneOp(calls.ops.getMany(ns, keys), o.tenant), o); }
  /** One page: {rows, truncated, nextAfter} (scan reads every page). */
  getPrefix(ns, prefix, o = {}) { return this._c._run(calls.oneOp(calls.ops.getPrefix(ns, prefix, o), o.tenant), o); }
  /** Every row under prefix, page after page (pageSize rows each) until a page is not truncated. */
  async *scan(ns, prefix, { pageSize, keysOnly, tenant, signal } = {}) {
    let after;
    for (;;) {
      const page = await this.getPrefix(ns, prefix, { after, limit: pageSize, keysOnly, tenant, signal });
      yield* page.rows ?? [];
      if (!page.truncated || page.nextAfter === undefined || page.nextAfter === null) return;
      after = page.nextAfter;
    }
  }
  // async: a refused expiry rejects the promise, as a broker's refusal would.
  async put(ns, key, value, o = {}) { return this._c._run(calls.kvPut(ns, key, value, o), o); }
  async putIfAbsent(ns, key, value, o = {}) { return this._c._run(calls.oneOp(calls.ops.putIfAbsent(ns, key, value, o), o.tenant), o); }
  delete(ns, key, o = {}) { return this._c._run(calls.kvDelete(ns, key, o), o); }
  async incr(ns, key, delta = 1, o = {}) { return this._c._run(calls.oneOp(calls.ops.incr(ns, key, delta, o), o.tenant), o); }
  /** Wire ops in one transaction; one result element each. */
  apply(ops, o = {}) { return this._c._run(calls.kvApply([...ops], o.tenant), o); }
  batch({ tenant } = {}) { return new Batch(this._c, tenant); }
  namespaces(o = {}) { return this._c._run(calls.kvNamespaces(o.tenant), o); }
}

/** One queue: q.queue('orders').push([{payload, transactionId}]). */
export class QueueHandle {
  constructor(c, name, partition, tenant) { this._c = c; this.name = name; this.partition = partition; this._tenant = tenant; }
  push(items) {
    const wire = [...items].map((it) => {
      const w = { queue: this.name, ...it };
      if (this.partition !== undefined && w.partition === undefined) w.partition = this.partition;
      return w;
    });
    return this._c.push(wire, { tenant: this._tenant });
  }
  pop(o = {}) { return this._c.pop(this.name, { partition: this.partition, tenant: this._tenant, ...o }); }
  configure(options, extra = {}) { return this._c.configure(this.name, options, { tenant: this._tenant, ...extra }); }
  delete() { return this._c.queueDelete(this.name, { tenant: this._tenant }); }
  consume(handler, o = {}) { return this._c.consume(this.name, handler, { partition: this.partition, tenant: this._tenant, ...o }); }
}

