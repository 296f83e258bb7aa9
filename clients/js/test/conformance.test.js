// The conformance runner of the JS client: every scenario of clients/conformance/scenarios (as that
// folder's README defines them), one test each, against real brokers on the private PostgreSQL; with
// the Node transport, and again with the fetch transport (a browser's) for the scenarios that need no
// special broker.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';

import { Queen, QueenError, JsonNumber, parse, stringify, decimalKey } from '../src/index.js';
import { Broker, deadUrl, psql, statusOf, pause } from './harness.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const dir = process.env.QUEEN_CONFORMANCE_DIR || path.join(here, '..', '..', 'conformance', 'scenarios');
const only = process.env.QUEEN_CONFORMANCE_ONLY; // a name substring, to run a few while working

class StepFailed extends Error {}

// ---- variables ----------------------------------------------------------------------------------------

const textOf = (v) => (typeof v === 'string' ? v : stringify(v));

function substStr(s, vs) {
  return s.replace(/\$\{([^}]*)\}/g, (_, name) => {
    if (!(name in vs)) throw new StepFailed(`unknown variable ${name} in ${s}`);
    return textOf(vs[name]);
  });
}

function subst(v, vs) {
  if (typeof v === 'string') {
    const m = /^\$\{([^}]*)\}$/.exec(v);
    if (m) {
      if (!(m[1] in vs)) throw new StepFailed(`unknown variable ${v}`);
      return vs[m[1]];
    }
    return substStr(v, vs);
  }
  if (Array.isArray(v)) return v.map((x) => subst(x, vs));
  if (v !== null && typeof v === 'object' && !(v instanceof JsonNumber)) {
    const o = {};
    for (const [k, x] of Object.entries(v)) o[substStr(k, vs)] = subst(x, vs);
    return o;
  }
  return v;
}

// ---- patterns -----------------------------------------------------------------------------------------

const ABSENT = Symbol('absent');
const isNumber = (v) => typeof v === 'number' || typeof v === 'bigint' || v instanceof JsonNumber;
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof JsonNumber);

function equal(a, b) {
  if (isNumber(a) || isNumber(b)) return isNumber(a) && isNumber(b) && decimalKey(stringify(a)) === decimalKey(stringify(b));
  if (Array.isArray(a) || Array.isArray(b)) return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isObject(a) || isObject(b)) {
    if (!isObject(a) || !isObject(b)) return false;
    const ka = Object.keys(a), kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
  }
  return a === b;
}

function typeName(v) {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return 'boolean';
  if (isNumber(v)) return 'number';
  if (typeof v === 'string') return 'string';
  return Array.isArray(v) ? 'array' : 'object';
}

const show = (v) => (v === ABSENT ? '(absent)' : stringify(v).slice(0, 300));

/** null when v matches p, else why not. */
function match(p, v, at = '') {
  const where = at || '/';
  if (isObject(p) && Object.keys(p).length === 1 && Object.keys(p)[0].startsWith('$')) {
    const [m, arg] = Object.entries(p)[0];
    if (m === '$absent') return v === ABSENT ? null : `at ${where}: present, expected absent`;
    if (v === ABSENT) return `at ${where}: absent`;
    if (m === '$any') return null;
    if (m === '$type') {
      const ok = typeName(v) === arg || (arg === 'integer' && isNumber(v) && /^-?\d+$/.test(stringify(v)));
      return ok ? null : `at ${where}: ${typeName(v)}, expected ${arg}`;
    }
    if (m === '$raw') return stringify(v) === arg ? null : `at ${where}: raw text ${stringify(v)}, expected ${arg}`;
    if (m === '$len') return Array.isArray(v) && equal(v.length, arg) ? null : `at ${where}: ${show(v)}, expected length ${stringify(arg)}`;
    if (m === '$ne') return !equal(arg, v) ? null : `at ${where}: equal to ${show(arg)}`;
    return `at ${where}: unknown matcher ${m}`;
  }
  if (v === ABSENT) return `at ${where}: absent, expected ${show(p)}`;
  if (isObject(p)) {
    if (!isObject(v)) return `at ${where}: ${typeName(v)}, expected an object`;
    for (const [k, sub] of Object.entries(p)) {
      const why = match(sub, Object.hasOwn(v, k) ? v[k] : ABSENT, `${at}/${k}`);
      if (why) return why;
    }
    return null;
  }
  if (Array.isArray(p)) {
    if (!Array.isArray(v) || v.length !== p.length) return `at ${where}: ${show(v)}, expected ${p.length} elements`;
    for (let i = 0; i < p.length; i++) {
      const why = match(p[i], v[i], `${at}/${i}`);
      if (why) return why;
    }
    return null;
  }
  return equal(p, v) ? null : `at ${where}: ${show(v)}, expected ${show(p)}`;
}

function pointer(doc, ptr) {
  if (ptr === '') return doc;
  let cur = doc;
  for (const raw of ptr.replace(/^\//, '').split('/')) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (isObject(cur) && Object.hasOwn(cur, part)) cur = cur[part];
    else if (Array.isArray(cur) && /^\d+$/.test(part) && Number(part) < cur.length) cur = cur[Number(part)];
    else return ABSENT;
  }
  return cur;
}

// ---- the calls ----------------------------------------------------------------------------------------

const num = (v) => (v === undefined ? undefined : Number(stringify(v)));

async function runConsume(c, a) {
  const h = a.handler ?? {};
  const deliveries = {};
  const counts = { handled: 0, failed: 0 };
  const stopAfter = num(a.stopAfter) ?? 1;
  const ctl = new AbortController();
  let fired = false;
  const limit = num(a.timeoutMs) ?? 30000;
  const watchdog = setTimeout(() => { fired = true; ctl.abort(); }, limit);
  try {
    await c.consume(a.queue, async (m, tx) => {
      const d = (deliveries[m.transactionId] = (deliveries[m.transactionId] ?? 0) + 1);
      if (h.sleepMs) await pause(num(h.sleepMs));
      if (h.failFirst && d === 1) { counts.failed++; return false; }
      if (h.effect) tx.kv(h.effect);
      if (++counts.handled >= stopAfter) ctl.abort();
      return true;
    }, { concurrency: num(a.concurrency) ?? 1, group: a.group, batch: num(a.batch) ?? 1,
      leaseSeconds: num(a.leaseSeconds) ?? 30, pollMs: 300, signal: ctl.signal, tenant: a.tenant });
  } finally {
    clearTimeout(watchdog);
  }
  if (fired) throw new StepFailed(`consume did not stop within ${limit} ms (${JSON.stringify(counts)})`);
  return { handled: counts.handled, failed: counts.failed, deliveries };
}

async function doCall(c, call, a) {
  const tenant = a.tenant;
  const expiry = { ttlSeconds: num(a.ttlSeconds), forever: a.forever === true };
  switch (call) {
    case 'health': return c.health();
    case 'kv_get': return c.kv.get(a.ns, a.key, { tenant });
    case 'kv_put': return c.kv.put(a.ns, a.key, a.value, { ...expiry, expect: a.expect, required: a.required, tenant });
    case 'kv_put_if_absent': return c.kv.putIfAbsent(a.ns, a.key, a.value, { ...expiry, required: a.required, tenant });
    case 'kv_delete': return c.kv.delete(a.ns, a.key, { expect: a.expect, required: a.required, tenant });
    case 'kv_incr': return c.kv.incr(a.ns, a.key, a.delta, { ...expiry, min: a.min, max: a.max, required: a.required, tenant });
    case 'kv_get_many': return c.kv.getMany(a.ns, a.keys ?? [], { tenant });
    case 'kv_get_prefix': return c.kv.getPrefix(a.ns, a.prefix, { after: a.after, limit: num(a.limit), keysOnly: a.keysOnly, tenant });
    case 'kv_scan': {
      // pages counted on the wire: the iterator asks one page at a time
      let pages = 0;
      const page = c.kv.getPrefix.bind(c.kv);
      c.kv.getPrefix = (...args) => { pages++; return page(...args); };
      try {
        const keys = [];
        for await (const row of c.kv.scan(a.ns, a.prefix, { pageSize: num(a.limit), keysOnly: a.keysOnly, tenant })) keys.push(row.key);
        return { keys, pages };
      } finally {
        delete c.kv.getPrefix;
      }
    }
    case 'kv_apply': return c.kv.apply(a.ops ?? [], { tenant });
    case 'kv_namespaces': return { namespaces: await c.kv.namespaces({ tenant }) };
    case 'push': return c.push(a.items ?? [], { tenant });
    case 'pop': return c.pop(a.queue, { partition: a.partition, group: a.group, batch: num(a.batch), wait: a.wait,
      timeoutMs: num(a.timeoutMs), leaseSeconds: num(a.leaseSeconds), autoAck: a.autoAck, tenant });
    case 'ack': return c.ack([...(a.acks ?? [])], { group: a.group, tenant });
    case 'lease_extend': return c.leaseExtend(a.leaseId, num(a.seconds) ?? 60, { tenant });
    case 'configure': return c.configure(a.queue, a.options, { namespace: a.namespace, task: a.task, tenant });
    case 'queues': return { queues: await c.queues({ tenant }) };
    case 'queue_delete': return c.queueDelete(a.queue, { tenant });
    case 'transaction': {
      const tx = c.tx({ tenant });
      for (const op of a.ops ?? []) {
        if (op.ack) tx.ack(op.ack);
        else if (op.push) { const { queue, ...item } = op.push; tx.push(queue, [item]); }
        else if (op.kv) tx.kv(op.kv);
        else throw new StepFailed(`unknown transaction op ${stringify(op)}`);
      }
      for (const lease of a.requiredLeases ?? []) tx.requireLease(lease);
      return tx.commit();
    }
    case 'consume': return runConsume(c, a);
    default: throw new StepFailed(`unknown call ${call}`);
  }
}

// ---- needs: the brokers a scenario runs against -------------------------------------------------------

let mainBroker;

async function makeWorld(needs) {
  const w = { brokers: [], urls: [], held: null, tenant: null };
  if (!needs) {
    w.urls.push(mainBroker.base);
  } else if (needs.noBroker) {
    w.urls.push(await deadUrl());
  } else if (needs.saturated) {
    const b = await Broker.start({ QUEEN_MAX_CONNECTIONS: '1', QUEEN_HTTP_THREADS: '1', QUEEN_IDLE_TIMEOUT_MS: '600000',
      QUEEN_REQUEST_READ_TIMEOUT_MS: '600000' }, { wait: false });
    w.brokers.push(b);
    w.urls.push(b.base);
    // The broker admits connections in the order they open: the one held here is its first, before
    // any probe, so it takes the only place.
    const until = Date.now() + 30000;
    for (;;) {
      const s = await new Promise((resolve) => {
        const sock = net.connect(b.port, '127.0.0.1');
        sock.once('connect', () => resolve(sock));
        sock.once('error', () => { sock.destroy(); resolve(null); });
      });
      if (s) { w.held = s; s.on('error', () => {}); break; }
      if (Date.now() > until) throw new Error(`the broker never listened (log: ${b.log})`);
      await pause(20);
    }
    for (;;) { // up once a request is answered; with the place held, the answer is 503
      const st = await statusOf(b.base);
      if (st === 503) break;
      if (st === 200) throw new Error("the held connection did not take the broker's only place");
      if (Date.now() > until) throw new Error(`the broker never answered (log: ${b.log})`);
      await pause(20);
    }
  } else if (needs.quota) {
    w.tenant = randomUUID();
    const cols = Object.keys(needs.quota).map((k) => `, ${k}`).join('');
    const vals = Object.values(needs.quota).map((v) => `, ${stringify(v)}`).join('');
    psql(`INSERT INTO queen.kv_quota (tenant_id, enabled${cols}) VALUES ('${w.tenant}', true${vals})`);
    const b = await Broker.start({ QUEEN_TENANCY_HEADER: '1', QUEEN_TRUSTED_PROXY: '1' });
    w.brokers.push(b);
    w.urls.push(b.base);
  } else {
    if (needs.deadUrlFirst) w.urls.push(await deadUrl());
    const n = num(needs.brokers) ?? 0;
    for (let i = 0; i < n; i++) w.brokers.push(await Broker.start());
    if (n) w.urls.push(...w.brokers.map((b) => b.base));
    else w.urls.push(mainBroker.base);
  }
  return w;
}

async function closeWorld(w) {
  w.held?.destroy();
  for (const b of w.brokers) await b.stop();
  if (w.tenant) psql(`DELETE FROM queen.kv_quota WHERE tenant_id = '${w.tenant}'`);
}

const runToken = () => Array.from({ length: 12 }, () => 'abcdefghijklmnopqrstuvwxyz0123456789'[Math.floor(Math.random() * 36)]).join('');

async function runScenario(sc, transport) {
  const w = await makeWorld(sc.needs);
  const co = sc.client ?? {};
  const c = new Queen({ urls: w.urls, transport, maxAttempts: num(co.max_attempts) ?? 3, backoffMs: num(co.backoff_ms) ?? 50,
    maxBackoffMs: num(co.max_backoff_ms) ?? 2000, timeoutMs: num(co.timeout_ms) ?? 10000 });
  try {
    const vs = { run: runToken() };
    if (w.tenant) vs.tenant = w.tenant;
    for (const [i, step] of sc.steps.entries()) {
      if (step.harness !== undefined) {
        const b = num(step.broker) ?? 0;
        if (step.harness !== 'stop_broker' || b >= w.brokers.length) throw new StepFailed(`step ${i}: harness ${step.harness} broker ${b} is not something this runner can do`);
        await w.brokers[b].stop();
        continue;
      }
      const { call } = step;
      const args = subst(step.args ?? {}, vs);
      const expect = subst(step.expect ?? {}, vs);
      const before = c.retries;
      let got, failed = false;
      try {
        got = await doCall(c, call, args);
      } catch (e) {
        if (!(e instanceof QueenError)) throw e;
        failed = true;
        got = e.toJSON();
      }
      const retries = c.retries - before;
      if (expect.error !== undefined) {
        if (!failed) throw new StepFailed(`step ${i} (${call}): succeeded with ${show(got)}, expected an error`);
        const why = match(expect.error, got);
        if (why) throw new StepFailed(`step ${i} (${call}): error ${why}: ${show(got)}`);
      } else {
        if (failed) throw new StepFailed(`step ${i} (${call}): failed with ${show(got)}`);
        if (expect.result !== undefined) {
          const why = match(expect.result, got);
          if (why) throw new StepFailed(`step ${i} (${call}): result ${why}: ${show(got)}`);
        }
      }
      if (step.retries !== undefined && !equal(retries, step.retries)) throw new StepFailed(`step ${i} (${call}): ${retries} retries, expected ${stringify(step.retries)}`);
      for (const [name, ptr] of Object.entries(step.save ?? {})) {
        const v = pointer(got, ptr);
        if (v === ABSENT) throw new StepFailed(`step ${i} (${call}): save ${name}: nothing at ${ptr} in ${show(got)}`);
        vs[name] = v;
      }
    }
  } finally {
    await c.close();
    await closeWorld(w);
  }
}

const scenarios = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort()
  .flatMap((f) => parse(fs.readFileSync(path.join(dir, f), 'utf8')).scenarios)
  .filter((s) => !only || s.name.includes(only));

describe('conformance', () => {
  before(async () => { mainBroker = await Broker.start(); });
  after(async () => { await mainBroker?.stop(); });

  for (const sc of scenarios) test(`node ${sc.name}`, () => runScenario(sc, 'node'));
  // fetch: every scenario but those needing a broker of their own (quota, saturated), which test the
  // same retry rules the node runs above already hold
  for (const sc of scenarios.filter((s) => !s.needs?.quota && !s.needs?.saturated)) test(`fetch ${sc.name}`, () => runScenario(sc, 'fetch'));
});

test('the runner matches exact numbers', () => {
  assert.equal(match({ $raw: '12345678901234567890' }, parse('12345678901234567890')), null);
  assert.notEqual(match({ $raw: '12345678901234567890' }, 12345678901234567000), null);
  assert.equal(match(1, parse('1.0')), null);
  assert.notEqual(match(parse('0.1'), parse('0.10000000000000001')), null);
});
