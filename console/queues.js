// Queues: the tenant's queues with depth, partitions, oldest pending age and push/ack rates; a
// queue's page with its partitions and its consumer groups (lag, lease holders and expiries), and a
// seek of a group (admin, after a confirmation).
import { call, can, enc, get } from './api.js';
import { card, confirmAction, errorBox, field, guarded, h, num, row, flash, table, when } from './ui.js';

const EVERY_MS = 5000;
const QUEUE_MODE = '__QUEUE_MODE__';

// Per queue: offsets pushed (sum of partition heads) and consumed in queue mode, and the age of its
// oldest message queue mode has not consumed.
function perQueue(groups) {
  const out = new Map();
  for (const g of groups.consumerGroups) {
    for (const q of g.queues) {
      const acc = out.get(q.queue) || { head: 0, committed: 0, oldest: 0, seen: false };
      if (g.name === QUEUE_MODE) {
        acc.seen = true;
        acc.oldest = Math.max(acc.oldest, Number(q.lagSeconds));
        for (const p of q.partitions) {
          acc.head += Number(p.headOffset);
          acc.committed += Number(p.committedOffset);
        }
      }
      out.set(q.queue, acc);
    }
  }
  return out;
}

const rate = (now, before, secs, key) => (before && secs > 0 ? Math.max(0, (now[key] - before[key]) / secs).toFixed(2) : '—');

export async function renderList(main, { current }) {
  const holder = h('div', {});
  main.replaceChildren(h('h1', {}, 'Queues'), h('p', { class: 'hint' }, 'Rates are measured between refreshes (every 5 s); oldest pending is queue mode\'s.'), holder);
  let before = null;
  let beforeAt = 0;
  async function tick() {
    const [list, groups] = await Promise.all([get('/api/v1/resources/queues'), get('/api/v1/consumer-groups')]);
    if (!current()) return;
    const now = performance.now();
    const stats = perQueue(groups);
    const secs = (now - beforeAt) / 1000;
    const rows = list.queues.map((q) => {
      const s = stats.get(q.name);
      const b = before && before.get(q.name);
      return row([
        h('a', { href: `#/queues/${enc(q.name)}` }, q.name),
        q.namespace || '—', q.task || '—', num(q.partitions),
        num(q.messages.total), num(q.messages.pending), num(q.messages.processing),
        s && s.seen ? `${num(s.oldest)} s` : '—',
        s && s.seen ? rate(s, b, secs, 'head') : '—',
        s && s.seen ? rate(s, b, secs, 'committed') : '—',
      ], { dataset: { queue: q.name } });
    });
    before = stats;
    beforeAt = now;
    holder.replaceChildren(table(`${list.queues.length} queue(s)`,
      ['Queue', 'Namespace', 'Task', 'Partitions', 'Messages', 'Pending', 'Processing', 'Oldest pending', 'Push/s', 'Ack/s'], rows, { id: 'queues' }));
  }
  await tick();
  const timer = setInterval(() => tick().catch((err) => holder.replaceChildren(errorBox(err))), EVERY_MS);
  return () => clearInterval(timer);
}

export async function renderQueue(main, { args: [name] }) {
  const [detail, parts, groups] = await Promise.all([
    get(`/api/v1/resources/queues/${enc(name)}`),
    get(`/api/v1/resources/queues/${enc(name)}/partitions`),
    get('/api/v1/consumer-groups'),
  ]);
  const mine = groups.consumerGroups
    .map((g) => ({ name: g.name, q: g.queues.find((q) => q.queue === name) }))
    .filter((g) => g.q);
  main.replaceChildren(
    h('h1', {}, 'Queue ', h('span', { class: 'name' }, name)),
    h('p', {}, h('a', { href: '#/queues' }, '← All queues'), ' · ',
      h('a', { href: `#/messages?queue=${enc(name)}` }, 'Browse messages'), ' · ',
      h('a', { href: `#/dlq?queue=${enc(name)}` }, 'Dead letters')),
    h('div', { class: 'cards' },
      card('Namespace', detail.namespace || '—'), card('Task', detail.task || '—'),
      card('Messages', num(detail.messages.total), 'messages'), card('Pending', num(detail.messages.pending), 'pending'),
      card('Processing', num(detail.messages.processing)), card('Dead letters', num(detail.deadLetters), 'deadLetters'),
      card('Consumer groups', num(detail.consumerGroups), 'consumerGroups'), card('Created', when(detail.createdAt))),
    table('Partitions', ['Partition', 'Messages', 'Head offset', 'Last push', 'Created'],
      parts.partitions.map((p) => row([
        h('a', { href: `#/messages?queue=${enc(name)}&partition=${enc(p.name)}` }, p.name),
        num(p.messages), num(p.headOffset), when(p.lastPushAt), when(p.createdAt)], { dataset: { partition: p.name } })),
      { id: 'partitions' }),
    h('h2', {}, 'Consumer groups'),
    ...(mine.length ? mine.map((g) => groupSection(name, g)) : [h('p', {}, 'No consumer group has read this queue yet.')]),
    h('details', {}, h('summary', {}, 'Options'), h('pre', {}, JSON.stringify(detail.options, null, 2))));
  return null;
}

function groupSection(queue, g) {
  const label = g.name === QUEUE_MODE ? 'queue mode' : g.name;
  const id = `g-${Math.random().toString(36).slice(2, 9)}`;
  const to = h('select', {}, h('option', { value: 'beginning' }, 'the beginning'), h('option', { value: 'end' }, 'the end'),
    h('option', { value: 'instant' }, 'an instant…'));
  const instant = h('input', { type: 'datetime-local', step: 1, disabled: true });
  to.addEventListener('change', () => { instant.disabled = to.value !== 'instant'; });
  const out = h('div', { 'aria-live': 'polite' });
  const admin = can('admin');
  const seek = h('form', {
    class: 'inline', 'aria-label': `Seek ${label}`,
    onsubmit: async (e) => {
      e.preventDefault();
      let target = to.value;
      if (target === 'instant') {
        if (!instant.value) { out.replaceChildren(errorBox('Choose an instant.')); return; }
        target = new Date(instant.value).toISOString();
      }
      const ok = await confirmAction('Seek consumer group',
        `Move ${label}'s cursor on every partition of ${queue} to ${target}? Messages after it are delivered again (or skipped).`, 'Seek');
      if (!ok) return;
      try {
        const r = await call('POST', `/api/v1/consumer-groups/${enc(g.name)}/queues/${enc(queue)}/seek`, { to: target });
        flash(`Seeked ${label} on ${queue} to ${target}: ${r.partitions.length} partition(s).`, 'ok');
        location.hash = `#/queues/${enc(queue)}?seeked=${Date.now()}`;
      } catch (err) {
        out.replaceChildren(errorBox(err));
      }
    },
  }, field('Seek to', to), field('Instant (local time)', instant),
  h('button', guarded(admin, 'admin', { type: 'submit', class: 'seek' }), 'Seek…'));
  return h('section', { class: 'group', 'aria-labelledby': id, dataset: { group: g.name } },
    h('h3', { id }, label, ' ', h('small', {}, `lag ${num(g.q.lagMessages)} message(s), ${num(g.q.lagSeconds)} s`)),
    table(`Partitions of ${label}`, ['Partition', 'Committed', 'Head', 'Lag', 'Lag (s)', 'Lease', 'Lease expires'],
      g.q.partitions.map((p) => row([p.partition, num(p.committedOffset), num(p.headOffset), num(p.lagMessages),
        num(p.lagSeconds), p.leaseId ? h('code', {}, p.leaseId) : '—', p.leaseExpiresAt ? h('time', { datetime: p.leaseExpiresAt }, p.leaseExpiresAt) : '—'],
      { dataset: { partition: p.partition } }))),
    seek, out);
}
