// The web console in a real browser: Debian's chromium, headless, driven by puppeteer-core, against
// real brokers (`queen serve`, $QUEEN_BIN) on a database of this test's own in the private PostgreSQL
// that scripts/test.sh started ($QUEEN_TEST_PG_URL). Every page is loaded and what it shows is checked
// against the API; a key is edited with compare-and-set (the stale case too), a dead letter requeued,
// a group seeked, a message and a key deleted. Any console error, uncaught exception, failed request
// or 4xx/5xx answer fails the test. Then again with QUEEN_AUTH=jwt: a read token sees every write
// control disabled, an admin token can use them. Screenshots of each page go to
// <build>/console-screenshots/ (the build tree of $QUEEN_BIN).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

const BIN = env('QUEEN_BIN');
const SHOTS = path.join(path.dirname(BIN), 'console-screenshots');
const CHROMIUM = process.env.QUEEN_CHROMIUM || '/usr/bin/chromium';
const SECRET = 'console-test-secret';
const TENANT = '00000000-0000-0000-0000-000000000001';
const DB = `queen_console_${process.pid}`;

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run through scripts/test.sh`);
  return v;
}

function dbUrl(name) {
  const u = new URL(env('QUEEN_TEST_PG_URL'));
  u.pathname = '/' + name;
  return u.toString();
}

const psql = (url, sql) => execFileSync('psql', [url, '-qtAX', '-v', 'ON_ERROR_STOP=1', '-c', sql], { encoding: 'utf8' }).trim();

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

const pause = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitUntil(cond, what, ms = 30000) {
  const until = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await pause(50);
  }
}

function mint(claims) {
  const b64 = (s) => Buffer.from(s).toString('base64url');
  const head = b64(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const body = b64(JSON.stringify({ tenant: TENANT, exp: Math.floor(Date.now() / 1000) + 3600, ...claims }));
  return `${head}.${body}.${createHmac('sha256', SECRET).update(`${head}.${body}`).digest('base64url')}`;
}
const ADMIN = mint({ sub: 'console-admin', role: 'admin' });
const READER = mint({ sub: 'console-reader', role: 'read' });
const OPERATOR = mint({ sub: 'console-operator', role: 'operator' });

class Broker {
  static async start(extra = {}) {
    const b = new Broker();
    b.port = await freePort();
    b.base = `http://127.0.0.1:${b.port}`;
    b.log = path.join(os.tmpdir(), `queen-console-broker-${process.pid}-${b.port}.log`);
    const fd = fs.openSync(b.log, 'w');
    b.proc = spawn(BIN, ['serve'], {
      env: { ...process.env, QUEEN_PG_URL: dbUrl(DB), QUEEN_PORT: String(b.port), QUEEN_BIND: '127.0.0.1', QUEEN_SWEEPER: '0', ...extra },
      stdio: ['ignore', fd, fd],
    });
    fs.closeSync(fd);
    b.exited = new Promise((r) => b.proc.once('exit', r));
    await waitUntil(async () => (await fetch(b.base + '/health').then((r) => r.ok, () => false)), `the broker (log ${b.log})`);
    return b;
  }

  // The API as a client sees it: JSON or a thrown error for a status that is not 2xx.
  async api(method, p, body, token = ADMIN) {
    const headers = { Authorization: `Bearer ${token}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const r = await fetch(this.base + p, { method, headers, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${p} -> ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return;
    this.proc.kill('SIGTERM');
    const killer = setTimeout(() => this.proc.kill('SIGKILL'), 30000);
    await this.exited;
    clearTimeout(killer);
  }
}

// What every page must never do: log an error, throw, or make a request that fails or is refused.
function watch(page) {
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`uncaught: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`); });
  return problems;
}

function clean(problems) {
  assert.deepEqual(problems.splice(0), [], 'the page logged errors or had failed requests');
}

async function go(page, base, hash) {
  await page.goto(`${base}/${hash}`, { waitUntil: 'load' });
  await page.waitForSelector(`main[data-ready="${hash.replace(/^#/, '').split('?')[0] || '/'}"]`, { timeout: 30000 });
}

// Navigating inside the page (a link or a form): wait for the router to finish the new route.
async function settle(page, route) {
  await page.waitForSelector(`main[data-ready="${route}"]`, { timeout: 30000 });
}

// Before an action that re-renders the same route (a new query in the hash):
// the old page's data-ready would satisfy settle() before the hashchange
// handler runs, so it is cleared first and only the new render sets it.
async function unsettle(page) {
  await page.$eval('main', (m) => { delete m.dataset.ready; });
}

async function shot(page, name) {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

const texts = (page, sel) => page.$$eval(sel, (els) => els.map((e) => e.textContent.trim()));
const field = (page, name) => page.$eval(`[data-field="${name}"] strong`, (e) => e.textContent.trim());

async function confirmDialog(page) {
  await page.waitForSelector('dialog#confirm[open]');
  await page.click('#confirm-ok');
  await page.waitForSelector('dialog#confirm:not([open])');
}

// Every form control has an accessible name; every button says what it does.
async function labelled(page) {
  const bad = await page.$$eval('input, select, textarea, button', (els) => els
    .filter((e) => e.offsetParent !== null || e.closest('dialog[open]'))
    .filter((e) => {
      if (e.tagName === 'BUTTON') return !(e.textContent.trim() || e.getAttribute('aria-label'));
      return !(e.labels && e.labels.length) && !e.getAttribute('aria-label');
    })
    .map((e) => e.outerHTML.slice(0, 120)));
  assert.deepEqual(bad, [], 'controls without a label');
}

// Text contrast (WCAG AA, 4.5:1) of every visible text element against its nearest opaque background.
async function contrast(page) {
  const bad = await page.$$eval('body *', (els) => {
    const rgb = (s) => (s.match(/[\d.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => {
      const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
      return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const bg = (e) => {
      for (let n = e; n; n = n.parentElement) {
        const c = rgb(getComputedStyle(n).backgroundColor);
        if (c.length === 3 || c[3] === 1) return c.slice(0, 3);
      }
      return [255, 255, 255];
    };
    const out = [];
    for (const e of els) {
      if (!e.offsetParent || ![...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
      if (e.closest('svg') || e.disabled) continue; // disabled controls are exempt (WCAG 1.4.3)
      const fg = rgb(getComputedStyle(e).color).slice(0, 3);
      const [a, b] = [lum(fg), lum(bg(e))].sort((x, y) => y - x);
      const ratio = (a + 0.05) / (b + 0.05);
      if (ratio < 4.5) out.push(`${e.tagName} "${e.textContent.trim().slice(0, 30)}" ${ratio.toFixed(2)}`);
    }
    return out;
  });
  assert.deepEqual(bad, [], 'text below 4.5:1 contrast');
}

async function seed(b) {
  await b.api('POST', '/api/v1/configure', { queue: 'orders', namespace: 'shop', task: 'fulfil', options: { retryLimit: 0 } });
  const items = [];
  for (let i = 1; i <= 5; i++) items.push({ queue: 'orders', partition: 'eu', payload: { order: i, lines: [{ sku: `s-${i}`, qty: i }] }, transactionId: `o-${i}` });
  await b.api('POST', '/api/v1/push', { items });
  // A number a double cannot hold, sent as text: the console must show it as it is.
  await b.api('POST', '/api/v1/push', '{"items":[{"queue":"orders","payload":{"order":6,"big":12345678901234567890},"transactionId":"o-6"}]}');
  // A dead letter: the billing group fails its first message once (retryLimit 0).
  const popped = await b.api('GET', '/api/v1/pop/queue/orders/partition/eu?consumerGroup=billing&batch=1');
  const m = popped.messages[0];
  await b.api('POST', '/api/v1/ack/batch', { consumerGroup: 'billing', acknowledgments: [{ transactionId: m.transactionId, partitionId: popped.partitionId || m.partitionId, leaseId: popped.leaseId || m.leaseId, status: 'failed', error: 'card declined' }] });
  // Queue mode consumes one message of eu, so the browser shows every state but leased.
  await b.api('GET', '/api/v1/pop/queue/orders/partition/eu?batch=1&autoAck=true');
  await b.api('PUT', '/api/v1/kv/app/user/1', { value: { name: 'ada', langs: ['en', 'fr'] }, forever: true });
  await b.api('PUT', '/api/v1/kv/app/user/2', { value: { name: 'grace' }, forever: true });
  await b.api('PUT', '/api/v1/kv/app/config/limits', '{"value":{"max":12345678901234567890,"ratio":0.1},"forever":true}');
  await b.api('PUT', '/api/v1/kv/app/session/live', { value: 'token-1', ttlSeconds: 3600 });
  await b.api('PUT', '/api/v1/kv/app/session/gone', { value: 'token-0', ttlSeconds: 1 });
  const ops = [];
  for (let i = 0; i < 60; i++) ops.push({ op: 'put', ns: 'bulk', key: `k/${String(i).padStart(3, '0')}`, value: i, forever: true });
  await b.api('POST', '/api/v1/kv', { operations: ops });
  psql(dbUrl(DB), `INSERT INTO queen.kv_quota (tenant_id, enabled, max_rows, max_bytes) VALUES ('${TENANT}', true, 5000, 10485760)`);
  // The sweeper is off in these brokers: the expired key stays, greyed, for the browser to show.
  await waitUntil(async () => {
    const l = await b.api('POST', '/api/v1/resources/kv/list', { namespace: 'app', prefix: 'session/gone', includeExpired: true });
    return l.rows.length === 1 && l.rows[0].expired;
  }, 'session/gone to expire');
}

let browser;

before(async () => {
  psql(env('QUEEN_TEST_PG_URL'), `CREATE DATABASE ${DB}`);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--no-first-run', '--disable-gpu'],
  });
});

after(async () => {
  if (browser) await browser.close();
  try { psql(env('QUEEN_TEST_PG_URL'), `DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`); } catch { /* best effort */ }
});

describe('auth off', () => {
  let b; let page; let problems;
  before(async () => {
    b = await Broker.start();
    await seed(b);
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    problems = watch(page);
  });
  after(async () => {
    if (page) await page.close();
    if (b) await b.stop();
  });

  test('GET / is the console page, with a strict CSP and revalidated caching', async () => {
    const r = await fetch(b.base + '/');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/html/);
    assert.match(r.headers.get('content-security-policy'), /default-src 'none'; script-src 'self'/);
    assert.equal(r.headers.get('cache-control'), 'no-cache');
    assert.match(await r.text(), /<meta name="queen-auth" content="off">/);
    const again = await fetch(b.base + '/console/app.js', { headers: { 'If-None-Match': (await fetch(b.base + '/console/app.js')).headers.get('etag') } });
    assert.equal(again.status, 304);
    const missing = await fetch(b.base + '/console/nothing.js');
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).code, 'no_such_route');
  });

  test('overview: the tenant\'s totals as the API gives them, and a live chart from /metrics', async () => {
    await go(page, b.base, '#/');
    const o = await b.api('GET', '/api/v1/resources/overview');
    assert.equal(await field(page, 'queues'), String(o.queues));
    assert.equal(await field(page, 'messages'), String(o.messages.total));
    assert.equal(await field(page, 'deadLetters'), String(o.messages.deadLetters));
    assert.equal(await field(page, 'consumerGroups'), String(o.consumerGroups));
    assert.equal(await field(page, 'health'), 'healthy');
    const st = await b.api('GET', '/api/v1/status');
    assert.equal(await field(page, 'database'), `${st.databaseVersion}, connected`);
    assert.match(st.databaseVersion, /^PostgreSQL \d+$/);
    // Two samples make a rate: the chart draws a line per family once the second one is in.
    await page.waitForFunction(() => document.querySelectorAll('figure.chart polyline').length > 0 &&
      [...document.querySelectorAll('#families tbody td:nth-child(2)')].some((td) => td.textContent !== '0.00'), { timeout: 30000 });
    assert.ok((await texts(page, '#families tbody tr td:first-child')).includes('admin'));
    await labelled(page);
    await contrast(page);
    await shot(page, 'overview');
    clean(problems);
  });

  test('queues: every queue with its counts', async () => {
    await go(page, b.base, '#/queues');
    const list = await b.api('GET', '/api/v1/resources/queues');
    assert.deepEqual(await texts(page, '#queues tbody tr td:first-child'), list.queues.map((q) => q.name));
    const orders = list.queues.find((q) => q.name === 'orders');
    const cells = await texts(page, '#queues tbody tr[data-queue="orders"] td');
    assert.equal(cells[4], String(orders.messages.total));
    assert.equal(cells[5], String(orders.messages.pending));
    await shot(page, 'queues');
    clean(problems);
  });

  test('a queue: partitions and consumer groups with lag; seek a group after confirming', async () => {
    await go(page, b.base, '#/queues/orders');
    const parts = await b.api('GET', '/api/v1/resources/queues/orders/partitions');
    assert.deepEqual((await texts(page, '#partitions tbody tr td:first-child')).sort(), parts.partitions.map((p) => p.name).sort());
    const billing = (await b.api('GET', '/api/v1/consumer-groups/billing')).consumerGroups[0].queues.find((q) => q.queue === 'orders');
    const eu = billing.partitions.find((p) => p.partition === 'eu');
    const row = await texts(page, 'section[data-group="billing"] tbody tr[data-partition="eu"] td');
    assert.equal(row[1], String(eu.committedOffset));
    assert.equal(row[3], String(eu.lagMessages));
    assert.ok(Number(eu.committedOffset) > 0, 'billing consumed part of eu before the seek');
    await labelled(page);
    await contrast(page);
    await shot(page, 'queue');
    // Cancel first: nothing moves.
    await page.select('section[data-group="billing"] select', 'beginning');
    await page.click('section[data-group="billing"] button.seek');
    await page.waitForSelector('dialog#confirm[open]');
    await page.keyboard.press('Escape');
    await page.waitForSelector('dialog#confirm:not([open])');
    assert.equal((await b.api('GET', '/api/v1/consumer-groups/billing')).consumerGroups[0].queues[0].partitions.find((p) => p.partition === 'eu').committedOffset, eu.committedOffset);
    await page.click('section[data-group="billing"] button.seek');
    await confirmDialog(page);
    await waitUntil(async () => (await b.api('GET', '/api/v1/consumer-groups/billing')).consumerGroups[0].queues[0].partitions.every((p) => Number(p.committedOffset) === 0), 'the seek');
    await page.waitForSelector('#status p.ok'); // said once the page navigated to show the seek
    await settle(page, '/queues/orders');
    assert.equal((await texts(page, 'section[data-group="billing"] tbody tr[data-partition="eu"] td'))[1], '0');
    clean(problems);
  });

  test('messages: browse a partition with states, filter, view a payload, delete one', async () => {
    await go(page, b.base, '#/messages?queue=orders&partition=eu');
    const api = await b.api('GET', '/api/v1/messages?queue=orders&partition=eu&limit=50');
    assert.deepEqual(await texts(page, '#messages tbody tr td:nth-child(3)'), api.messages.map((m) => m.transactionId));
    assert.deepEqual(await page.$$eval('#messages tbody tr', (rs) => rs.map((r) => r.dataset.state)), api.messages.map((m) => m.state));
    await shot(page, 'messages');
    await go(page, b.base, '#/messages?queue=orders&partition=eu&state=pending');
    assert.deepEqual(await texts(page, '#messages tbody tr td:nth-child(3)'), api.messages.filter((m) => m.state === 'pending').map((m) => m.transactionId));
    // A message's payload, pretty-printed.
    await page.click('#messages tbody tr[data-tx="o-3"] a');
    await settle(page, '/messages/o-3');
    const shown = await page.$eval('article[data-tx="o-3"] pre.json', (e) => e.textContent);
    assert.deepEqual(JSON.parse(shown), { order: 3, lines: [{ sku: 's-3', qty: 3 }] });
    assert.ok(shown.includes('\n  "lines": ['), 'indented');
    await shot(page, 'message');
    await page.click('article[data-tx="o-3"] button.danger');
    await confirmDialog(page);
    await settle(page, '/messages');
    assert.deepEqual((await b.api('GET', '/api/v1/messages/o-3?queue=orders')).messages, []);
    clean(problems);
  });

  test('a payload keeps its numbers exactly', async () => {
    await go(page, b.base, '#/messages/o-6?queue=orders');
    assert.match(await page.$eval('article pre.json', (e) => e.textContent), /"big": 12345678901234567890/);
    clean(problems);
  });

  test('dead letters: listed with reason and attempts; requeue one after confirming', async () => {
    await go(page, b.base, '#/dlq');
    const dl = await b.api('GET', '/api/v1/dlq?limit=50');
    assert.equal(dl.messages.length, 1);
    const d = dl.messages[0];
    const cells = await texts(page, `#dlq tbody tr[data-id="${d.id}"] td`);
    assert.equal(cells[4], d.transactionId);
    assert.equal(cells[5], d.reason);
    assert.equal(cells[6], String(d.retryCount));
    assert.equal(cells[7], 'card declined');
    await labelled(page);
    await contrast(page);
    await shot(page, 'dlq');
    await page.click(`#dlq tbody tr[data-id="${d.id}"] button.requeue`);
    await confirmDialog(page);
    await waitUntil(async () => (await b.api('GET', '/api/v1/dlq?limit=50')).messages.length === 0, 'the requeue');
    await page.waitForSelector('#status p.ok');
    await settle(page, '/dlq');
    const copies = (await b.api('GET', `/api/v1/messages/${d.transactionId}?queue=orders&consumerGroup=billing`)).messages;
    assert.ok(copies.length >= 1, 'the requeued message is stored again');
    clean(problems);
  });

  test('kv: namespaces with key counts, and the tenant\'s quota and usage', async () => {
    await go(page, b.base, '#/kv');
    const ns = await b.api('GET', '/api/v1/resources/kv/namespaces');
    assert.deepEqual(await texts(page, '#namespaces tbody tr td:first-child'), ns.namespaces.map((n) => n.namespace));
    assert.deepEqual(await texts(page, '#namespaces tbody tr td:nth-child(2)'), ns.namespaces.map((n) => Number(n.keys).toLocaleString('en')));
    const q = await b.api('GET', '/api/v1/resources/kv/quota');
    assert.equal(q.maxRows, 5000);
    assert.match(await field(page, 'rows'), /of 5,000$/);
    assert.equal(await field(page, 'quota'), 'enabled');
    await shot(page, 'kv');
    clean(problems);
  });

  test('kv: browse by prefix, expired keys greyed, keyset pages forward and back', async () => {
    await go(page, b.base, '#/kv/app');
    const l = await b.api('POST', '/api/v1/resources/kv/list', { namespace: 'app', includeExpired: true, limit: 50 });
    assert.deepEqual(await texts(page, '#keys tbody tr td:first-child'), l.rows.map((r) => r.key));
    assert.deepEqual(await page.$$eval('#keys tbody tr.expired', (rs) => rs.map((r) => r.dataset.key)), ['session/gone']);
    assert.match(await page.$eval('#keys tbody tr[data-key="session/live"] td:nth-child(3)', (e) => e.textContent), /^in (59|60) min/);
    await labelled(page);
    await contrast(page);
    await shot(page, 'kv-browse');
    await page.type('input[name="prefix"]', 'user/');
    await unsettle(page);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => location.hash.includes('prefix=user'));
    await settle(page, '/kv/app');
    assert.deepEqual(await texts(page, '#keys tbody tr td:first-child'), ['user/1', 'user/2']);
    await go(page, b.base, '#/kv/bulk');
    const first = await texts(page, '#keys tbody tr td:first-child');
    assert.equal(first.length, 50);
    await unsettle(page);
    await page.click('a[rel="next"]');
    await page.waitForFunction(() => location.hash.includes('after='));
    await settle(page, '/kv/bulk');
    const second = await texts(page, '#keys tbody tr td:first-child');
    const api2 = await b.api('POST', '/api/v1/resources/kv/list', { namespace: 'bulk', after: first[49], limit: 50 });
    assert.deepEqual(second, api2.rows.map((r) => r.key));
    assert.equal(second.length, 10);
    assert.equal(await page.$('a[rel="next"]'), null);
    await unsettle(page);
    await page.click('a[rel="prev"]');
    await page.waitForFunction(() => !location.hash.includes('after='));
    await settle(page, '/kv/bulk');
    assert.deepEqual(await texts(page, '#keys tbody tr td:first-child'), first);
    clean(problems);
  });

  test('kv: a key\'s value, version and expiry; edit with compare-and-set', async () => {
    await go(page, b.base, `#/kv/app/key/${encodeURIComponent('user/1')}`);
    const before = await b.api('GET', '/api/v1/kv/app/user%2F1');
    assert.equal(await page.$eval('#version', (e) => e.textContent), String(before.version));
    assert.deepEqual(JSON.parse(await page.$eval('#value', (e) => e.textContent)), before.value);
    assert.equal(await page.$eval('#expires', (e) => e.textContent), 'never');
    await labelled(page);
    await contrast(page);
    await shot(page, 'kv-key');
    await page.$eval('#editor', (e) => { e.value = ''; });
    await page.type('#editor', '{"name":"ada","langs":["en"]}');
    await page.click('#save');
    await page.waitForSelector('#outcome p.ok');
    const after1 = await b.api('GET', '/api/v1/kv/app/user%2F1');
    assert.deepEqual(after1.value, { name: 'ada', langs: ['en'] });
    assert.notEqual(after1.version, before.version);
    assert.equal(await page.$eval('#version', (e) => e.textContent), String(after1.version));
    clean(problems);
  });

  test('kv: a stale edit shows the current value and overwrites nothing', async () => {
    await go(page, b.base, `#/kv/app/key/${encodeURIComponent('user/2')}`);
    // Someone else writes the key after the page read it.
    const theirs = await b.api('PUT', '/api/v1/kv/app/user/2', { value: { name: 'grace', by: 'someone else' }, forever: true });
    await page.$eval('#editor', (e) => { e.value = '{"name":"mine"}'; });
    await page.click('#save');
    await page.waitForSelector('#stale');
    const now = await b.api('GET', '/api/v1/kv/app/user%2F2');
    assert.deepEqual(now.value, { name: 'grace', by: 'someone else' }, 'nothing overwritten');
    assert.equal(now.version, theirs.version);
    assert.deepEqual(JSON.parse(await page.$eval('#stale pre', (e) => e.textContent)), now.value);
    assert.equal(await page.$eval('#version', (e) => e.textContent), String(now.version));
    assert.equal(await page.$eval('#editor', (e) => e.value), '{"name":"mine"}', 'the draft is kept');
    await shot(page, 'kv-stale');
    // Saving again, having seen the current value, replaces it.
    await page.click('#save');
    await page.waitForSelector('#outcome p.ok');
    assert.deepEqual((await b.api('GET', '/api/v1/kv/app/user%2F2')).value, { name: 'mine' });
    clean(problems);
  });

  test('kv: set an expiry, then delete after confirming; exact numbers survive an edit', async () => {
    await go(page, b.base, `#/kv/app/key/${encodeURIComponent('config/limits')}`);
    assert.match(await page.$eval('#value', (e) => e.textContent), /"max": 12345678901234567890/);
    await page.$eval('#ttl', (e) => { e.value = ''; });
    await page.type('#ttl', '600');
    await page.click('#set-ttl');
    await page.waitForSelector('#outcome p.ok');
    const got = await fetch(b.base + '/api/v1/kv/app/config%2Flimits').then((r) => r.text());
    assert.match(got, /"max": 12345678901234567890/, 'the value went back byte for byte');
    const exp = Date.parse(JSON.parse(got).expiresAt);
    assert.ok(exp > Date.now() + 500000 && exp <= Date.now() + 601000, 'expires in about 600 s');
    assert.match(await page.$eval('#expires', (e) => e.textContent), /^in 10 min/);
    await page.click('#delete');
    await confirmDialog(page);
    await settle(page, '/kv/app');
    assert.equal((await b.api('GET', '/api/v1/kv/app/config%2Flimits')).found, false);
    clean(problems);
  });

  test('keyboard: skip link first, then the sections, each with a visible focus ring', async () => {
    await go(page, b.base, '#/kv');
    await page.reload({ waitUntil: 'load' }); // a fresh document: focus starts at its top
    await settle(page, '/kv');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Skip to content');
    const seen = [];
    for (let i = 0; i < 7; i++) {
      await page.keyboard.press('Tab');
      seen.push(await page.evaluate(() => {
        const e = document.activeElement;
        const s = getComputedStyle(e);
        return { text: e.textContent.trim(), ring: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2 };
      }));
    }
    for (const name of ['Overview', 'Queues', 'Messages', 'Dead letters', 'KV']) assert.ok(seen.some((s) => s.text === name), `${name} is reachable by Tab`);
    assert.ok(seen.every((s) => s.ring), 'every focused element shows its focus ring');
    await page.keyboard.press('Enter'); // follows the focused link
    clean(problems);
  });

  test('a phone\'s width: no page scrolls sideways but its tables', async () => {
    await page.setViewport({ width: 390, height: 844, isMobile: true });
    for (const [hash, name] of [['#/', 'overview'], ['#/queues/orders', 'queue'], ['#/kv/app', 'kv-browse']]) {
      await go(page, b.base, hash);
      const wide = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
      assert.equal(wide, false, `${hash} fits 390 px`);
      await shot(page, `phone-${name}`);
    }
    await page.setViewport({ width: 1280, height: 900 });
    clean(problems);
  });
});

describe('auth on (QUEEN_AUTH=jwt)', () => {
  let b; let page; let problems;
  before(async () => {
    b = await Broker.start({ QUEEN_AUTH: 'jwt', QUEEN_JWT_SECRET: SECRET });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    problems = watch(page);
  });
  after(async () => {
    if (page) await page.close();
    if (b) await b.stop();
  });

  test('without a token the page asks for one and calls nothing', async () => {
    const r = await fetch(b.base + '/');
    assert.equal(r.status, 200, 'the page itself needs no token');
    assert.match(await r.text(), /content="jwt"/);
    await go(page, b.base, '#/');
    assert.equal(await page.$eval('#auth', (e) => e.hidden), false);
    assert.match(await page.$eval('main', (e) => e.textContent), /requires a token/);
    await shot(page, 'auth-sign-in');
    clean(problems);
  });

  test('a read token: the role shown, every write control disabled, nothing refused', async () => {
    await go(page, b.base, '#/');
    await page.$eval('#token', (e) => { e.value = ''; });
    await page.type('#token', READER);
    await page.click('#auth button[type="submit"]');
    await settle(page, '/');
    assert.equal(await page.$eval('#role', (e) => e.textContent), 'read');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('queen.token')), READER);
    assert.equal(await page.evaluate(() => localStorage.length), 0, 'the token is kept in session storage only');
    assert.match(await page.$eval('main', (e) => e.textContent), /needs the operator role/);
    const disabled = async (sel) => page.$$eval(sel, (els) => els.length > 0 && els.every((e) => e.disabled));
    await go(page, b.base, '#/queues/orders');
    assert.ok(await disabled('button.seek'), 'seek is disabled');
    await go(page, b.base, '#/dlq');
    assert.ok(await disabled('#requeue-all'), 'requeue all is disabled');
    await go(page, b.base, '#/messages/o-4?queue=orders');
    assert.ok(await disabled('article button.danger'), 'message delete is disabled');
    await go(page, b.base, `#/kv/app/key/${encodeURIComponent('user/1')}`);
    assert.ok(await disabled('#save, #set-ttl, #delete'), 'kv writes are disabled');
    assert.equal(await page.$eval('#save', (e) => e.title), 'needs the write role');
    await shot(page, 'auth-read-kv-key');
    await go(page, b.base, '#/kv');
    clean(problems);
  });

  test('an admin token: the controls are enabled; the live chart (broker-wide /metrics) needs an operator', async () => {
    await page.$eval('#token', (e) => { e.value = ''; });
    await page.type('#token', ADMIN);
    await page.click('#auth button[type="submit"]');
    await settle(page, '/kv');
    assert.equal(await page.$eval('#role', (e) => e.textContent), 'admin');
    await go(page, b.base, '#/queues/orders');
    assert.equal(await page.$eval('button.seek', (e) => e.disabled), false);
    await go(page, b.base, '#/');
    assert.match(await page.$eval('main', (e) => e.textContent), /needs the operator role/);
    await page.$eval('#token', (e) => { e.value = ''; });
    await page.type('#token', OPERATOR);
    await page.click('#auth button[type="submit"]');
    await settle(page, '/');
    assert.equal(await page.$eval('#role', (e) => e.textContent), 'operator');
    await page.waitForSelector('figure.chart svg');
    await page.click('#forget');
    await settle(page, '/');
    assert.match(await page.$eval('main', (e) => e.textContent), /requires a token/);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('queen.token')), null);
    clean(problems);
  });
});
