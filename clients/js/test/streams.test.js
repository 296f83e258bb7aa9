// Streams (src/streams.js) on a real broker: every shared scenario of clients/conformance/streams, the
// configuration hash vectors byte for byte, a worker stopped between cycles, a cycle whose lease was lost.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Queen, JsonNumber, NotFound, Stream } from '../src/index.js';
import { Broker, waitUntil } from './harness.js';

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'conformance', 'streams');
const scenarios = fs.readdirSync(DIR).filter((n) => /^\d.*\.json$/.test(n)).sort()
  .map((n) => [n, JSON.parse(fs.readFileSync(path.join(DIR, n), 'utf8'))]);

// The scenario expression language (the README's vocabulary).
const text = (v) => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : JSON.stringify(v));
function ev(e, env) {
  if (e === null || typeof e !== 'object') return e;
  if (Array.isArray(e)) throw new Error('a list literal is written {"list": [...]}');
  const [[op, a]] = Object.entries(e);
  if (op === 'var') {
    const [head, ...rest] = String(a).split('.');
    let cur = env[head];
    for (const p of rest) cur = cur !== null && typeof cur === 'object' ? cur[p] : undefined;
    return cur === undefined ? null : cur;
  }
  if (op === 'obj') return Object.fromEntries(Object.entries(a).map(([k, x]) => [k, ev(x, env)]));
  if (op === 'list') return a.map((x) => ev(x, env));
  if (op === 'str') return text(ev(a, env));
  if (op === 'concat') return a.map((x) => text(ev(x, env))).join('');
  if (op === 'not') return !ev(a, env);
  if (op === 'if') return ev(a[0], env) ? ev(a[1], env) : ev(a[2], env);
  const v = a.map((x) => ev(x, env)).map((x) => (x instanceof JsonNumber ? Number(x.text) : x));
  switch (op) {
    case 'add': return v.reduce((x, y) => x + y);
    case 'sub': return v[0] - v[1];
    case 'mul': return v[0] * v[1];
    case 'mod': return ((v[0] % v[1]) + v[1]) % v[1]; // the sign of the divisor, as Python's %
    case 'eq': return v[0] === v[1];
    case 'gt': return v[0] > v[1];
    case 'lt': return v[0] < v[1];
    case 'and': return v.every(Boolean);
    case 'or': return v.some(Boolean);
    default: throw new Error(`unknown expression ${op}`);
  }
}

const counterGate = (limit) => (v, ctx) => {
  const n = Number(ctx.state.count ?? 0);
  if (n >= limit) return false;
  ctx.state.count = n + 1;
  return true;
};

function build(source, pipeline) {
  let s = Stream.from(source);
  for (const op of pipeline) {
    const win = { gracePeriod: op.gracePeriod ?? 0, allowedLateness: op.allowedLateness ?? 0,
      eventTime: 'eventTime' in op ? (v) => ev(op.eventTime, { value: v }) : undefined };
    const f1 = (v, ctx) => ev(op.fn, { value: v, ctx });
    switch (op.op) {
      case 'map': s = s.map(f1); break;
      case 'filter': s = s.filter(f1); break;
      case 'flatMap': s = s.flatMap(f1); break;
      case 'keyBy': s = s.keyBy((v) => ev(op.fn, { value: v })); break;
      case 'windowTumbling': s = s.windowTumbling(op.seconds, win); break;
      case 'windowSliding': s = s.windowSliding(op.size, op.slide, win); break;
      case 'windowCron': s = s.windowCron(op.every, win); break;
      case 'windowSession': s = s.windowSession(op.gap, win); break;
      case 'reduce': s = s.reduce((acc, v) => ev(op.fn, { acc, value: v }), op.initial); break;
      case 'aggregate': s = s.aggregate(Object.fromEntries(Object.entries(op.fields).map(([k, x]) => [k, (v) => ev(x, { value: v })]))); break;
      case 'gate': s = s.gate(counterGate(Number(op.counter.limit))); break;
      case 'to': s = s.to(op.queue, { partition: op.partition !== null && typeof op.partition === 'object' ? (v) => ev(op.partition, { value: v }) : op.partition }); break;
      default: throw new Error(`unknown op ${op.op}`);
    }
  }
  return s;
}

/** JSON values compared by value: exact numbers read back from the broker become doubles. */
const plainJson = (v) => JSON.parse(JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? Number(x) : x)));

let broker, q;
before(async () => { broker = await Broker.start(); q = new Queen({ urls: broker.base, timeoutMs: 10000 }); });
after(async () => { await q?.close(); await broker?.stop(); });

async function fresh(...queues) {
  for (const n of queues) {
    try { await q.queueDelete(n); } catch (e) { if (!(e instanceof NotFound)) throw e; }
  }
}
async function feed(source, input) {
  for (const [p, items] of Object.entries(input)) await q.push(items.map((x) => ({ queue: source, partition: p, payload: x })));
}
async function sinkOf(queue, partition) {
  const r = await q.pop(queue, { partition, batch: 1000, autoAck: true });
  return plainJson((r?.messages ?? []).map((m) => m.data));
}
const sinks = (sc) => sc.pipeline.filter((op) => op.op === 'to').map((op) => op.queue);

describe('streams', () => {
  test('hash vectors, byte for byte', () => {
    const { vectors } = JSON.parse(fs.readFileSync(path.join(DIR, 'hash_vectors.json'), 'utf8'));
    assert.ok(vectors.length > 0);
    for (const v of vectors) {
      const s = build('src', v.pipeline);
      assert.equal(s.canonicalConfig(), v.canonical, v.name);
      assert.equal(s.configHash(), v.configHash, v.name);
    }
  });

  for (const [file, sc] of scenarios) {
    test(`scenario ${file}`, async () => {
      await fresh(sc.source, ...sinks(sc));
      await feed(sc.source, sc.input);
      const stream = build(sc.source, sc.pipeline);
      assert.equal(stream.configHash(), sc.configHash, stream.canonicalConfig());
      const w = stream.worker(q, `conf.${sc.name}.js`, { batch: sc.batch, waitMs: 200, reset: true, leaseSeconds: sc.leaseSeconds });
      await w.drain();
      const exp = sc.expect;
      for (const [p, want] of Object.entries(exp.sink)) assert.deepEqual(await sinkOf(sinks(sc)[0], p), want, `sink of ${p}`);
      const states = {};
      for (const p of Object.keys(exp.state)) states[p] = plainJson(await w.state(p));
      assert.deepEqual(states, exp.state);
      assert.equal(w.stats.messages, exp.acked);
      assert.equal(w.stats.late, exp.late);
      for (const [p, want] of Object.entries(exp.tail ?? {})) {
        // The denied tail is still leased to the worker: it comes back, in order, once the lease ends.
        const got = [];
        await waitUntil(async () => {
          const r = await q.pop(sc.source, { partition: p, group: w.group, batch: 1000, wait: true, timeoutMs: 1000, autoAck: true });
          got.push(...(r?.messages ?? []).map((m) => m.data));
          return got.length >= want.length;
        }, 15000);
        assert.deepEqual(plainJson(got), want, `tail of ${p}`);
      }
    });
  }

  test('a worker stopped between cycles: the next resumes from committed state, each output once', async () => {
    const sc = scenarios.find(([, s]) => s.name === 'tumbling')[1];
    for (let stopAfter = 1; stopAfter <= 3; stopAfter++) {
      await fresh(sc.source, ...sinks(sc));
      await feed(sc.source, sc.input);
      const first = build(sc.source, sc.pipeline).worker(q, 'conf.restart.js', { batch: 2, waitMs: 200, reset: true });
      for (let i = 0; i < stopAfter; i++) await first.step();
      const q2 = new Queen({ urls: broker.base, timeoutMs: 10000 });
      try {
        const second = build(sc.source, sc.pipeline).worker(q2, 'conf.restart.js', { batch: 2, waitMs: 200 });
        assert.equal((await second.register()).fresh, false);
        await second.drain();
        assert.equal(first.stats.messages + second.stats.messages, sc.expect.acked);
        assert.deepEqual(await sinkOf(sinks(sc)[0], 'p1'), sc.expect.sink.p1);
        assert.deepEqual(plainJson(await second.state('p1')), sc.expect.state.p1);
      } finally { await q2.close(); }
    }
  });

  test('another pipeline under the same name is refused (409 streams_config_mismatch) unless reset', async () => {
    await fresh('streams-js-cfg');
    await Stream.from('streams-js-cfg').map((v) => v).worker(q, 'conf.cfg.js', { reset: true }).register();
    await assert.rejects(Stream.from('streams-js-cfg').filter(() => true).worker(q, 'conf.cfg.js').register(),
      (e) => e.status === 409 && e.reason === 'streams_config_mismatch');
    assert.equal((await Stream.from('streams-js-cfg').filter(() => true).worker(q, 'conf.cfg.js', { reset: true }).register()).reset, true);
  });

  test('a cycle whose lease was lost writes nothing (409 streams_lease_lost)', async () => {
    await fresh('streams-js-lease', 'streams-js-lease-sink');
    await feed('streams-js-lease', { p1: [1, 2, 3] });
    // Worker A's cycle waits (in its sink partition function, called while the cycle's body is built)
    // until its lease has ended and worker B has run the batch.
    let aIn = false;
    let release;
    const bDone = new Promise((r) => { release = r; });
    const a = Stream.from('streams-js-lease').map((v) => v).to('streams-js-lease-sink').worker(q, 'conf.lease.js',
      { batch: 10, waitMs: 200, reset: true, leaseSeconds: 1 });
    const realCompute = a.compute.bind(a);
    const aStep = (async () => {
      await a.register();
      const res = await q.pop('streams-js-lease', { group: a.group, batch: 10, leaseSeconds: 1 });
      aIn = true;
      await bDone;
      const m = res.messages;
      const body = realCompute(m, String(res.partitionId), m[0].partition ?? res.partition, res.leaseId, new Map());
      return q.streams.cycle(body);
    })();
    await waitUntil(() => aIn);
    const b = Stream.from('streams-js-lease').map((v) => v).to('streams-js-lease-sink').worker(q, 'conf.lease.js', { batch: 10, waitMs: 500 });
    await waitUntil(async () => { await b.step(); return b.stats.messages >= 3; });
    release();
    await assert.rejects(aStep, (e) => e.status === 409 && e.reason === 'streams_lease_lost');
    assert.equal(b.stats.messages, 3);
    assert.deepEqual(await sinkOf('streams-js-lease-sink', 'p1'), [1, 2, 3]);
  });

  test('the worker counts a lost lease and drops the batch', async () => {
    await fresh('streams-js-lease2', 'streams-js-lease2-sink');
    await feed('streams-js-lease2', { p1: [7] });
    let hold;
    const gateOpen = new Promise((r) => { hold = r; });
    const a = Stream.from('streams-js-lease2').to('streams-js-lease2-sink').worker(q, 'conf.lease2.js', { batch: 10, waitMs: 200, reset: true, leaseSeconds: 1 });
    // The cycle call waits until B has taken and committed the batch: A's commit is then refused.
    const cycle = q.streams.cycle.bind(q.streams);
    // B starts only once A holds the batch: were B to pop first, A would find nothing and lose no lease.
    let aHolds = false;
    const qa = { pop: async (...args) => { const r = await q.pop(...args); if (r.messages?.length) aHolds = true; return r; },
      streams: { register: q.streams.register.bind(q.streams), stateGet: q.streams.stateGet.bind(q.streams),
        cycle: async (body, o) => { await gateOpen; return cycle(body, o); } } };
    a.client = qa;
    const aStep = a.step();
    await waitUntil(() => aHolds);
    const b = Stream.from('streams-js-lease2').to('streams-js-lease2-sink').worker(q, 'conf.lease2.js', { batch: 10, waitMs: 500 });
    await waitUntil(async () => { await b.step(); return b.stats.messages >= 1; });
    hold();
    await aStep;
    assert.equal(a.stats.leaseLost, 1);
    assert.equal(a.stats.messages, 0);
    assert.deepEqual(await sinkOf('streams-js-lease2-sink', 'p1'), [7]);
  });

  test('run() stops on its AbortSignal', async () => {
    await fresh('streams-js-abort');
    const ac = new AbortController();
    const w = Stream.from('streams-js-abort').map((v) => v).worker(q, 'conf.abort.js', { waitMs: 5000, reset: true });
    const running = w.run({ signal: ac.signal });
    await waitUntil(() => w.queryId !== null);
    ac.abort();
    const stats = await running;
    assert.equal(stats.errors, 0);
  });
});
