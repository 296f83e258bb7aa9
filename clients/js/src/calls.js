// Each call shaped once: method, path, body, whether a repeat is safe, and how to read its 2xx answer.
// client.js sends them. The retry rules are the conformance README's: a refused connection sent nothing
// and is retried for every call; a 429, a 503, a timeout or a broken connection only where `safe`.
import { BadArgument, PreconditionFailed, QueenBadResponse } from './errors.js';

/**
 * @typedef {{method: string, path: string, body?: any, hasBody: boolean, safe: boolean,
 *   tenant?: string, extraMs: number, signal?: AbortSignal, finish: (status: number, body: any) => any}} Call
 */

/** @returns {Call} */
function call(method, path, finish, { body, hasBody = body !== undefined, safe = false, tenant, extraMs = 0 } = {}) {
  return { method, path, finish, body, hasBody, safe, tenant, extraMs };
}

/** A push item as the wire has it: `data` (the reference client's name) is taken for `payload`. */
export function pushItem(it) {
  if (it === null || typeof it !== 'object' || !('data' in it)) return it;
  if ('payload' in it) throw new BadArgument('a push item has payload or data, not both');
  const { data, ...rest } = it;
  return { ...rest, payload: data };
}

const bad = (what, got) => new QueenBadResponse(200, 'bad_response', 'bad_response', `${what} answered ${got === null ? 'null' : typeof got}`);
const object = (b, what) => { if (b === null || typeof b !== 'object' || Array.isArray(b)) throw bad(what, b); return b; };
const array = (b, what) => { if (!Array.isArray(b)) throw bad(what, b); return b; };
const isVerdict = (b) => b !== null && typeof b === 'object' && b.ok === false && b.reason === 'kv_precondition';

const kvSingle = (status, body) => {
  if (isVerdict(body)) throw new PreconditionFailed(body);
  return object(body, 'a kv call');
};
const kvResults = (status, body) => {
  if (isVerdict(body)) throw new PreconditionFailed(body);
  return array(object(body, 'a kv batch').results, "a kv batch's results");
};
const kvOne = (status, body) => {
  const r = kvResults(status, body);
  if (r.length === 0) throw new QueenBadResponse(200, 'bad_response', 'bad_response', 'a one-op batch answered no element');
  return object(r[0], 'a kv op');
};
const plain = (status, body) => body;

/** A path segment escaped once: '/' and '%' stay inside the segment. */
export const pct = (s) => encodeURIComponent(String(s)).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
const keyPath = (ns, key) => `/api/v1/kv/${pct(ns)}/${pct(key)}`;

const EXPIRY_RULE = 'expiry: give ttl (seconds > 0) or forever';

/** Exactly one expiry, checked before anything is sent (clients/API.md, "Expiry"): neither, both, or a
 * ttlSeconds that is not a whole number > 0 would store a key for a time nobody chose. */
function expiry(op, o = {}) {
  const ttl = o.ttlSeconds;
  const hasTtl = ttl !== undefined && ttl !== null;
  if (o.forever === true && !hasTtl) { op.forever = true; return op; }
  if (o.forever || !hasTtl) throw new BadArgument(EXPIRY_RULE + (o.forever ? ' (not both)' : ''));
  if (!(typeof ttl === 'bigint' || Number.isInteger(ttl)) || ttl <= 0) {
    throw new BadArgument(`${EXPIRY_RULE} (ttlSeconds ${String(ttl)})`);
  }
  op.ttlSeconds = ttl;
  return op;
}

/** Reads, and puts and deletes without expect: the same final state however often they run. */
export const kvOpRepeatable = (op) =>
  op !== null && typeof op === 'object' &&
  (['get', 'getMany', 'getPrefix'].includes(op.op) || (['put', 'delete'].includes(op.op) && op.expect === undefined));

export const ops = {
  put(ns, key, value, o = {}) {
    const op = expiry({ op: 'put', ns, key, value }, o);
    if (o.expect !== undefined && o.expect !== null) op.expect = o.expect;
    if (o.required) op.required = true;
    return op;
  },
  putIfAbsent(ns, key, value, o = {}) {
    const op = expiry({ op: 'putIfAbsent', ns, key, value }, o);
    if (o.required) op.required = true;
    return op;
  },
  delete(ns, key, o = {}) {
    const op = { op: 'delete', ns, key };
    if (o.expect !== undefined && o.expect !== null) op.expect = o.expect;
    if (o.required) op.required = true;
    return op;
  },
  incr(ns, key, delta = 1, o = {}) {
    const op = { op: 'incr', ns, key, delta };
    if (o.min !== undefined && o.min !== null) op.min = o.min;
    if (o.max !== undefined && o.max !== null) op.max = o.max;
    expiry(op, o);
    if (o.required) op.required = true;
    return op;
  },
  get: (ns, key) => ({ op: 'get', ns, key }),
  getMany: (ns, keys) => ({ op: 'getMany', ns, keys: [...keys] }),
  getPrefix(ns, prefix, o = {}) {
    const op = { op: 'getPrefix', ns, prefix };
    if (o.after !== undefined && o.after !== null) op.after = o.after;
    if (o.limit) op.limit = o.limit;
    if (o.keysOnly) op.keysOnly = true;
    return op;
  },
};

export const health = () => call('GET', '/health', (s, b) => {
  if (typeof object(b, 'health').version !== 'string') throw new QueenBadResponse(s, 'bad_response', 'bad_response', 'the health answer has no version');
  return b;
}, { safe: true });

export const kvGet = (ns, key, tenant) => call('GET', keyPath(ns, key), kvSingle, { safe: true, tenant });

export function kvPut(ns, key, value, o = {}) {
  const body = expiry({ value }, o);
  if (o.expect !== undefined && o.expect !== null) body.expect = o.expect;
  if (o.required) body.required = true;
  return call('PUT', keyPath(ns, key), kvSingle, { body, safe: body.expect === undefined, tenant: o.tenant });
}

export function kvDelete(ns, key, o = {}) {
  const body = {};
  if (o.expect !== undefined && o.expect !== null) body.expect = o.expect;
  if (o.required) body.required = true;
  const has = Object.keys(body).length > 0;
  return call('DELETE', keyPath(ns, key), kvSingle, { body: has ? body : undefined, safe: body.expect === undefined, tenant: o.tenant });
}

export const oneOp = (op, tenant) => call('POST', '/api/v1/kv', kvOne, { body: [op], safe: kvOpRepeatable(op), tenant });

export const kvApply = (list, tenant) =>
  call('POST', '/api/v1/kv', kvResults, { body: list, safe: list.every(kvOpRepeatable), tenant });

export const kvNamespaces = (tenant) =>
  call('GET', '/api/v1/resources/kv/namespaces', (s, b) => object(b, 'namespaces').namespaces ?? [], { safe: true, tenant });

export function push(items, tenant) {
  items = items.map(pushItem);
  // A repeat is answered "duplicate" only when every item names itself.
  const safe = items.length > 0 && items.every((i) => i && typeof i.transactionId === 'string' && i.transactionId !== '');
  return call('POST', '/api/v1/push', (s, b) => array(b, 'push'), { body: { items }, safe, tenant });
}

/** A pop body, each message carrying the lease and partition that settle it; null when none. */
function popped(status, body) {
  if (status === 204 || body === undefined || body === null) return null;
  object(body, 'pop');
  for (const m of array(body.messages ?? [], "pop's messages")) {
    if (m.leaseId === undefined && body.leaseId !== undefined) m.leaseId = body.leaseId;
    if (m.partitionId === undefined && body.partitionId !== undefined) m.partitionId = body.partitionId;
  }
  return body;
}

export function pop(queue, o = {}) {
  let path = `/api/v1/pop/queue/${pct(queue)}`;
  if (o.partition !== undefined && o.partition !== null) path += `/partition/${pct(o.partition)}`;
  const q = [];
  if (o.group !== undefined && o.group !== null) q.push(`consumerGroup=${pct(o.group)}`);
  if (o.batch) q.push(`batch=${o.batch}`);
  if (o.leaseSeconds) q.push(`leaseSeconds=${o.leaseSeconds}`);
  if (o.autoAck) q.push('autoAck=true');
  let waitMs = 0;
  if (o.wait) {
    waitMs = o.timeoutMs > 0 ? o.timeoutMs : 30000;
    q.push('wait=true', `timeout=${waitMs}`);
  }
  if (q.length) path += '?' + q.join('&');
  // Never repeated on a lost answer: what it leased comes back when the lease expires.
  return call('GET', path, popped, { safe: false, tenant: o.tenant, extraMs: waitMs });
}

/** A message (from pop) or a wire ack, as the wire ack naming it. */
export function ackItem(m, status, error) {
  const item = { transactionId: m.transactionId, partitionId: m.partitionId };
  if (m.leaseId !== undefined && m.leaseId !== null) item.leaseId = m.leaseId;
  const st = status ?? m.status;
  if (st !== undefined) item.status = st;
  const er = error ?? m.error;
  if (er !== undefined) item.error = er;
  return item;
}

export function ack(acks, o = {}) {
  const body = { acknowledgments: acks };
  if (o.group !== undefined && o.group !== null) body.consumerGroup = o.group;
  // Each ack names its message by transactionId: a repeat settles nothing twice.
  return call('POST', '/api/v1/ack/batch', (s, b) => array(b, 'ack'), { body, safe: true, tenant: o.tenant });
}

export const leaseExtend = (leaseId, seconds, tenant) =>
  call('POST', `/api/v1/lease/${pct(leaseId)}/extend`, (s, b) => object(b, 'leaseExtend'), { body: { seconds }, safe: true, tenant });

export function configure(queue, options, o = {}) {
  const body = { queue };
  if (options !== undefined && options !== null) body.options = options;
  if (o.namespace !== undefined) body.namespace = o.namespace;
  if (o.task !== undefined) body.task = o.task;
  return call('POST', '/api/v1/configure', plain, { body, safe: true, tenant: o.tenant });
}

export const queues = (tenant) =>
  call('GET', '/api/v1/resources/queues', (s, b) => object(b, 'queues').queues ?? [], { safe: true, tenant });

export const queueDelete = (queue, tenant) =>
  call('DELETE', `/api/v1/resources/queues/${pct(queue)}`, plain, { safe: true, tenant });

// A bundle naming a message (an ack, or an item with a transactionId) rolls back whole when repeated
// after it committed, so nothing applies twice; one naming none is never repeated.
export const transaction = (bundle, carriesId, tenant) =>
  call('POST', '/api/v1/transaction', (s, b) => object(b, 'transaction'), { body: bundle, safe: carriesId, tenant });

/** Collects a transaction: operations in the order added (consecutive pushes share one push operation), kv ops, required leases. */
export class TxBuilder {
  constructor(tenant) {
    this._ops = [];
    this._kv = [];
    this._leases = [];
    this._openPush = false;
    this._carriesId = false;
    this._tenant = tenant;
  }

  /** Settle a popped message (status undefined: completed). */
  ack(message, { status, group } = {}) {
    const item = ackItem(message);
    const op = { type: 'ack', transactionId: item.transactionId, partitionId: item.partitionId };
    if (item.leaseId !== undefined) op.leaseId = item.leaseId;
    const st = status ?? item.status;
    if (st !== undefined) op.status = st;
    const g = group ?? item.consumerGroup;
    if (g !== undefined && g !== null) op.consumerGroup = g;
    this._ops.push(op);
    this._openPush = false;
    this._carriesId = true;
    return this;
  }

  /** Push items ({payload, transactionId?, partition?}) to queue. */
  push(queue, items, { partition } = {}) {
    if (!this._openPush) {
      this._ops.push({ type: 'push', items: [] });
      this._openPush = true;
    }
    const target = this._ops[this._ops.length - 1].items;
    for (const raw of items) {
      const it = pushItem(raw);
      const item = { queue };
      const p = it.partition ?? partition;
      if (p !== undefined && p !== null) item.partition = p;
      item.payload = it.payload === undefined ? null : it.payload;
      if (it.transactionId !== undefined && it.transactionId !== null) {
        item.transactionId = it.transactionId;
        this._carriesId = true;
      }
      target.push(item);
    }
    return this;
  }

  /** A kv op as the wire has it ({op: 'put', ns, key, ...}). */
  kv(op) { this._kv.push({ ...op }); return this; }
  kvPut(ns, key, value, o) { return this.kv(ops.put(ns, key, value, o)); }
  kvPutIfAbsent(ns, key, value, o) { return this.kv(ops.putIfAbsent(ns, key, value, o)); }
  kvDelete(ns, key, o) { return this.kv(ops.delete(ns, key, o)); }
  kvIncr(ns, key, delta, o) { return this.kv(ops.incr(ns, key, delta, o)); }

  /** Roll back unless this lease (an id, or a message's) is still held when the transaction runs. */
  requireLease(lease) {
    this._leases.push(typeof lease === 'string' ? lease : lease.leaseId);
    return this;
  }

  /** The wire body. */
  bundle() {
    const b = {};
    if (this._ops.length) b.operations = this._ops;
    if (this._kv.length) b.kv = this._kv;
    if (this._leases.length) b.requiredLeases = this._leases;
    return b;
  }

  call() { return transaction(this.bundle(), this._carriesId, this._tenant); }
}

/** Collects kv ops for one atomic batch. */
export class BatchBuilder {
  constructor(tenant) { this.ops = []; this._tenant = tenant; }
  op(op) { this.ops.push({ ...op }); return this; }
  get(ns, key) { return this.op(ops.get(ns, key)); }
  getMany(ns, keys) { return this.op(ops.getMany(ns, keys)); }
  put(ns, key, value, o) { return this.op(ops.put(ns, key, value, o)); }
  putIfAbsent(ns, key, value, o) { return this.op(ops.putIfAbsent(ns, key, value, o)); }
  delete(ns, key, o) { return this.op(ops.delete(ns, key, o)); }
  incr(ns, key, delta, o) { return this.op(ops.incr(ns, key, delta, o)); }
  call() { return kvApply(this.ops, this._tenant); }
}

// The three streams routes (clients/STREAMS.md; bodies and answers as docs/openapi.yaml has them).
// Registering the same name and hash resumes, and a state read writes nothing: both are safe to repeat.
export const streamsRegister = (body, tenant) =>
  call('POST', '/streams/v1/queries', plain, { body, safe: true, tenant });
export const streamsStateGet = (body, tenant) =>
  call('POST', '/streams/v1/state/get', plain, { body, safe: true, tenant });
// Never repeated: a cycle whose answer was lost is settled by popping again (its lease either committed
// the batch or still holds it), never by sending it twice.
export const streamsCycle = (body, tenant) =>
  call('POST', '/streams/v1/cycle', plain, { body, safe: false, tenant });
