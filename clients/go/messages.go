package queen

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"
)

// PushItem is one message to push. Payload is any JSON (json.RawMessage
// passes through byte for byte). A TransactionID makes the push safe to
// repeat: the broker answers a repeat "duplicate".
type PushItem struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition,omitempty"`
	Payload       any    `json:"payload"`
	TransactionID string `json:"transactionId,omitempty"`
}

// PushResult is the broker's answer for one pushed item.
type PushResult struct {
	Index         int             `json:"index"`
	Status        string          `json:"status"` // queued | duplicate | failed
	TransactionID string          `json:"transaction_id"`
	MessageID     string          `json:"message_id"`
	Error         string          `json:"error"`
	Raw           json.RawMessage `json:"-"`
}

// AckItem settles one popped message: Status "" (completed) or "failed"
// (the broker delivers it again).
type AckItem struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId,omitempty"`
	Status        string `json:"status,omitempty"`
	Error         string `json:"error,omitempty"`
	ConsumerGroup string `json:"consumerGroup,omitempty"`
}

// AckResult is the broker's answer for one ack.
type AckResult struct {
	Index   int             `json:"index"`
	Success bool            `json:"success"`
	Error   string          `json:"error"`
	Raw     json.RawMessage `json:"-"`
}

// Message is one popped message.
type Message struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	Queue           string          `json:"queue"`
	Partition       string          `json:"partition"`
	PartitionID     string          `json:"partitionId"`
	LeaseID         string          `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	Data            json.RawMessage `json:"data"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
	Producer        *string         `json:"producer"`
	Raw             json.RawMessage `json:"-"`
}

// AckItem is the ack settling m (Status "": completed; "failed": deliver it
// again), for Ack and Tx.Ack.
func (m *Message) AckItem(status string) AckItem {
	return AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: status,
		ConsumerGroup: m.ConsumerGroup}
}

// PopResult is a pop's body: the messages leased to the caller.
type PopResult struct {
	Success     bool            `json:"success"`
	LeaseID     string          `json:"leaseId"`
	PartitionID string          `json:"partitionId"`
	Messages    []Message       `json:"messages"`
	Raw         json.RawMessage `json:"-"`
}

// PopOptions choose what to pop and how.
type PopOptions struct {
	Queue        string
	Partition    string // "": any
	Group        string // consumer group; "": the queue mode
	Batch        int    // 0: the broker's default
	LeaseSeconds int    // 0: the queue's
	AutoAck      bool
	Wait         time.Duration // > 0: long poll up to this long for a message
}

func allHaveIDs(items []PushItem) bool {
	for _, it := range items {
		if it.TransactionID == "" {
			return false
		}
	}
	return len(items) > 0
}

// Push queues items and answers per item, in order.
func (c *Client) Push(ctx context.Context, items []PushItem) ([]PushResult, error) {
	if items == nil {
		items = []PushItem{}
	}
	body, err := marshal(map[string]any{"items": items})
	if err != nil {
		return nil, err
	}
	rep, err := c.do(ctx, request{method: "POST", path: "/api/v1/push", body: body, safe: allHaveIDs(items)})
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := decode(rep, &raws); err != nil {
		return nil, err
	}
	out := make([]PushResult, len(raws))
	for i, raw := range raws {
		if err := decode(&reply{status: rep.status, body: raw}, &out[i]); err != nil {
			return nil, err
		}
		out[i].Raw = raw
	}
	return out, nil
}

// Pop leases messages; nil (and no error) when nothing was available. Never
// retried once sent: a lost answer's lease expires and the message returns.
func (c *Client) Pop(ctx context.Context, o PopOptions) (*PopResult, error) {
	path := "/api/v1/pop/queue/" + pathEscape(o.Queue)
	if o.Partition != "" {
		path += "/partition/" + pathEscape(o.Partition)
	}
	q := url.Values{}
	if o.Group != "" {
		q.Set("consumerGroup", o.Group)
	}
	if o.Batch != 0 {
		q.Set("batch", strconv.Itoa(o.Batch))
	}
	if o.LeaseSeconds != 0 {
		q.Set("leaseSeconds", strconv.Itoa(o.LeaseSeconds))
	}
	if o.AutoAck {
		q.Set("autoAck", "true")
	}
	if o.Wait > 0 {
		q.Set("wait", "true")
		q.Set("timeout", strconv.FormatInt(o.Wait.Milliseconds(), 10))
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	rep, err := c.do(ctx, request{method: "GET", path: path, extra: o.Wait})
	if err != nil {
		return nil, err
	}
	if rep.status == 204 || len(rep.body) == 0 {
		return nil, nil
	}
	var p PopResult
	if err := decode(rep, &p); err != nil {
		return nil, err
	}
	p.Raw = rep.body
	var raw struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if decode(rep, &raw) == nil {
		for i := range p.Messages {
			if i < len(raw.Messages) {
				p.Messages[i].Raw = raw.Messages[i]
			}
			// The lease and partition may be the body's rather than each message's.
			if p.Messages[i].LeaseID == "" {
				p.Messages[i].LeaseID = p.LeaseID
			}
			if p.Messages[i].PartitionID == "" {
				p.Messages[i].PartitionID = p.PartitionID
			}
		}
	}
	return &p, nil
}

// Ack settles messages (group: the consumer group, "" for the queue mode).
// Safe to repeat: each ack names its message by transactionId.
func (c *Client) Ack(ctx context.Context, acks []AckItem, group string) ([]AckResult, error) {
	if acks == nil {
		acks = []AckItem{}
	}
	m := map[string]any{"acknowledgments": acks}
	if group != "" {
		m["consumerGroup"] = group
	}
	body, err := marshal(m)
	if err != nil {
		return nil, err
	}
	rep, err := c.do(ctx, request{method: "POST", path: "/api/v1/ack/batch", body: body, safe: true})
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := decode(rep, &raws); err != nil {
		return nil, err
	}
	out := make([]AckResult, len(raws))
	for i, raw := range raws {
		if err := decode(&reply{status: rep.status, body: raw}, &out[i]); err != nil {
			return nil, err
		}
		out[i].Raw = raw
	}
	return out, nil
}

// LeaseResult is a lease extension's answer. Renewed false (ExpiresAt nil)
// when the lease is unknown or already ended.
type LeaseResult struct {
	LeaseID   string          `json:"leaseId"`
	Renewed   bool            `json:"renewed"`
	ExpiresAt *string         `json:"expiresAt"`
	Raw       json.RawMessage `json:"-"`
}

// LeaseExtend renews a lease for seconds more.
func (c *Client) LeaseExtend(ctx context.Context, leaseID string, seconds int) (*LeaseResult, error) {
	body, _ := marshal(map[string]any{"seconds": seconds})
	r, raw, err := typedCall[LeaseResult](ctx, c, "POST", "/api/v1/lease/"+pathEscape(leaseID)+"/extend", body)
	if err == nil {
		r.Raw = raw
	}
	return r, err
}

// QueueConfig is a configure call: the queue's options (leaseTime,
// retryLimit, ...) and its labels.
type QueueConfig struct {
	Queue     string         `json:"queue"`
	Options   map[string]any `json:"options,omitempty"`
	Namespace string         `json:"namespace,omitempty"`
	Task      string         `json:"task,omitempty"`
}

// ConfigureResult is the queue as a configure left it: Options holds every
// option with its effective value (as the wire names them), StoredOnly the
// names stored and echoed that the broker does not act on.
type ConfigureResult struct {
	Queue      string                     `json:"queue"`
	QueueID    string                     `json:"queueId"`
	Namespace  *string                    `json:"namespace"`
	Task       *string                    `json:"task"`
	Options    map[string]json.RawMessage `json:"options"`
	StoredOnly []string                   `json:"storedOnly"`
	Raw        json.RawMessage            `json:"-"`
}

// Configure creates or changes a queue.
func (c *Client) Configure(ctx context.Context, cfg QueueConfig) (*ConfigureResult, error) {
	body, err := marshal(cfg)
	if err != nil {
		return nil, err
	}
	r, raw, err := typedCall[ConfigureResult](ctx, c, "POST", "/api/v1/configure", body)
	if err == nil {
		r.Raw = raw
	}
	return r, err
}

// QueueSummary is one queue of Queues.
type QueueSummary struct {
	Name       string  `json:"name"`
	Namespace  *string `json:"namespace"`
	Task       *string `json:"task"`
	Partitions int64   `json:"partitions"`
	Messages   struct {
		Total      int64 `json:"total"`
		Pending    int64 `json:"pending"`
		Processing int64 `json:"processing"`
	} `json:"messages"`
}

// Queues lists the queues.
func (c *Client) Queues(ctx context.Context) ([]QueueSummary, error) {
	r, _, err := typedCall[struct {
		Queues []QueueSummary `json:"queues"`
	}](ctx, c, "GET", "/api/v1/resources/queues", nil)
	if err != nil {
		return nil, err
	}
	return r.Queues, nil
}

// QueueDeleteResult says whether there was such a queue (deleting a missing
// one is not an error: the state asked for holds).
type QueueDeleteResult struct {
	Queue   string          `json:"queue"`
	Existed bool            `json:"existed"`
	Raw     json.RawMessage `json:"-"`
}

// QueueDelete deletes a queue and its messages.
func (c *Client) QueueDelete(ctx context.Context, queue string) (*QueueDeleteResult, error) {
	r, raw, err := typedCall[QueueDeleteResult](ctx, c, "DELETE", "/api/v1/resources/queues/"+pathEscape(queue), nil)
	if err == nil {
		r.Raw = raw
	}
	return r, err
}

// typedCall is a call whose repeat sets the same state again: its answer
// decoded into a T, and the answer's text.
func typedCall[T any](ctx context.Context, c *Client, method, path string, body []byte) (*T, json.RawMessage, error) {
	rep, err := c.do(ctx, request{method: method, path: path, body: body, safe: true})
	if err != nil {
		return nil, nil, err
	}
	out := new(T)
	if err := decode(rep, out); err != nil {
		return nil, nil, err
	}
	return out, json.RawMessage(rep.body), nil
}
