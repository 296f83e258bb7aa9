"""Exactly-once processing with the Python client: a consumer whose effect, marker and ack commit in
one transaction. A message delivered twice (its first handler's commit lost, say) finds its marker and
its transaction rolls back whole, so the effect is counted once.

    python3 examples/exactly_once.py http://127.0.0.1:6632
"""
import sys
import threading
import uuid

from queen_client import Message, Queen, Tx

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6632"
run = uuid.uuid4().hex[:8]
queue, ns = f"orders-{run}", f"billing-{run}"

with Queen(url) as q:
    q.queue(queue).push([{"payload": {"order": n, "amount": "12.50"}, "transactionId": f"order-{n}"}
                         for n in range(3)])
    stop = threading.Event()
    seen = []

    def handle(m: Message, tx: Tx) -> None:
        # marker + effect + ack: one transaction, so the effect happens once per message
        tx.kv_put_if_absent(ns, f"done/{m.transaction_id}", True, forever=True, required=True)
        tx.kv_incr(ns, "invoices", 1, forever=True)
        seen.append(m.transaction_id)
        if len(seen) == 3:
            stop.set()

    q.consume(queue, handle, concurrency=2, poll=0.3, stop=stop)

    # Deliver order-0 "again": its marker is there, so the bundle rolls back whole.
    q.queue(queue).push([{"payload": {"order": 0}, "transactionId": "order-0-again"}])
    popped = q.pop(queue, wait=True, timeout=5)
    assert popped is not None
    again = popped.messages[0]
    r = (q.tx().ack(again).kv_put_if_absent(ns, "done/order-0", True, forever=True, required=True)
         .kv_incr(ns, "invoices", 1, forever=True).commit())
    print("redelivery committed:", r.success, "reason:", r.reason)
    q.ack(again)
    invoices = q.kv.get(ns, "invoices").value
    print("invoices:", invoices)
    if invoices == 3 and not r.success:
        print("effect applied once per message")
    else:
        sys.exit(1)
