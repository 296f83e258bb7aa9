package queen

import (
	"context"
	"encoding/json"
)

// Tx builds one transaction: acks, pushes and kv ops that commit together
// or not at all. Operations keep the order they were added in; consecutive
// pushes share one push operation; kv ops follow the operations.
type Tx struct {
	ops       []map[string]any
	kv        []KVOp
	leases    []string
	openPush  bool  // the last operation is a push still taking items
	carriesID bool  // an ack or an item with a transactionId: a repeat rolls back whole
	err       error // the first op refused while building (a bad expiry): JSON and Commit return it
}

// NewTx starts an empty transaction.
func NewTx() *Tx { return &Tx{} }

// Ack adds the settlement of a popped message.
func (t *Tx) Ack(a AckItem) *Tx {
	t.openPush = false
	op := map[string]any{"type": "ack", "transactionId": a.TransactionID, "partitionId": a.PartitionID}
	if a.LeaseID != "" {
		op["leaseId"] = a.LeaseID
	}
	if a.Status != "" {
		op["status"] = a.Status
	}
	if a.ConsumerGroup != "" {
		op["consumerGroup"] = a.ConsumerGroup
	}
	t.ops = append(t.ops, op)
	t.carriesID = true
	return t
}

// Push adds one message to push.
func (t *Tx) Push(item PushItem) *Tx {
	if !t.openPush {
		t.ops = append(t.ops, map[string]any{"type": "push", "items": []PushItem{}})
		t.openPush = true
	}
	last := t.ops[len(t.ops)-1]
	last["items"] = append(last["items"].([]PushItem), item)
	if item.TransactionID != "" {
		t.carriesID = true
	}
	return t
}

// KV adds a kv op made by GetOp, PutOp, PutIfAbsentOp, DeleteOp, IncrOp,
// GetManyOp or GetPrefixOp. An op refused where it was made (a bad expiry)
// is kept: JSON and Commit return the first such error.
func (t *Tx) KV(op KVOp) *Tx {
	if err := op.check(); err != nil {
		if t.err == nil {
			t.err = err
		}
		return t
	}
	t.kv = append(t.kv, op)
	return t
}

// KVPut adds a put, as Client.Put takes it.
func (t *Tx) KVPut(ns, key string, value any, exp Expiry, conds ...Cond) *Tx {
	return t.KV(PutOp(ns, key, value, exp, conds...))
}

// KVPutIfAbsent adds a putIfAbsent, as Client.PutIfAbsent takes it.
func (t *Tx) KVPutIfAbsent(ns, key string, value any, exp Expiry, conds ...Cond) *Tx {
	return t.KV(PutIfAbsentOp(ns, key, value, exp, conds...))
}

// KVDelete adds a delete, as Client.Delete takes it.
func (t *Tx) KVDelete(ns, key string, conds ...Cond) *Tx { return t.KV(DeleteOp(ns, key, conds...)) }

// KVIncr adds an incr, as Client.Incr takes it.
func (t *Tx) KVIncr(ns, key string, delta float64, exp Expiry, conds ...Cond) *Tx {
	return t.KV(IncrOp(ns, key, delta, exp, conds...))
}

// RequireLease makes the commit fail unless leaseID is still held.
func (t *Tx) RequireLease(leaseID string) *Tx {
	t.leases = append(t.leases, leaseID)
	return t
}

// JSON is the bundle as it is sent.
func (t *Tx) JSON() ([]byte, error) {
	if t.err != nil {
		return nil, t.err
	}
	m := map[string]any{}
	if len(t.ops) > 0 {
		m["operations"] = t.ops
	}
	if len(t.kv) > 0 {
		m["kv"] = t.kv
	}
	if len(t.leases) > 0 {
		m["requiredLeases"] = t.leases
	}
	return marshal(m)
}

// TxResult is the transaction's answer. A bundle that rolled back is not
// an error: Success is false with Reason (and, for a lost kv op, the
// verdict's members). Raw is the whole body.
type TxResult struct {
	Success       bool              `json:"success"`
	TransactionID string            `json:"transactionId"`
	Reason        string            `json:"reason"`
	FailedIndex   *int              `json:"failedIndex"`
	KVReason      string            `json:"kvReason"`
	Value         json.RawMessage   `json:"value"`
	Results       []json.RawMessage `json:"results"`
	Raw           json.RawMessage   `json:"-"`
}

// Commit sends the bundle. An error means it was refused (4xx) or no
// answer was had; a rollback is a result with Success false. Retried on
// 429/503/timeouts only when it carries a transactionId.
func (c *Client) Commit(ctx context.Context, t *Tx) (*TxResult, error) {
	body, err := t.JSON()
	if err != nil {
		return nil, err
	}
	rep, err := c.do(ctx, request{method: "POST", path: "/api/v1/transaction", body: body, safe: t.carriesID})
	if err != nil {
		return nil, err
	}
	var r TxResult
	if err := decode(rep, &r); err != nil {
		return nil, err
	}
	r.Raw = rep.body
	return &r, nil
}
