// Compiled by `tsc --noEmit` (tests/client/js.sh): the declarations describe the surface a program uses.
import { Queen, QueenError, PreconditionFailed, JsonNumber, parse, stringify, type Message, type Tx, type Row, type AckResult } from '@queen/client';

async function surface(): Promise<void> {
  const q = new Queen({ urls: ['http://127.0.0.1:6632', 'http://127.0.0.1:6633'], token: 't', maxAttempts: 3 });
  const got = await q.kv.get('app', 'greeting');
  if (got.found) console.log(got.value, got.version);
  const put = await q.kv.put('app', 'k', { n: 0.1, big: 12345678901234567890n }, { forever: true, expect: 0 });
  const applied: boolean = put.applied;
  await q.kv.putIfAbsent('app', 'k', 1, { ttlSeconds: 60, required: true });
  await q.kv.incr('app', 'n', 1, { forever: true, max: 10 });
  await q.kv.delete('app', 'k', { expect: 3 });
  if (got.version !== undefined) await q.kv.put('app', 'k', 1, { forever: true, expect: got.version }); // a Version is what expect takes
  const page = await q.kv.getPrefix('app', 'user/', { limit: 10, signal: AbortSignal.timeout(1000) });
  console.log(page.rows.length, page.nextAfter);
  // A write without exactly one expiry does not compile (clients/API.md, "Expiry").
  // @ts-expect-error no expiry
  await q.kv.put('app', 'k', 1);
  // @ts-expect-error no expiry
  await q.kv.put('app', 'k', 1, { expect: 0 });
  // @ts-expect-error both
  await q.kv.incr('app', 'n', 1, { ttlSeconds: 60, forever: true });
  // @ts-expect-error no expiry
  q.tx().kvPutIfAbsent('app', 'k', 1, { required: true });
  await q.push([{ queue: 'orders', data: { id: 3 } }]); // data, as the reference client's users write it
  // @ts-expect-error payload and data
  await q.push([{ queue: 'orders', data: 1, payload: 1 }]);
  const fromEnv = new Queen({ onRetry: (attempt: number, e: QueenError, waitMs: number) => console.log(attempt, e.kind, waitMs) });
  await fromEnv.close();
  for await (const row of q.kv.scan('app', 'user/', { pageSize: 100 })) {
    const r: Row = row;
    console.log(r.key);
  }
  await q.kv.batch().put('app', 'a', 1, { forever: true }).incr('app', 'n', 2, { forever: true }).apply();
  await q.queue('orders').push([{ payload: { id: 1 }, transactionId: 'o-1' }]);
  const popped = await q.pop('orders', { wait: true, timeoutMs: 1000 });
  const m: Message | undefined = popped?.messages[0];
  if (m) {
    await q.leaseExtend(m, 60);
    const r = await q.tx().ack(m).push('invoices', [{ payload: 1 }]).kvPutIfAbsent('done', m.transactionId, true, { forever: true, required: true }).commit();
    if (!r.success) console.log(r.reason, r.failedIndex);
    const one: AckResult = await q.ack(m, { status: 'failed', error: 'boom' });
    const many: AckResult[] = await q.ack([m]);
    console.log(one.success, many.length);
  }
  const ctl = new AbortController();
  const stats = await q.consume('orders', async (msg: Message, tx: Tx) => {
    tx.kvIncr('stats', 'orders', 1, { forever: true });
    return msg.data !== null;
  }, { concurrency: 4, signal: ctl.signal });
  console.log(stats.handled + stats.failed, applied);
  try {
    await q.kv.put('app', 'k', 1, { forever: true, required: true, expect: 0 });
  } catch (e) {
    if (e instanceof PreconditionFailed) console.log(e.failedIndex, e.kvReason, e.value);
    else if (e instanceof QueenError) console.log(e.status, e.code, e.retryAfter);
  }
  const v = parse('12345678901234567890');
  console.log(stringify(v), new JsonNumber('0.10000000000000000001').text);
  await q.close();
}
void surface;

// Streams: the builder, the worker, the gate.
import { Stream, tokenBucketGate } from '@queen/client';
{
  const s = Stream.from('in').keyBy((v) => v.user).windowTumbling(60, { eventTime: (v) => v.ts })
    .aggregate({ count: () => 1 }).map((acc, ctx) => ({ ...acc, start: ctx.windowStart })).to('out');
  const h: string = s.configHash();
  void h;
  const gated = Stream.from('in').gate(tokenBucketGate(10, 1)).to('out');
  const ac = new AbortController();
  const run = async (q: Queen) => { const st = await gated.worker(q, 'q1', { batch: 10 }).run({ signal: ac.signal }); return st.messages; };
  void run;
}
