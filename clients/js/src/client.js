// The client: options, the retrying loop with failover, the calls, the consume loop.
import * as calls from './calls.js';
import { QueenBadResponse, QueenError, QueenRefused, QueenUnavailable } from './errors.js';
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
  const Cls = status === 429 || status === 503 ? QueenUnavailable : QueenRefused;
  if (env && typeof env === 'object' && typeof env.code === 'string') {
    return new Cls(status, env.code, String(env.reason ?? env.code), String(env.detail ?? env.error ?? ''), retryAfter, attempts);
  }
  return new Cls(status, `http_${status}`, `http_${status}`, `HTTP ${status} without the error envelope`, retryAfter, attempts);
}

export class Queen {
  /**
   * @param {{urls: string|string[], token?: string, maxAttempts?: number, backoffMs?: number,
   *   maxBackoffMs?: number, timeoutMs?: number, connectTimeoutMs?: number, transport?: 'node'|'fetch'}} options
   */
  constructor(options) {
    const o = typeof options === 'string' || Array.isArray(options) ? { urls: options } : options ?? {};
    const urls = typeof o.urls === 'string' ? [o.urls] : [...(o.urls ?? [])];
    if (urls.length === 0) throw new TypeError('at least one broker URL is needed');
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
  }

  /** Close kept-alive connections. */
  async close() { (await this._transport).close(); }

  _wait(attempt, retryAfter) {
    let d = Math.min(this._backoffMs * 2 ** (attempt - 1), this._maxBackoffMs);
    let w = d / 2 + Math.random() * (d / 2); // jittered, so clients retrying together spread out
    if (retryAfter > 0 && retryAfter * 1000 > w) w = retryAfter * 1000;
    return Math.min(w, this._maxBackoffMs);
  }

  /** Send one call with the retry rules and failover; its result, or a typed error. */
  async _run(call) {
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
          timeoutMs: this._timeoutMs + call.extraMs, connectTimeoutMs: this._connectTimeoutMs });
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
        err = new QueenUnavailable(0, e.code, e.code, e.detail, 0, attempt);
        retry = e.code === 'unreachable' || call.safe; // nothing was sent without a connection
      }
      if (!retry || attempt >= this._maxAttempts) throw err;
      const w = this._wait(attempt, err.retryAfter);
      if (nextUrl) i = (i + 1) % n;
      await sleep(w);
    }
  }

  /** GET /health. */
  health() { return this._run(calls.health()); }

  /** Push wire items ({queue, payload, partition?, transactionId?}); one result each. */
  push(items, { tenant } = {}) { return this._run(calls.push([...items], tenant)); }

  /** Lease messages; null when none. With wait, a long poll of up to timeoutMs (default 30000). */
  pop(queue, options = {}) { return this._run(calls.pop(queue, options)); }

  /** Settle messages (popped messages or wire acks); status 'failed' releases them for redelivery. */
  ack(acks, { status, error, group, tenant } = {}) {
    const list = Array.isArray(acks) ? acks : [acks];
    return this._run(calls.ack(list.map((m) => calls.ackItem(m, status, error)), { group, tenant }));
  }

  /** Extend a lease (its id, or a message's) to seconds from now. */
  renew(lease, seconds, { tenant } = {}) {
    return this._run(calls.renew(typeof lease === 'string' ? lease : lease.leaseId, seconds, tenant));
  }

  configure(queue, options, extra = {}) { return this._run(calls.configure(queue, options, extra)); }
  queues({ tenant } = {}) { return this._run(calls.queues(tenant)); }
  deleteQueue(queue, { tenant } = {}) { return this._run(calls.deleteQueue(queue, tenant)); }

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
        this.renew(m.leaseId, leaseSeconds, { tenant: o.tenant }).catch(() => {}); // a lost lease shows at commit
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

/** The transaction builder bound to a client. */
export class Tx extends calls.TxBuilder {
  constructor(client, tenant) { super(tenant); this._client = client; }
  /** Send it. success false (rolled back) is a result; a refusal rejects. */
  commit() { return this._client._run(this.call()); }
}

/** KV ops applied in one transaction: q.kv.batch().put(...).incr(...).apply(). */
export class Batch extends calls.BatchBuilder {
  constructor(client, tenant) { super(tenant); this._client = client; }
  apply() { return this._client._run(this.call()); }
}

/** The KV calls. Every write needs ttlSeconds or forever: true; the broker refuses a write with neither. */
export class Kv {
  constructor(c) { this._c = c; }
  get(ns, key, { tenant } = {}) { return this._c._run(calls.kvGet(ns, key, tenant)); }
  getMany(ns, keys, { tenant } = {}) { return this._c._run(calls.oneOp(calls.ops.getMany(ns, keys), tenant)); }
  /** One page: {rows, truncated, nextAfter}. */
  getPrefixPage(ns, prefix, o = {}) { return this._c._run(calls.oneOp(calls.ops.getPrefix(ns, prefix, o), o.tenant)); }
  /** Every row under prefix, page after page (pageSize rows each) until a page is not truncated. */
  async *getPrefix(ns, prefix, { pageSize, keysOnly, tenant } = {}) {
    let after;
    for (;;) {
      const page = await this.getPrefixPage(ns, prefix, { after, limit: pageSize, keysOnly, tenant });
      yield* page.rows ?? [];
      if (!page.truncated || page.nextAfter === undefined || page.nextAfter === null) return;
      after = page.nextAfter;
    }
  }
  put(ns, key, value, o = {}) { return this._c._run(calls.kvPut(ns, key, value, o)); }
  putIfAbsent(ns, key, value, o = {}) { return this._c._run(calls.oneOp(calls.ops.putIfAbsent(ns, key, value, o), o.tenant)); }
  delete(ns, key, o = {}) { return this._c._run(calls.kvDelete(ns, key, o)); }
  incr(ns, key, delta = 1, o = {}) { return this._c._run(calls.oneOp(calls.ops.incr(ns, key, delta, o), o.tenant)); }
  /** Wire ops in one transaction; one result element each. */
  apply(ops, { tenant } = {}) { return this._c._run(calls.kvApply([...ops], tenant)); }
  batch({ tenant } = {}) { return new Batch(this._c, tenant); }
  namespaces({ tenant } = {}) { return this._c._run(calls.kvNamespaces(tenant)); }
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
  delete() { return this._c.deleteQueue(this.name, { tenant: this._tenant }); }
  consume(handler, o = {}) { return this._c.consume(this.name, handler, { partition: this.partition, tenant: this._tenant, ...o }); }
}

