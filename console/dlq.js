// Dead letters: the tenant's dead letters a page at a time with reason and attempts, filtered by
// queue; requeue one, or all of a queue (admin, after a confirmation).
import { call, can, enc, get, qs } from './api.js';
import { compact, confirmAction, errorBox, field, guarded, h, num, row, flash, table, when } from './ui.js';

const PAGE = 50;

export async function render(main, { query }) {
  const queue = query.get('queue') || '';
  const after = query.get('after') || '';
  const [queues, page] = await Promise.all([get('/api/v1/resources/queues'), get('/api/v1/dlq' + qs({ queue, limit: PAGE, after }))]);
  const admin = can('admin');
  const out = h('div', { 'aria-live': 'polite' });
  const qSel = h('select', { name: 'queue' }, h('option', { value: '' }, '(every queue)'),
    queues.queues.map((q) => h('option', { value: q.name, selected: q.name === queue }, q.name)));
  const requeue = async (body, what) => {
    if (!(await confirmAction('Requeue dead letters', `Requeue ${what}? Each goes back to the end of its partition for its consumer group, with its attempts reset.`, 'Requeue'))) return;
    try {
      const r = await call('POST', '/api/v1/dlq/requeue', body);
      flash(`Requeued ${r.requeued} dead letter(s) of ${r.queue}${r.remaining ? `; ${r.remaining} remain` : ''}.`, 'ok');
      location.hash = '#/dlq' + qs({ queue, t: Date.now() });
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  };
  main.replaceChildren(h('h1', {}, 'Dead letters'),
    h('form', {
      class: 'filters', 'aria-label': 'Which dead letters',
      onsubmit: (e) => { e.preventDefault(); location.hash = '#/dlq' + qs({ queue: qSel.value }); },
    }, field('Queue', qSel), h('button', { type: 'submit' }, 'Show'),
    h('button', guarded(admin, 'admin', {
      type: 'button', class: 'danger', id: 'requeue-all',
      disabled: !queue, title: queue ? undefined : 'choose a queue first',
      onclick: () => requeue({ queue }, `every dead letter of ${queue}`),
    }), 'Requeue all…')),
    out,
    table(`${page.messages.length} dead letter(s) on this page`,
      ['Id', 'Queue', 'Partition', 'Group', 'Transaction id', 'Reason', 'Attempts', 'Error', 'Failed', 'Payload', ''],
      page.messages.map((m) => row([num(m.id), h('a', { href: `#/queues/${enc(m.queue)}` }, m.queue), m.partition,
        m.consumerGroup === '__QUEUE_MODE__' ? 'queue mode' : m.consumerGroup, m.transactionId, m.reason, num(m.retryCount),
        m.errorMessage || '—', when(m.failedAt), h('code', { class: 'preview' }, compact(m.data).slice(0, 60)),
        h('button', guarded(admin, 'admin', {
          type: 'button', class: 'requeue', 'aria-label': `Requeue dead letter ${m.id}`,
          onclick: () => requeue({ queue: m.queue, ids: [Number(m.id)] }, `dead letter ${m.id} (${m.transactionId}) of ${m.queue}`),
        }), 'Requeue…')], { dataset: { id: String(m.id), tx: m.transactionId } })),
      { id: 'dlq' }),
    h('nav', { class: 'pager', 'aria-label': 'Pages' },
      after ? h('a', { href: '#/dlq' + qs({ queue }) }, '⇤ First page') : null,
      page.nextAfter !== null ? h('a', { href: '#/dlq' + qs({ queue, after: String(page.nextAfter) }) }, 'Next page →') : null));
  return null;
}
