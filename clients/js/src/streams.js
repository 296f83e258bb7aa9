// Streams: stateful pipelines whose state, output and input advance commit in one transaction.
// Stream.from(queue).keyBy(...).windowTumbling(...).aggregate(...).to(sink) builds a pipeline; a StreamWorker
// pops a batch from one source partition under a lease, runs it against that partition's state, and commits
// the state changes, the sink pushes and the batch's ack in one POST /streams/v1/cycle. Every operator's
// meaning, the configuration hash and the cycle are written once in clients/STREAMS.md; this module follows
// it (the Python runtime, queen_client/streams.py, is its twin on the same shared scenarios). The worker keeps
// no state of its own between cycles, so one stopped anywhere resumes from what the broker committed.
import { Conflict, QueenError } from './errors.js';
import { JsonNumber } from './json.js';

const SEP = '\u001f';
const WATERMARK_KEY = '__wm__';

// ---- the configuration hash (clients/STREAMS.md, "The configuration hash") ----------------------------

/** The text the hash is taken of: JSON.stringify writes exactly the bytes STREAMS.md defines. */
export const canonicalConfig = (ops) => JSON.stringify(ops.map((op) => op.config()));

/** Lower-case hex SHA-256 of the UTF-8 bytes of canonicalConfig (synchronous, in browsers too). */
export const configHash = (ops) => sha256Hex(new TextEncoder().encode(canonicalConfig(ops)));

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2]);

/** FIPS 180-4 SHA-256 of bytes, as hex. */
export function sha256Hex(bytes) {
  const len = bytes.length;
  const total = Math.ceil((len + 9) / 64) * 64;
  const m = new Uint8Array(total);
  m.set(bytes);
  m[len] = 0x80;
  const dv = new DataView(m.buffer);
  dv.setUint32(total - 8, Math.floor(len / 0x20000000));
  dv.setUint32(total - 4, (len * 8) >>> 0);
  const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Uint32Array(64);
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  for (let off = 0; off < total; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = dv.getUint32(off + i * 4);
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
      const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    let [a, b, c, d, e, f, g, hh] = h;
    for (let i = 0; i < 64; i++) {
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) >>> 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
      hh = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = b; b = a; a = (t1 + t2) >>> 0;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  return Array.from(h, (x) => x.toString(16).padStart(8, '0')).join('');
}

// ---- helpers ---------------------------------------------------------------------------------------------

/** A number read back from the broker may be a JsonNumber or a BigInt (exact JSON): as a JS number. */
const isNum = (v) => (typeof v === 'number' && Number.isFinite(v)) || typeof v === 'bigint' || v instanceof JsonNumber;
const toNum = (v) => (typeof v === 'number' ? v : Number(v instanceof JsonNumber ? v.text : v));

/** A key as text, the same in every runtime: strings as they are, numbers in ECMAScript form, else JSON. */
export function keyText(v) {
  if (typeof v === 'string') return v;
  if (isNum(v)) return String(toNum(v));
  return JSON.stringify(v === undefined ? null : v);
}

/** Epoch ms as ISO 8601 UTC with milliseconds: window keys carry it. */
const isoMs = (ms) => new Date(ms).toISOString();

function parseTime(v) {
  if (v instanceof Date) return v.getTime();
  if (isNum(v)) return Math.trunc(toNum(v));
  if (typeof v === 'string') {
    const t = Date.parse(v);
    if (Number.isFinite(t)) return t;
  }
  throw new TypeError(`event time ${JSON.stringify(v)} is neither epoch milliseconds, an ISO string nor a Date`);
}

/** A deep copy of a JSON value that keeps JsonNumbers (structuredClone would make them plain objects). */
function clone(v) {
  if (Array.isArray(v)) return v.map(clone);
  if (v === null || typeof v !== 'object' || v instanceof JsonNumber) return v;
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, clone(x)]));
}

// ---- operators -------------------------------------------------------------------------------------------

class Op {
  constructor(kind) { this.kind = kind; }
  config() { return { kind: this.kind }; }
}

class MapOp extends Op {
  constructor(kind, fn) {
    super(kind);
    if (typeof fn !== 'function') throw new TypeError(`${kind} needs a function`);
    this.fn = fn;
  }
  apply(value, ctx) {
    if (this.kind === 'map') return [this.fn(value, ctx)];
    if (this.kind === 'filter') return this.fn(value, ctx) ? [value] : [];
    const out = this.fn(value, ctx);
    return out == null ? [] : [...out];
  }
}

class KeyByOp extends Op {
  constructor(fn) {
    super('keyBy');
    if (typeof fn !== 'function') throw new TypeError('keyBy needs a function');
    this.fn = fn;
  }
}

class ReduceOp extends Op {
  constructor(fn, initial, kind = 'reduce') {
    super(kind);
    if (typeof fn !== 'function') throw new TypeError('reduce needs a function');
    this.fn = fn;
    this.initial = initial;
  }
  config() { return { kind: this.kind, hasInitial: this.initial !== undefined && this.initial !== null }; }
  start() { return this.initial === undefined ? null : clone(this.initial); }
  step(acc, value) { return this.fn(acc, value); }
  result(acc) { return acc; }
}

class AggregateOp extends ReduceOp {
  constructor(fields) {
    const names = Object.keys(fields ?? {});
    if (names.length === 0) throw new TypeError('aggregate needs at least one field');
    for (const n of names) if (typeof fields[n] !== 'function') throw new TypeError(`aggregate field ${n} must be a function`);
    const init = {};
    for (const n of names) {
      if (n === 'min' || n === 'max') init[n] = null;
      else if (n === 'avg') Object.assign(init, { __avg_sum: 0, __avg_count: 0, avg: 0 });
      else init[n] = 0;
    }
    super((acc, v) => this.fold(acc, v), init, 'aggregate');
    this.fields = { ...fields };
  }
  config() { return { kind: this.kind, fields: Object.keys(this.fields) }; }
  fold(acc, value) {
    const nxt = acc && typeof acc === 'object' ? { ...acc } : this.start();
    for (const [name, ex] of Object.entries(this.fields)) {
      const v = ex(value);
      const n = isNum(v) ? toNum(v) : null;
      const cur = nxt[name] === undefined || nxt[name] === null ? null : toNum(nxt[name]);
      if (name === 'count') nxt.count = (cur ?? 0) + (n ?? 1);
      else if (name === 'min' || name === 'max') {
        if (n !== null) nxt[name] = cur === null ? n : (name === 'min' ? Math.min(cur, n) : Math.max(cur, n));
      } else if (name === 'avg') {
        if (n !== null) {
          nxt.__avg_sum = toNum(nxt.__avg_sum ?? 0) + n;
          nxt.__avg_count = toNum(nxt.__avg_count ?? 0) + 1;
          nxt.avg = nxt.__avg_sum / nxt.__avg_count;
        }
      } else nxt[name] = (cur ?? 0) + (n ?? 0);
    }
    return nxt;
  }
  result(acc) {
    // The running sums behind avg are state, not output.
    if (!acc || typeof acc !== 'object') return acc;
    return Object.fromEntries(Object.entries(acc).filter(([k]) => !k.startsWith('__')));
  }
}

const seconds = (v, what) => {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new RangeError(`${what} is seconds >= 0`);
  return v;
};

class WindowOp extends Op {
  constructor(name, short, shape, { gracePeriod = 0, eventTime, allowedLateness = 0 } = {}) {
    super('window-' + name);
    this.name = name;
    this.shape = shape;
    this.gracePeriod = seconds(gracePeriod, 'gracePeriod');
    this.allowedLateness = seconds(allowedLateness, 'allowedLateness');
    this.graceMs = Math.round(gracePeriod * 1000);
    this.latenessMs = Math.round(allowedLateness * 1000);
    if (eventTime !== undefined && eventTime !== null && typeof eventTime !== 'function') throw new TypeError('eventTime is a function');
    this.eventTime = eventTime ?? null;
    /** the prefix of this window's state keys: its short name and shape (tumb:60, slide:60:10) */
    this.tag = short + ':' + Object.values(shape).map(keyText).join(':');
  }
  config() {
    // idleFlushMs is 0: windows close as the partition's time advances, never on a timer.
    return { kind: this.kind, ...this.shape, gracePeriod: this.gracePeriod, idleFlushMs: 0,
      eventTime: this.eventTime !== null, allowedLateness: this.allowedLateness, onLate: 'drop' };
  }
  timeOf(value, msg) { return parseTime(this.eventTime ? this.eventTime(value) : msg.createdAt); }
}

/** Tumbling, sliding and cron: windows that do not depend on the other events. */
class FixedWindow extends WindowOp {
  constructor(name, short, shape, size, slide, o, offsetMs = 0) {
    super(name, short, shape, o);
    if (!(size > 0) || !(slide > 0)) throw new RangeError('window sizes are seconds > 0');
    this.sizeMs = Math.round(size * 1000);
    this.slideMs = Math.round(slide * 1000);
    this.offsetMs = offsetMs; // window starts are offsetMs plus a multiple of the slide
    if (this.slideMs < 1) throw new RangeError("a window's size and slide are 1 ms at least");
    if (this.sizeMs % this.slideMs) throw new RangeError("a sliding window's size must be a whole multiple of its slide");
  }
  assign(ts) {
    const last = Math.floor((ts - this.offsetMs) / this.slideMs) * this.slideMs + this.offsetMs;
    const out = [];
    for (let s = last - this.sizeMs + this.slideMs; s <= last; s += this.slideMs) out.push([s, s + this.sizeMs]);
    return out;
  }
}

const EVERY = { second: 1, minute: 60, hour: 3600, day: 86400, week: 7 * 86400 };

class SessionWindow extends WindowOp {
  constructor(gap, o) {
    super('session', 'sess', { gap }, o);
    if (typeof gap !== 'number' || !(gap > 0)) throw new RangeError("a session's gap is seconds > 0");
    this.gapMs = Math.round(gap * 1000);
    if (this.gapMs < 1) throw new RangeError("a session's gap is 1 ms at least");
  }
}

class GateOp extends Op {
  constructor(fn) {
    super('gate');
    if (typeof fn !== 'function') throw new TypeError('gate needs a function');
    this.fn = fn;
  }
  allows(value, ctx) {
    let out = this.fn(value, ctx);
    if (out && typeof out === 'object') out = out.allow;
    if (typeof out !== 'boolean') throw new TypeError('a gate returns a boolean or {allow: boolean}');
    return out;
  }
}

class SinkOp extends Op {
  constructor(queue, partition) {
    super('sink');
    if (!queue || typeof queue !== 'string') throw new TypeError('to() needs a queue name');
    this.queue = queue;
    this.partition = partition ?? null;
  }
  config() { return { kind: this.kind, queue: this.queue }; }
  item(value, sourcePartition) {
    const p = this.partition;
    const partition = typeof p === 'function' ? keyText(p(value)) : (p ?? sourcePartition);
    return { queue: this.queue, partition, payload: value };
  }
}

class ForeachOp extends Op {
  constructor(fn) {
    super('foreach');
    if (typeof fn !== 'function') throw new TypeError('foreach needs a function');
    this.fn = fn;
  }
}

/**
 * A gate function: a token bucket per key, `capacity` tokens refilled at `refillPerSec` by the cycle's
 * clock; a message costing more than the tokens left is denied (and so are the ones after it).
 */
export function tokenBucketGate(capacity, refillPerSec, cost = () => 1) {
  if (!(typeof capacity === 'number' && capacity > 0) || !(typeof refillPerSec === 'number' && refillPerSec > 0)) {
    throw new RangeError('tokenBucketGate: capacity and refillPerSec are numbers > 0');
  }
  return (value, ctx) => {
    const s = ctx.state;
    const now = ctx.streamTimeMs;
    let tokens = isNum(s.tokens) ? toNum(s.tokens) : capacity;
    const last = isNum(s.lastRefillAt) ? toNum(s.lastRefillAt) : now;
    tokens = Math.min(capacity, tokens + Math.max(0, now - last) / 1000 * refillPerSec);
    s.lastRefillAt = now;
    let c = cost(value);
    c = isNum(c) && toNum(c) >= 0 ? toNum(c) : 1;
    if (tokens < c) { s.tokens = tokens; return false; }
    s.tokens = tokens - c;
    return true;
  };
}

// ---- the builder -----------------------------------------------------------------------------------------

/** An immutable pipeline: each method returns a new Stream with one operator more. */
export class Stream {
  constructor(source, operators = []) {
    if (!source || typeof source !== 'string') throw new TypeError('a stream needs a source queue');
    this.source = source;
    this.operators = Object.freeze([...operators]);
  }

  /** The stream of the messages of `queue`. */
  static from(queue) { return new Stream(queue); }

  _with(op) { return new Stream(this.source, [...this.operators, op]); }

  /** Each value becomes fn(value, ctx). */
  map(fn) { return this._with(new MapOp('map', fn)); }
  /** Only the values for which fn(value, ctx) is truthy go on. */
  filter(fn) { return this._with(new MapOp('filter', fn)); }
  /** Each value becomes the values of the list fn(value, ctx) (none, one or many). */
  flatMap(fn) { return this._with(new MapOp('flatMap', fn)); }
  /** The key of each value is the text of fn(value) (default: the source partition's name). */
  keyBy(fn) { return this._with(new KeyByOp(fn)); }
  /** Consecutive windows of `seconds`, per key; options {gracePeriod, eventTime, allowedLateness}. */
  windowTumbling(secs, o) { return this._with(new FixedWindow('tumbling', 'tumb', { seconds: secs }, secs, secs, o)); }
  /** Windows of `size` seconds starting every `slide` seconds, per key. */
  windowSliding(size, slide, o) { return this._with(new FixedWindow('sliding', 'slide', { size, slide }, size, slide, o)); }
  /** Windows of one calendar unit, UTC: `every` is second, minute, hour, day or week (from Monday). */
  windowCron(every, o) {
    if (!(every in EVERY)) throw new RangeError('windowCron: every is second, minute, hour, day or week');
    // Weeks start on Monday 00:00 UTC: 1970-01-01 was a Thursday, 4 days after one.
    return this._with(new FixedWindow('cron', 'cron', { every }, EVERY[every], EVERY[every], o,
      every === 'week' ? 4 * 86400 * 1000 : 0));
  }
  /** Per key, a window that lasts while events come at most `gap` seconds apart. */
  windowSession(gap, o) { return this._with(new SessionWindow(gap, o)); }
  /** Fold values per key (per window after a window): acc = fn(acc, value), from a copy of initial. */
  reduce(fn, initial) { return this._with(new ReduceOp(fn, initial)); }
  /** A reduce into named fields: count, sum, min, max, avg, or any other name (summed). */
  aggregate(fields) { return this._with(new AggregateOp(fields)); }
  /** Per message in order: allowed goes on; the first denied one stops the batch there. */
  gate(fn) { return this._with(new GateOp(fn)); }
  /** Push each value to `queue` (partition: the source's, a name, or fn(value)), in the cycle. */
  to(queue, { partition } = {}) { return this._with(new SinkOp(queue, partition)); }
  /** Call fn(value, ctx) for each value before the cycle commits (at least once). */
  foreach(fn) { return this._with(new ForeachOp(fn)); }

  canonicalConfig() { return canonicalConfig(this.operators); }
  configHash() { return configHash(this.operators); }

  /** A worker running this pipeline as the query `name` (StreamWorker's options). */
  worker(client, name, options) { return new StreamWorker(this, client, name, options); }
}

/** The pipeline's order checked once (STREAMS.md, "The pipeline"); any other order is refused. */
function compile(ops) {
  const p = { pre: [], keyBy: null, window: null, reducer: null, gate: null, post: [], sink: null, foreach: null };
  ops.forEach((op, i) => {
    if (op instanceof SinkOp || op instanceof ForeachOp) {
      if (i !== ops.length - 1) throw new TypeError(`${op.kind} must end the stream`);
      if (op instanceof SinkOp) p.sink = op; else p.foreach = op;
    } else if (op instanceof MapOp) {
      if (p.window && !p.reducer) throw new TypeError(`${op.kind} between a window and its reduce: put it before the window`);
      (p.reducer || p.gate ? p.post : p.pre).push(op);
    } else if (op instanceof KeyByOp) {
      if (p.keyBy || p.window || p.reducer || p.gate) throw new TypeError('one keyBy, before any window, reduce or gate');
      p.keyBy = op;
      p.pre.push(op);
    } else if (op instanceof WindowOp) {
      if (p.window || p.reducer || p.gate) throw new TypeError('one window, before its reduce and without a gate');
      p.window = op;
    } else if (op instanceof ReduceOp) {
      if (p.reducer || p.gate) throw new TypeError('one reduce or aggregate, without a gate');
      p.reducer = op;
    } else if (op instanceof GateOp) {
      if (p.gate || p.window || p.reducer) throw new TypeError('one gate, without window or reduce');
      p.gate = op;
    }
  });
  if (p.window && !p.reducer) throw new TypeError('a window needs a reduce or aggregate after it');
  return p;
}

/** One partition's state, read once per cycle, written as ops. */
class Shard {
  constructor(rows) { this.loaded = rows; this.live = new Map(rows); this.touched = new Set(); }
  get(k) { return this.live.get(k); }
  put(k, v) { this.live.set(k, v); this.touched.add(k); }
  delete(k) { this.live.delete(k); this.touched.add(k); }
  ops() {
    const out = [];
    for (const k of this.touched) {
      if (this.live.has(k)) out.push({ type: 'upsert', key: k, value: this.live.get(k) });
      else if (this.loaded.has(k)) out.push({ type: 'delete', key: k });
    }
    return out;
  }
}

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const emit = (key, value, ctx) => ({ key, value, ctx });

// ---- the worker ------------------------------------------------------------------------------------------

/**
 * Runs a Stream as the query `name`: pop a batch from one source partition (`batch` messages, consumer
 * group `group`, default `streams.<name>`), run it, commit one cycle; repeat.
 * Options: batch (100), group, leaseSeconds (the source lease: a gate's denied tail waits that long),
 * waitMs (a pop's long poll, 1000), reset (consent to deleting the state of a query registered with another
 * pipeline; otherwise 409 streams_config_mismatch), tenant, clock (the gate's clock, epoch ms).
 */
export class StreamWorker {
  constructor(stream, client, name, { batch = 100, group, leaseSeconds, waitMs = 1000, reset = false, tenant,
    clock = Date.now } = {}) {
    if (!name) throw new TypeError('a stream worker needs a query name');
    this.stream = stream;
    this.client = client;
    this.name = name;
    this.plan = compile(stream.operators);
    this.hash = stream.configHash();
    Object.assign(this, { batch, leaseSeconds, waitMs, reset, tenant, clock });
    this.group = group ?? `streams.${name}`;
    this.queryId = null;
    /** source partition name -> id, for each partition this worker has run a cycle on */
    this.partitions = new Map();
    this.stats = { cycles: 0, messages: 0, pushed: 0, stateOps: 0, late: 0, denied: 0, leaseLost: 0, errors: 0 };
  }

  /** Register (or resume) the query; the first step does it when not done. */
  async register(o = {}) {
    const r = await this.client.streams.register({ name: this.name, source_queue: this.stream.source,
      sink_queue: this.plan.sink ? this.plan.sink.queue : null, config_hash: this.hash, reset: this.reset },
    { tenant: this.tenant, signal: o.signal });
    this.queryId = String(r.query_id);
    return r;
  }

  /** Cycle until `signal` aborts; an error is counted and the batch left to its lease (it is popped again). */
  async run({ signal } = {}) {
    while (!signal?.aborted) {
      try {
        await this.step({ signal });
      } catch (e) {
        if (!(e instanceof QueenError)) throw e;
        if (signal?.aborted) break;
        this.stats.errors++;
        await new Promise((resolve) => {
          const t = setTimeout(done, 500);
          function done() { clearTimeout(t); signal?.removeEventListener('abort', done); resolve(); }
          signal?.addEventListener('abort', done, { once: true });
        });
      }
    }
    return this.stats;
  }

  /** Cycle until a pop finds nothing (tests, batch jobs). */
  async drain({ signal, maxCycles = 100000 } = {}) {
    for (let i = 0; i < maxCycles && !signal?.aborted; i++) if ((await this.step({ signal })) === 0) break;
    return this.stats;
  }

  /** The committed state of a source partition (by name) this worker has seen: {key: value}. */
  state(partition, o = {}) {
    const pid = this.partitions.get(partition);
    if (pid === undefined) throw new TypeError(`no cycle has run on partition ${partition}`);
    return this.readState(pid, o).then((m) => Object.fromEntries(m));
  }

  /** Every state row of a partition (by id), as a Map. */
  async readState(partitionId, o = {}) {
    const r = await this.client.streams.stateGet({ query_id: this.queryId, partition_id: partitionId },
      { tenant: this.tenant, signal: o.signal });
    return new Map((r?.rows ?? []).map((row) => [row.key, row.value]));
  }

  /** Pop one batch and commit its cycle. Resolves to the messages popped (0: none came). */
  async step({ signal } = {}) {
    if (this.queryId === null) await this.register({ signal });
    const res = await this.client.pop(this.stream.source, { group: this.group, batch: this.batch,
      wait: this.waitMs > 0, timeoutMs: this.waitMs, leaseSeconds: this.leaseSeconds, tenant: this.tenant, signal });
    const msgs = res?.messages ?? [];
    if (msgs.length === 0) return 0;
    const pid = String(res.partitionId ?? msgs[0].partitionId);
    const rows = this.plan.reducer || this.plan.gate ? await this.readState(pid, { signal }) : new Map();
    const pname = msgs[0].partition ?? res.partition ?? '';
    const body = this.compute(msgs, pid, pname, res.leaseId ?? msgs[0].leaseId, rows);
    if (body !== null) {
      try {
        await this.client.streams.cycle(body, { tenant: this.tenant, signal });
      } catch (e) {
        // 409 streams_lease_lost: another worker has the batch now (or this cycle committed and its answer
        // was lost); nothing of this work was written; the next pop starts from the committed cursor.
        if (!(e instanceof Conflict) || e.reason !== 'streams_lease_lost') throw e;
        this.stats.leaseLost++;
        return msgs.length;
      }
      this.stats.cycles++;
      this.stats.messages += body.ack.count;
      this.stats.denied += msgs.length - body.ack.count;
      this.stats.pushed += body.push_items.length;
      this.stats.stateOps += body.state_ops.length;
    }
    return msgs.length;
  }

  /** The cycle of one batch given its partition's state (no I/O); null when nothing is to be committed. */
  compute(msgs, pid, pname, leaseId, rows) {
    this.partitions.set(pname, pid);
    const plan = this.plan;
    const shard = new Shard(rows);
    const base = { partition: pname, partitionId: pid };
    // Each message becomes zero or more [index of the source message, key, value] envelopes, through the
    // operators before the stateful stage in chain order.
    let envs = msgs.map((m, i) => [i, pname, m.data ?? m.payload ?? null]);
    for (const op of plan.pre) {
      if (op instanceof KeyByOp) envs = envs.map(([i, , v]) => [i, keyText(op.fn(v)), v]);
      else envs = envs.flatMap(([i, k, v]) => op.apply(v, { ...base, key: k }).map((o) => [i, k, o]));
    }
    let allowed = msgs.length;
    let emits;
    if (plan.gate) [emits, allowed] = this.runGate(plan.gate, envs, msgs, shard, pid, pname);
    else if (plan.window) emits = this.runWindow(plan.window, plan.reducer, envs, msgs, shard, base);
    else if (plan.reducer) emits = this.runReduce(plan.reducer, envs, shard, base);
    else emits = envs.map(([, k, v]) => emit(k, v, { ...base, key: k }));
    for (const op of plan.post) emits = emits.flatMap((e) => op.apply(e.value, e.ctx).map((o) => emit(e.key, o, e.ctx)));
    if (allowed === 0) {
      // The first message was denied: nothing to commit; the batch stays leased until its lease ends and
      // comes back in order.
      this.stats.denied += msgs.length;
      return null;
    }
    if (plan.foreach) for (const e of emits) plan.foreach.fn(e.value, e.ctx);
    const last = msgs[allowed - 1];
    return {
      query_id: this.queryId, partition_id: pid, consumer_group: this.group,
      state_ops: shard.ops(),
      push_items: plan.sink ? emits.map((e) => plan.sink.item(e.value, pname)) : [],
      ack: { transactionId: last.transactionId, leaseId, status: 'completed', count: allowed },
      // A gate's denied tail stays leased to this worker (not re-popped at once, in a busy loop); a whole
      // batch ends its lease with the ack anyway.
      release_lease: allowed === msgs.length,
    };
  }

  runReduce(red, envs, shard, base) {
    return envs.map(([, key, v]) => {
      const sk = red.kind + SEP + key;
      const row = shard.get(sk);
      const acc = red.step(isObj(row) ? row.acc : red.start(), v);
      shard.put(sk, { acc });
      return emit(key, red.result(acc), { ...base, key });
    });
  }

  runWindow(win, red, envs, msgs, shard, base) {
    const out = [];
    const wmRow = shard.get(WATERMARK_KEY);
    let wm = isObj(wmRow) ? toNum(wmRow.eventTimeMs) : null;
    for (const [i, key, v] of envs) {
      const ts = win.timeOf(v, msgs[i]);
      if (win instanceof SessionWindow) {
        if (!this.sessionAdd(win, red, shard, key, v, ts, wm, out, base)) this.stats.late++;
      } else {
        for (const [s, e] of win.assign(ts)) {
          if (wm !== null && e + win.graceMs <= wm) { this.stats.late++; continue; } // its window closed already
          const sk = win.tag + SEP + isoMs(s) + SEP + key;
          const row = shard.get(sk);
          const acc = red.step(isObj(row) ? row.acc : red.start(), v);
          shard.put(sk, { acc, windowStart: s, windowEnd: e });
        }
      }
      const mark = ts - win.latenessMs;
      if (wm === null || mark > wm) {
        wm = mark;
        shard.put(WATERMARK_KEY, { eventTimeMs: wm });
        out.push(...this.close(win, red, shard, wm, base));
      }
    }
    return out;
  }

  close(win, red, shard, wm, base) {
    const prefix = win.tag + SEP;
    const ripe = [];
    for (const [sk, row] of shard.live) {
      if (!sk.startsWith(prefix) || !isObj(row)) continue;
      const end = win instanceof SessionWindow ? toNum(row.lastEventTime) + win.gapMs : toNum(row.windowEnd);
      if (end + win.graceMs <= wm) {
        const start = toNum('windowStart' in row ? row.windowStart : row.sessionStart);
        ripe.push({ start, key: sk.slice(sk.lastIndexOf(SEP) + 1), sk, row, end });
      }
    }
    // In order of (start, key); keys compare by UTF-16 code units here and by code points in Python,
    // which agree for the keys the scenarios use (no characters beyond the BMP).
    ripe.sort((a, b) => a.start - b.start || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return ripe.map(({ start, key, sk, row, end }) => {
      shard.delete(sk);
      return emit(key, red.result(row.acc), { ...base, key, windowStart: start, windowEnd: end, windowKey: isoMs(start) });
    });
  }

  sessionAdd(win, red, shard, key, v, ts, wm, out, base) {
    const sk = win.tag + SEP + 'open' + SEP + key;
    let row = shard.get(sk);
    if (isObj(row) && ts > toNum(row.lastEventTime) + win.gapMs) {
      // The gap has passed: that session ends, this event starts the next.
      const start = toNum(row.sessionStart);
      const end = toNum(row.lastEventTime) + win.gapMs;
      out.push(emit(key, red.result(row.acc), { ...base, key, windowStart: start, windowEnd: end, windowKey: isoMs(start) }));
      shard.delete(sk);
      row = undefined;
    }
    if (!isObj(row)) {
      if (wm !== null && ts + win.gapMs + win.graceMs <= wm) return false; // a session of this event alone would have closed
      row = { acc: red.start(), sessionStart: ts, lastEventTime: ts };
    }
    const acc = red.step(row.acc, v);
    shard.put(sk, { acc, sessionStart: Math.min(toNum(row.sessionStart), ts), lastEventTime: Math.max(toNum(row.lastEventTime), ts) });
    return true;
  }

  runGate(gate, envs, msgs, shard, pid, pname) {
    const now = Math.trunc(this.clock());
    const out = [];
    let i = 0;
    while (i < envs.length) {
      // One source message's values pass together or not at all: the ack is per message.
      const idx = envs[i][0];
      const group = [];
      for (let j = i; j < envs.length && envs[j][0] === idx; j++) group.push(envs[j]);
      const staged = new Map();
      for (const [, key, v] of group) {
        const sk = 'gate' + SEP + key;
        const st = clone(staged.has(sk) ? staged.get(sk) : (shard.get(sk) ?? {}));
        if (!gate.allows(v, { state: st, streamTimeMs: now, key, partition: pname, partitionId: pid })) {
          return [out, idx]; // denied: its state changes go with it; the messages before it pass
        }
        staged.set(sk, st);
      }
      for (const [sk, st] of staged) shard.put(sk, st);
      for (const [, k, v] of group) out.push(emit(k, v, { partition: pname, partitionId: pid, key: k }));
      i += group.length;
    }
    return [out, msgs.length];
  }
}
