// Messages: a partition's stored messages a page at a time with their state for one consumer group
// (filtered by state on the page), a message's payload pretty-printed, and its deletion (admin).
import { call, can, enc, get, qs } from './api.js';
import { compact, confirmAction, errorBox, field, guarded, h, num, pretty, row, flash, table, when } from './ui.js';

const STATES = ['pending', 'leased', 'consumed', 'dead'];
const PAGE = 50;

export async function renderBrowse(main, { query }) {
  const queue = query.get('queue') || '';
  let partition = query.get('partition') || '';
  const group = query.get('consumerGroup') || '';
  const state = query.get('state') || '';
  const after = query.get('after') || '';
  const queues = await get('/api/v1/resources/queues');
  const parts = queue ? await get(`/api/v1/resources/queues/${enc(queue)}/partitions`) : { partitions: [] };
  // Browsing reads one partition (the API's default is "Default").
  if (!partition && parts.partitions.length) {
    partition = parts.partitions.some((p) => p.name === 'Default') ? 'Default' : parts.partitions[0].name;
  }
  const qSel = h('select', { name: 'queue' }, h('option', { value: '' }, '(choose a queue)'),
    queues.queues.map((q) => h('option', { value: q.name, selected: q.name === queue }, q.name)));
  const pSel = h('select', { name: 'partition' },
    parts.partitions.map((p) => h('option', { value: p.name, selected: p.name === partition }, p.name)));
  const gIn = h('input', { name: 'consumerGroup', value: group, placeholder: 'queue mode' });
  const sSel = h('select', { name: 'state' }, h('option', { value: '' }, '(any state)'),
    STATES.map((s) => h('option', { value: s, selected: s === state }, s)));
  const form = h('form', {
    class: 'filters', 'aria-label': 'Which messages',
    onsubmit: (e) => {
      e.preventDefault();
      location.hash = '#/messages' + qs({ queue: qSel.value, partition: qSel.value === queue ? pSel.value : '', consumerGroup: gIn.value.trim(), state: sSel.value });
    },
  }, field('Queue', qSel), field('Partition', pSel), field('Consumer group', gIn), field('State', sSel), h('button', { type: 'submit' }, 'Show'));
  qSel.addEventListener('change', () => form.requestSubmit());
  main.replaceChildren(h('h1', {}, 'Messages'), form);
  if (!queue) { main.append(h('p', {}, 'Choose a queue to browse its messages.')); return null; }
  const page = await get('/api/v1/messages' + qs({ queue, partition, consumerGroup: group, limit: PAGE, after }));
  const shown = page.messages.filter((m) => !state || m.state === state);
  main.append(
    table(`${shown.length} of ${page.messages.length} message(s) on this page${state ? ` (state ${state})` : ''}`,
      ['Offset', 'Partition', 'Transaction id', 'State', 'Created', 'Producer', 'Payload'],
      shown.map((m) => row([num(m.offset), m.partition,
        h('a', { href: `#/messages/${enc(m.transactionId)}` + qs({ queue, consumerGroup: group }) }, m.transactionId),
        h('span', { class: `state ${m.state}` }, m.state), when(m.createdAt), m.producer || '—',
        h('code', { class: 'preview' }, compact(m.data).slice(0, 80))], { dataset: { tx: m.transactionId, state: m.state } })),
      { id: 'messages' }),
    h('nav', { class: 'pager', 'aria-label': 'Pages' },
      after ? h('a', { href: '#/messages' + qs({ queue, partition, consumerGroup: group, state }) }, '⇤ First page') : null,
      page.nextAfter !== null ? h('a', { href: '#/messages' + qs({ queue, partition, consumerGroup: group, state, after: String(page.nextAfter) }) }, 'Next page →') : null));
  return null;
}

export async function renderMessage(main, { args: [tx], query }) {
  const queue = query.get('queue') || '';
  const group = query.get('consumerGroup') || '';
  const found = await get(`/api/v1/messages/${enc(tx)}` + qs({ queue, consumerGroup: group }));
  const out = h('div', { 'aria-live': 'polite' });
  const admin = can('admin');
  main.replaceChildren(h('h1', {}, 'Message ', h('span', { class: 'name' }, tx)),
    h('p', {}, h('a', { href: '#/messages' + qs({ queue, consumerGroup: group }) }, '← Back to the messages')), out);
  if (!found.messages.length) { main.append(h('p', {}, 'No stored message has this transaction id.')); return null; }
  for (const m of found.messages) {
    main.append(h('article', { class: 'message', dataset: { tx: m.transactionId } },
      h('dl', { class: 'facts' },
        fact('Queue', m.queue), fact('Partition', m.partition), fact('Offset', num(m.offset)),
        fact('State', h('span', { class: `state ${m.state}` }, m.state)), fact('Consumer group', m.consumerGroup),
        fact('Created', when(m.createdAt)), fact('Producer', m.producer || '—'), fact('Trace id', m.traceId || '—')),
      h('h2', {}, 'Payload'),
      h('pre', { class: 'json', tabindex: 0, 'aria-label': 'Payload' }, pretty(m.data)),
      h('button', guarded(admin, 'admin', {
        class: 'danger',
        onclick: async () => {
          if (!(await confirmAction('Delete message', `Delete message ${m.transactionId} from ${m.queue} / ${m.partition}? This cannot be undone.`, 'Delete'))) return;
          try {
            const r = await call('DELETE', `/api/v1/messages/${enc(m.transactionId)}` + qs({ queue: m.queue, partition: m.partition }));
            flash(`Deleted ${r.deleted} message(s).`, 'ok');
            location.hash = '#/messages' + qs({ queue: m.queue, partition: m.partition, consumerGroup: group });
          } catch (err) {
            out.replaceChildren(errorBox(err));
          }
        },
      }), 'Delete…')));
  }
  return null;
}

export const fact = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
