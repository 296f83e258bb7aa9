// Overview: the broker's health and version, the tenant's totals, and (operator: /metrics needs it) the
// request rate and p99 latency by route family, refreshed live, with the pool and the sweeper.
import { can, get } from './api.js';
import { lineChart } from './chart.js';
import { card, errorBox, h, num, table, row } from './ui.js';

const EVERY_MS = 2000;
const KEEP = 60; // samples in the chart: two minutes

// Route patterns grouped the way an operator thinks of them.
export function family(pattern) {
  if (pattern.includes('/kv')) return 'kv';
  if (pattern.startsWith('/api/v1/push')) return 'push';
  if (pattern.startsWith('/api/v1/pop')) return 'pop';
  if (pattern.startsWith('/api/v1/ack') || pattern.startsWith('/api/v1/lease')) return 'ack';
  if (pattern.startsWith('/api/v1/transaction')) return 'transaction';
  if (pattern === '/' || pattern.startsWith('/console')) return 'console';
  if (pattern === '/health' || pattern.startsWith('/metrics')) return 'ops';
  return 'admin';
}

// Per family: requests and cumulative latency buckets, summed over its routes.
function byFamily(metrics) {
  const out = new Map();
  for (const l of metrics.http.latency) {
    const f = family(l.route);
    const acc = out.get(f) || { count: 0, buckets: {} };
    acc.count += Number(l.count);
    for (const [le, n] of Object.entries(l.buckets)) acc.buckets[le] = (acc.buckets[le] || 0) + Number(n);
    out.set(f, acc);
  }
  return out;
}

// The upper bound of the bucket holding the 99th percentile of the requests between two samples.
function p99(before, after) {
  const n = after.count - (before ? before.count : 0);
  if (n <= 0) return null;
  const les = Object.keys(after.buckets).map(Number).sort((a, b) => a - b);
  for (const le of les) {
    const k = String(Object.keys(after.buckets).find((x) => Number(x) === le));
    const c = after.buckets[k] - (before ? before.buckets[k] || 0 : 0);
    if (c >= 0.99 * n) return le * 1000;
  }
  return Infinity;
}

export async function render(main, { current }) {
  const [health, status, res] = await Promise.all([get('/health'), get('/api/v1/status'), get('/api/v1/resources/overview')]);
  const live = h('section', { 'aria-labelledby': 'live-h' }, h('h2', { id: 'live-h' }, 'Requests'));
  main.replaceChildren(
    h('h1', {}, 'Overview'),
    h('section', { 'aria-labelledby': 'broker-h', class: 'cards' },
      h('h2', { id: 'broker-h', class: 'sr-only' }, 'Broker'),
      card('Broker', health.status, 'health'),
      card('Queen', status.version, 'version'),
      card('Database', `${status.databaseVersion}, ${status.database}`, 'database'),
      card('Maintenance', status.maintenance.maintenance ? 'on' : 'off', 'maintenance')),
    h('section', { 'aria-labelledby': 'tenant-h', class: 'cards' },
      h('h2', { id: 'tenant-h', class: 'sr-only' }, 'This tenant'),
      card('Queues', num(res.queues), 'queues'),
      card('Partitions', num(res.partitions), 'partitions'),
      card('Consumer groups', num(res.consumerGroups), 'consumerGroups'),
      card('Messages', num(res.messages.total), 'messages'),
      card('Pending', num(res.messages.pending), 'pending'),
      card('Processing', num(res.messages.processing), 'processing'),
      card('Dead letters', num(res.messages.deadLetters), 'deadLetters'),
      card('Pushed last minute', num(res.pushedLastMinute), 'pushedLastMinute')),
    live);
  if (!can('operator')) {
    live.append(h('p', {}, 'The request rates come from /metrics, which needs the operator role.'));
    return null;
  }
  const history = new Map(); // family -> {rate: [], p99: []}
  let last = null;
  let lastAt = 0;
  const body = h('div', {});
  live.append(body);
  async function tick() {
    let m;
    try {
      m = await get('/metrics');
    } catch (err) {
      body.replaceChildren(errorBox(err));
      return;
    }
    if (!current()) return;
    const now = performance.now();
    const fams = byFamily(m);
    const rows = [];
    for (const [f, v] of [...fams].sort()) {
      const before = last && last.get(f);
      const secs = last ? (now - lastAt) / 1000 : 0;
      const rate = secs > 0 ? (v.count - (before ? before.count : 0)) / secs : 0;
      const p = last ? p99(before, v) : null;
      const hist = history.get(f) || { rate: [] };
      hist.rate.push(rate);
      if (hist.rate.length > KEEP) hist.rate.shift();
      history.set(f, hist);
      rows.push(row([f, rate.toFixed(2), p === null ? '—' : p === Infinity ? '> 60 s' : `≤ ${p} ms`, num(v.count)], { dataset: { family: f } }));
    }
    last = fams;
    lastAt = now;
    const e = m.engine || {};
    const db = m.http.database || {};
    body.replaceChildren(
      lineChart('Requests per second by route family', new Map([...history].map(([f, v]) => [f, v.rate])), 'req/s'),
      table('By route family (since the last sample)', ['Family', 'req/s', 'p99', 'Total'], rows, { id: 'families' }),
      h('div', { class: 'cards' },
        card('Request connections', `${num(db.inFlight)} busy / ${num(db.connections)}`, 'dbConnections'),
        card('Waiting for a connection', num(db.waiting), 'dbWaiting'),
        card('Pool in use', e.pool ? `${num(e.pool.inUse)} / ${num(e.pool.size)}` : '—', 'pool'),
        card('Sweeper lag', e.sweeper ? (e.sweeper.enabled ? `${num(e.sweeper.lagMs)} ms` : 'off here') : '—', 'sweeperLag'),
        card('Long polls waiting', num(m.http.longPollsWaiting), 'longPolls')));
  }
  await tick();
  const timer = setInterval(tick, EVERY_MS);
  return () => clearInterval(timer);
}
