// Exactly-once processing with the JS client: a consumer whose effect, marker and ack commit in one
// transaction. A message delivered twice finds its marker and its transaction rolls back whole, so the
// effect is counted once.
//
//   node examples/exactly-once.js http://127.0.0.1:6632
import { Queen } from '@queen/client';

const url = process.argv[2] ?? 'http://127.0.0.1:6632';
const run = Math.random().toString(36).slice(2, 10);
const queue = `orders-${run}`, ns = `billing-${run}`;
const q = new Queen(url);

await q.queue(queue).push([0, 1, 2].map((n) => ({ payload: { order: n, amount: '12.50' }, transactionId: `order-${n}` })));

const stop = new AbortController();
let seen = 0;
await q.consume(queue, async (m, tx) => {
  // marker + effect + ack: one transaction, so the effect happens once per message
  tx.kvPutIfAbsent(ns, `done/${m.transactionId}`, true, { forever: true, required: true });
  tx.kvIncr(ns, 'invoices', 1, { forever: true });
  if (++seen === 3) stop.abort();
}, { concurrency: 2, pollMs: 300, signal: stop.signal });

// Deliver order-0 "again": its marker is there, so the bundle rolls back whole.
await q.queue(queue).push([{ payload: { order: 0 }, transactionId: 'order-0-again' }]);
const again = (await q.pop(queue, { wait: true, timeoutMs: 5000 })).messages[0];
const r = await q.tx().ack(again).kvPutIfAbsent(ns, 'done/order-0', true, { forever: true, required: true })
  .kvIncr(ns, 'invoices', 1, { forever: true }).commit();
console.log('redelivery committed:', r.success, 'reason:', r.reason);
await q.ack(again);
const invoices = (await q.kv.get(ns, 'invoices')).value;
console.log('invoices:', invoices);
await q.close();
if (invoices === 3 && !r.success) console.log('effect applied once per message');
else process.exit(1);
