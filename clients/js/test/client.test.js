// The JS client's own tests, against real brokers: exact numbers end to end (versions past 2^53 too), the bearer token on an
// authenticated broker, one kept-alive connection and what happens when it dies while idle, typed
// timeouts and what is retried after them, the fetch transport, the builders, the prefix iterator, the
// consume loop's clean stop, and the example program.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import http from 'node:http';
import { Queen, QueenRefused, QueenUnavailable, PreconditionFailed, JsonNumber, parse, stringify, BadArgument, BadRequest,
  AuthError, NotFound, Conflict, RateLimited, Unavailable, ServerError, TransportError } from '../src/index.js';
import { Broker, deadUrl, mintHs256, psql, waitUntil } from './harness.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const unique = (p) => `${p}-${Math.random().toString(36).slice(2, 12)}`;
let broker;

before(async () => { broker = await Broker.start(); });
after(async () => { await broker?.stop(); });

/** A loopback TCP relay to a broker that counts and can cut the connections it carries. */
async function relay(target) {
  const conns = new Set();
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted++;
    const up = net.connect(target.port, '127.0.0.1');
    const pair = { client, up };
    conns.add(pair);
    client.pipe(up); up.pipe(client);
    const drop = () => { client.destroy(); up.destroy(); conns.delete(pair); };
    client.on('error', drop); up.on('error', drop); client.on('close', drop); up.on('close', drop);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  server.unref(); // a failed test that skips close() must not keep the process alive
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    accepted: () => accepted,
    cutAll() { for (const { client, up } of conns) { client.destroy(); up.destroy(); } conns.clear(); },
    close: () => new Promise((r) => { for (const { client, up } of conns) { client.destroy(); up.destroy(); } server.close(r); }),
  };
}

describe('json', () => {
  test('numbers keep their value and text', () => {
    const doc = parse('{"a":0.1,"b":12345678901234567890,"c":0.10000000000000000001,"d":[1E+2,-0.0,"\\u00e9"],"__proto__":1}');
    assert.equal(doc.a, 0.1);
    assert.equal(doc.b, 12345678901234567890n);
    assert.ok(doc.c instanceof JsonNumber);
    assert.equal(Object.getPrototypeOf(doc), Object.prototype); // __proto__ is a member, not the prototype
    assert.equal(doc.__proto__, 1);
    assert.equal(stringify(doc), '{"a":0.1,"b":12345678901234567890,"c":0.10000000000000000001,"d":[100,0,"é"],"__proto__":1}');
  });

  test('what JSON cannot hold is refused', () => {
    for (const bad of [NaN, Infinity, Symbol('x'), () => 1]) assert.throws(() => stringify(bad), TypeError);
    for (const bad of ['{"a":1,}', '[1 2]', '01', '"\u0001"', '1 2', '']) assert.throws(() => parse(bad), SyntaxError);
  });
});

describe('numbers end to end', () => {
  test('kv values and message payloads round trip exactly', async () => {
    const q = new Queen(broker.base);
    const ns = unique('js'), queue = unique('q');
    for (const [key, value, text] of [['tenth', 0.1, '0.1'], ['big', 12345678901234567890n, '12345678901234567890'],
      ['long', new JsonNumber('0.10000000000000000001'), '0.10000000000000000001']]) {
      await q.kv.put(ns, key, value, { forever: true });
      assert.equal(stringify((await q.kv.get(ns, key)).value), text, key);
    }
    assert.equal((await q.kv.incr(ns, 'n', 0.1, { forever: true })).value, 0.1);
    assert.equal((await q.kv.incr(ns, 'n', 0.2, { forever: true })).value, 0.3); // the broker adds decimals
    await q.queue(queue).push([{ payload: { n: 12345678901234567890n, f: 0.1 }, transactionId: 'm' }]);
    const popped = await q.pop(queue, { wait: true, timeoutMs: 5000 });
    assert.equal(popped.messages[0].data.n, 12345678901234567890n);
    assert.equal(popped.messages[0].data.f, 0.1);
    await q.close();
  });
});

describe('versions past 2^53', () => {
  // Versions come from a bigint sequence; a long-lived database passes 2^53, where a JS number would
  // round 2^53+1 to 2^53 and an expect would name the wrong version.
  test('read as exact BigInts, and an expect compares them exactly', async () => {
    const q = new Queen(broker.base);
    const ns = unique('js');
    await q.kv.put(ns, 'k', 'v1', { forever: true });
    const past = 9007199254740993n; // 2^53 + 1: no JS number holds it
    psql(`UPDATE queen.kv SET version = ${past} WHERE namespace = '${ns}' AND key = 'k'`);
    const got = await q.kv.get(ns, 'k');
    assert.equal(typeof got.version, 'bigint');
    assert.equal(got.version, past);
    const rounded = await q.kv.put(ns, 'k', 'v2', { forever: true, expect: past - 1n }); // what Number(past) reads as
    assert.equal(rounded.applied, false);
    assert.equal(rounded.reason, 'version');
    assert.equal(rounded.version, past);
    const exact = await q.kv.put(ns, 'k', 'v3', { forever: true, expect: got.version });
    assert.equal(exact.applied, true);
    assert.equal((await q.kv.get(ns, 'k')).value, 'v3');
    await q.close();
  });
});

describe('errors', () => {
  test('a refusal and a verdict are typed', async () => {
    const q = new Queen(broker.base);
    const ns = unique('js');
    await q.kv.put(ns, 'k', 'live', { forever: true });
    await assert.rejects(q.kv.putIfAbsent(ns, 'k', 2, { forever: true, required: true }),
      (e) => e instanceof PreconditionFailed && e.status === 200 && e.kvReason === 'exists' && e.value === 'live' &&
        e.kind === 'precondition' && e.message === 'kv precondition failed at op 0: exists');
    assert.equal((await q.kv.putIfAbsent(ns, 'k', 2, { forever: true })).applied, false);
    await q.close();
  });
});

/** An HTTP listener answering every request with one status and the error envelope. */
async function answering(status) {
  const srv = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end('{"error":"x","code":"x","reason":"x","detail":"d"}');
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${srv.address().port}`, close: () => new Promise((r) => srv.close(r)) };
}

describe('vocabulary (clients/API.md)', () => {
  test('a write without one valid expiry never leaves the client', async () => {
    const q = new Queen({ urls: await deadUrl(), maxAttempts: 3, backoffMs: 1 }); // a sent call would fail unreachable
    for (const o of [{}, { ttlSeconds: 0 }, { ttlSeconds: -5 }, { ttlSeconds: 1.5 }, { ttlSeconds: 60, forever: true },
      { forever: false }, { ttlSeconds: '60' }]) {
      for (const write of [() => q.kv.put('ns', 'k', 1, o), () => q.kv.putIfAbsent('ns', 'k', 1, o), () => q.kv.incr('ns', 'k', 1, o)]) {
        await assert.rejects(write(), (e) => e instanceof BadArgument && e instanceof BadRequest && e.status === 0 &&
          e.code === 'bad_argument' && e.kind === 'bad_request' && e.message.includes('expiry: give ttl (seconds > 0) or forever'),
          JSON.stringify(o));
      }
      assert.throws(() => q.tx().kvPut('ns', 'k', 1, o), BadArgument);
      assert.throws(() => q.kv.batch().incr('ns', 'k', 1, o), BadArgument);
    }
    assert.equal(q.retries, 0);
    await assert.rejects(q.kv.put('ns', 'k', 1, { ttlSeconds: 60 }), (e) => e instanceof TransportError && e.code === 'unreachable');
    await q.close();
  });

  test('each status has its kind and class', async () => {
    const cases = [[400, BadRequest, 'bad_request'], [413, BadRequest, 'bad_request'], [401, AuthError, 'auth'],
      [403, AuthError, 'auth'], [404, NotFound, 'not_found'], [409, Conflict, 'conflict'], [429, RateLimited, 'rate_limited'],
      [503, Unavailable, 'unavailable'], [500, ServerError, 'server'], [502, ServerError, 'server']];
    for (const [status, Cls, kind] of cases) {
      const peer = await answering(status);
      const q = new Queen({ urls: peer.url, maxAttempts: 1 });
      await assert.rejects(q.kv.get('ns', 'k'), (e) => e instanceof Cls && e.kind === kind && e.toJSON().kind === kind &&
        // a 500 is the broker's failure, not a refusal of the input
        (e instanceof QueenRefused) === (status >= 400 && status < 500 && status !== 429), String(status));
      await q.close();
      await peer.close();
    }
  });

  for (const transport of ['node', 'fetch']) {
    test(`a signal cancels a waiting pop (${transport})`, async () => {
      const q = new Queen({ urls: broker.base, transport });
      const ctl = new AbortController();
      const t0 = Date.now();
      setTimeout(() => ctl.abort(), 200);
      await assert.rejects(q.pop(unique('q'), { wait: true, timeoutMs: 20000, signal: ctl.signal }),
        (e) => e instanceof TransportError && e.code === 'aborted' && e.attempts === 1);
      assert.ok(Date.now() - t0 < 10000, 'the pop waited out its long poll');
      await q.close();
    });
  }

  test('one message acks to one result; data is taken for payload', async () => {
    const q = new Queen(broker.base);
    const queue = unique('q');
    await q.push([{ queue, data: { n: 1 }, transactionId: 'a' }]);
    await q.queue(queue).push([{ data: 2, transactionId: 'b' }, { payload: 3, transactionId: 'c' }]);
    await assert.rejects(q.push([{ queue, data: 1, payload: 1 }]), BadArgument);
    const popped = await q.pop(queue, { batch: 3, wait: true, timeoutMs: 5000 });
    assert.deepEqual(popped.messages.map((m) => m.data), [{ n: 1 }, 2, 3]);
    const one = await q.ack(popped.messages[0]);
    assert.equal(Array.isArray(one), false);
    assert.equal(one.success, true);
    assert.equal((await q.ack(popped.messages.slice(1))).length, 2);
    await q.close();
  });

  test('QUEEN_URL is read when no URL is given, and every retry is hooked', async () => {
    const old = process.env.QUEEN_URL;
    process.env.QUEEN_URL = `${await deadUrl()}, ${broker.base}`;
    try {
      const seen = [];
      const q = new Queen({ onRetry: (n, e, w) => seen.push([n, e.code, w >= 0]) });
      await q.health();
      assert.deepEqual(seen, [[1, 'unreachable', true]]);
      await q.close();
      delete process.env.QUEEN_URL;
      assert.throws(() => new Queen(), TypeError);
    } finally {
      if (old !== undefined) process.env.QUEEN_URL = old;
    }
  });
});

describe('auth', () => {
  const secret = 'a-test-secret-of-enough-length-for-hs256-0123456789';
  let b;
  // With tokens tenancy is on: the tokens name a tenant of their own, granted kv here (so the suite runs alone).
  const tenant = '7c2d9e4f-1b3a-4d5c-8e6f-0a1b2c3d4e5f';
  before(async () => {
    b = await Broker.start({ QUEEN_AUTH: 'jwt', QUEEN_JWT_SECRET: secret, QUEEN_JWT_DEFAULT_TENANT: '1' });
    await psql(`INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ('${tenant}', true) ON CONFLICT (tenant_id) DO UPDATE SET enabled = true`);
  });
  after(async () => { await b?.stop(); });

  for (const transport of ['node', 'fetch']) {
    test(`the bearer token is sent (${transport})`, async () => {
      const ns = unique('js'), queue = unique('q');
      const anon = new Queen({ urls: b.base, transport });
      await assert.rejects(anon.kv.get(ns, 'k'), (e) => e instanceof QueenRefused && e.status === 401 && e.code === 'unauthorized');
      await anon.close();
      const token = mintHs256(secret, { sub: 'js-producer', role: 'admin', tenant, exp: Math.floor(Date.now() / 1000) + 600 });
      const q = new Queen({ urls: b.base, token, transport });
      assert.equal((await q.kv.put(ns, 'k', 1, { forever: true })).applied, true);
      assert.equal((await q.kv.get(ns, 'k')).value, 1);
      await q.push([{ queue, payload: 1, transactionId: 't' }]);
      const popped = await q.pop(queue, { wait: true, timeoutMs: 5000 });
      assert.equal(popped.messages[0].producer, 'js-producer'); // the token's sub
      await q.close();
    });
  }

  test('consume rejects with the refusal of its pop', async () => {
    const narrow = mintHs256(secret, { sub: 'js', role: 'write', scope: 'queue:elsewhere:read', exp: Math.floor(Date.now() / 1000) + 600 });
    const q = new Queen({ urls: b.base, token: narrow });
    // a loop that waited the refusal out would end with the signal, and the test fail
    await assert.rejects(q.consume(unique('q'), async () => {}, { pollMs: 300, signal: AbortSignal.timeout(15000) }),
      (e) => e instanceof QueenRefused && e.status === 403 && e.reason === 'auth_forbidden_scope');
    await q.close();
  });
});

describe('connections', () => {
  test('calls share one kept-alive connection', async () => {
    const r = await relay(broker);
    const q = new Queen(r.url);
    try {
      const ns = unique('js');
      for (let i = 0; i < 5; i++) await q.kv.put(ns, 'k', i, { forever: true });
      assert.equal(r.accepted(), 1);
    } finally {
      await q.close();
      await r.close();
    }
  });

  test('a connection cut while idle is replaced without a retry, even for an incr', async () => {
    const r = await relay(broker);
    const q = new Queen({ urls: r.url, maxAttempts: 1 });
    try {
      const ns = unique('js');
      await q.kv.incr(ns, 'n', 1, { forever: true });
      r.cutAll();
      assert.equal((await q.kv.incr(ns, 'n', 1, { forever: true })).value, 2);
      assert.equal(q.retries, 0);
      assert.equal(r.accepted(), 2);
    } finally {
      await q.close();
      await r.close();
    }
  });
});

describe('timeouts and failover', () => {
  let silent, sockets = [];
  before(async () => {
    silent = net.createServer((s) => { sockets.push(s); s.on('error', () => {}); }); // reads, never answers
    await new Promise((r) => silent.listen(0, '127.0.0.1', r));
    silent.unref();
  });
  after(async () => { for (const s of sockets) s.destroy(); await new Promise((r) => silent.close(r)); });

  for (const transport of ['node', 'fetch']) {
    test(`a timeout is typed and retried only for what is safe (${transport})`, async () => {
      const q = new Queen({ urls: `http://127.0.0.1:${silent.address().port}`, transport, maxAttempts: 2, timeoutMs: 200, backoffMs: 10 });
      await assert.rejects(q.kv.get('ns', 'k'), (e) => e instanceof QueenUnavailable && e.status === 0 && e.code === 'timeout' && e.attempts === 2);
      await assert.rejects(q.kv.incr('ns', 'k', 1, { forever: true }), (e) => e.code === 'timeout' && e.attempts === 1);
      await assert.rejects(q.push([{ queue: 'q', payload: 1 }]), (e) => e.code === 'timeout' && e.attempts === 1);
      await q.close();
    });

    test(`a refused connection moves on, even for an incr (${transport})`, async () => {
      const q = new Queen({ urls: [await deadUrl(), broker.base], transport });
      const ns = unique('js');
      assert.equal((await q.kv.incr(ns, 'n', 1, { forever: true })).value, 1);
      assert.equal(q.retries, 1);
      await q.kv.get(ns, 'n');
      assert.equal(q.retries, 1); // the live URL is remembered
      await q.close();
    });
  }

  test('an answer that is not JSON is a bad response', async () => {
    const q = new Queen(broker.base);
    await assert.rejects(q._run({ method: 'GET', path: '/metrics/prometheus', hasBody: false, safe: true, extraMs: 0, finish: (s, b) => b }),
      (e) => e.code === 'bad_response');
    await q.close();
  });
});

describe('builders', () => {
  test('consecutive pushes share one operation; safety follows transactionIds', () => {
    const q = new Queen('http://127.0.0.1:1');
    const tx = q.tx().push('a', [{ payload: 1 }]).push('b', [{ payload: 2, transactionId: 't' }])
      .ack({ transactionId: 'x', partitionId: 'p', leaseId: 'l' }).push('a', [{ payload: 3 }])
      .kvPutIfAbsent('ns', 'done/x', true, { forever: true, required: true }).requireLease('l');
    const b = tx.bundle();
    assert.deepEqual(b.operations.map((o) => o.type), ['push', 'ack', 'push']);
    assert.equal(b.operations[0].items.length, 2);
    assert.deepEqual(b.kv, [{ op: 'putIfAbsent', ns: 'ns', key: 'done/x', value: true, forever: true, required: true }]);
    assert.deepEqual(b.requiredLeases, ['l']);
    assert.equal(tx.call().safe, true);
    assert.equal(q.tx().push('a', [{ payload: 1 }]).call().safe, false);
  });

  test('batch and the prefix iterator', async () => {
    const q = new Queen(broker.base);
    const ns = unique('js');
    const batch = q.kv.batch();
    for (let k = 0; k < 7; k++) batch.put(ns, `p/${k}`, k, { forever: true });
    assert.equal((await batch.incr(ns, 'n', 2, { forever: true }).apply()).length, 8);
    const values = [];
    for await (const row of q.kv.scan(ns, 'p/', { pageSize: 3 })) values.push(row.value);
    assert.deepEqual(values, [0, 1, 2, 3, 4, 5, 6]);
    const page = await q.kv.getPrefix(ns, 'p/', { limit: 3 }); // one page, as in every client
    assert.deepEqual([page.rows.map((r) => r.value), page.truncated, page.nextAfter], [[0, 1, 2], true, 'p/2']);
    await q.close();
  });
});

describe('consume', () => {
  test('stops cleanly when its signal aborts, the effect committed with the ack', async () => {
    const q = new Queen(broker.base);
    const ns = unique('js'), queue = unique('q');
    const ctl = new AbortController();
    let handled = 0;
    const running = q.consume(queue, async (m, tx) => { tx.kvIncr(ns, 'handled', 1, { forever: true }); handled++; },
      { concurrency: 2, pollMs: 300, signal: ctl.signal });
    try {
      await q.queue(queue).push([{ payload: 1, transactionId: 'a' }]);
      await waitUntil(async () => (await q.kv.get(ns, 'handled')).found);
    } finally {
      ctl.abort(); // also when the test failed: the loop must not outlive it
    }
    assert.deepEqual(await running, { handled: 1, failed: 0 });
    assert.equal(handled, 1);
    assert.equal(await q.pop(queue), null); // acked
    await q.close();
  });
});

describe('example', () => {
  test('examples/exactly-once.js', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(here, '..', 'examples', 'exactly-once.js'), broker.base], { timeout: 60000 });
    assert.match(stdout, /effect applied once/);
  });
});
