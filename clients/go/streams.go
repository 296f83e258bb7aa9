// Streams: the three routes of the streams runtime (clients/STREAMS.md) and
// the configuration hash a query is registered with.
//
// The hash must equal the one every other runtime computes, byte for byte:
// it is SHA-256 of the text ECMAScript's JSON.stringify would write. That is
// why this file writes the JSON itself instead of using encoding/json, which
// escapes <, > and & and formats floats differently (1e-07, not 1e-7).
package queen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// StreamsQuery is the body of POST /streams/v1/queries: a query's durable
// name, its source and sink queues and its configuration hash (ConfigHash).
type StreamsQuery struct {
	Name        string `json:"name"`
	SourceQueue string `json:"source_queue"`
	SinkQueue   string `json:"sink_queue,omitempty"`
	ConfigHash  string `json:"config_hash"`
	// Reset replaces a query registered under Name with another hash,
	// deleting its state; without it that registration is a 409
	// streams_config_mismatch.
	Reset bool `json:"reset,omitempty"`
}

// StreamsRegistration is what a registration answers.
type StreamsRegistration struct {
	QueryID    string `json:"query_id"`
	Name       string `json:"name"`
	ConfigHash string `json:"config_hash"`
	Fresh      bool   `json:"fresh"` // a new name
	Reset      bool   `json:"reset"` // an earlier registration was replaced
}

// StreamsStateOp is one state change of a cycle: Type "upsert" (Value set)
// or "delete".
type StreamsStateOp struct {
	Type  string          `json:"type"`
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value,omitempty"`
}

// StreamsAck acks the source batch in a cycle, under its lease.
type StreamsAck struct {
	TransactionID string `json:"transactionId"`
	LeaseID       string `json:"leaseId"`
	Status        string `json:"status,omitempty"` // completed (default) or failed
	Error         string `json:"error,omitempty"`
	Count         int    `json:"count,omitempty"`
}

// StreamsCycleRequest is the body of POST /streams/v1/cycle. Ack nil commits
// state and pushes alone. ReleaseLease nil is the broker's default (true).
type StreamsCycleRequest struct {
	QueryID       string           `json:"query_id"`
	PartitionID   string           `json:"partition_id"`
	ConsumerGroup string           `json:"consumer_group,omitempty"`
	StateOps      []StreamsStateOp `json:"state_ops,omitempty"`
	PushItems     []PushItem       `json:"push_items,omitempty"`
	Ack           *StreamsAck      `json:"ack"`
	ReleaseLease  *bool            `json:"release_lease,omitempty"`
}

// StreamsCycleResult is what a committed cycle answers.
type StreamsCycleResult struct {
	QueryID         string            `json:"query_id"`
	PartitionID     string            `json:"partition_id"`
	QueueName       string            `json:"queueName"`
	StateOpsApplied int               `json:"state_ops_applied"`
	PushResults     []json.RawMessage `json:"push_results"`
	AckResult       *struct {
		Count         int  `json:"count"`
		LeaseReleased bool `json:"lease_released"`
		DLQ           bool `json:"dlq"`
	} `json:"ack_result"`
}

// StreamsStateQuery is the body of POST /streams/v1/state/get; the filters
// combine (Keys empty: every key).
type StreamsStateQuery struct {
	QueryID        string   `json:"query_id"`
	PartitionID    string   `json:"partition_id"`
	Keys           []string `json:"keys,omitempty"`
	KeyPrefix      string   `json:"key_prefix,omitempty"`
	RipeAtOrBefore *int64   `json:"ripe_at_or_before,omitempty"` // epoch ms of value.windowEnd
}

// StreamsStateRow is one state row, in ascending key order.
type StreamsStateRow struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt string          `json:"updated_at"`
}

// StreamsRegister is POST /streams/v1/queries. The same name and hash
// resume, so a repeat registers nothing new and is retried like any safe call.
func (c *Client) StreamsRegister(ctx context.Context, q StreamsQuery) (StreamsRegistration, error) {
	var out StreamsRegistration
	err := c.streamsCall(ctx, "/streams/v1/queries", q, true, &out)
	return out, err
}

// StreamsCycle is POST /streams/v1/cycle: state ops, sink pushes and the
// source ack in one transaction. Never repeated: a cycle whose answer was
// lost is settled by popping again (its lease either committed the batch or
// still holds it), never by sending it twice.
func (c *Client) StreamsCycle(ctx context.Context, cy StreamsCycleRequest) (StreamsCycleResult, error) {
	var out StreamsCycleResult
	err := c.streamsCall(ctx, "/streams/v1/cycle", cy, false, &out)
	return out, err
}

// StreamsStateGet is POST /streams/v1/state/get; it only reads.
func (c *Client) StreamsStateGet(ctx context.Context, q StreamsStateQuery) ([]StreamsStateRow, error) {
	var out struct {
		Rows []StreamsStateRow `json:"rows"`
	}
	err := c.streamsCall(ctx, "/streams/v1/state/get", q, true, &out)
	return out.Rows, err
}

func (c *Client) streamsCall(ctx context.Context, path string, body any, safe bool, out any) error {
	b, err := marshal(body)
	if err != nil {
		return err
	}
	rep, err := c.do(ctx, request{method: "POST", path: path, body: b, safe: safe})
	if err != nil {
		return err
	}
	return decode(rep, out)
}

// ShapeOp is one operator of a pipeline as the configuration hash sees it:
// its kind and settings, never its functions (they cannot be compared across
// processes). Kind is one of map, filter, flatMap, keyBy, gate, foreach,
// reduce, aggregate, window-tumbling, window-sliding, window-cron,
// window-session, sink.
type ShapeOp struct {
	Kind            string
	HasInitial      bool     // reduce: an initial value given and not null
	Fields          []string // aggregate: names in the order given
	Seconds         float64  // tumbling
	Size, Slide     float64  // sliding
	Every           string   // cron
	Gap             float64  // session
	GracePeriod     float64  // windows
	EventTime       bool     // windows: an event-time function is set
	AllowedLateness float64  // windows
	Queue           string   // sink
}

// ConfigHash is the lower-case hex SHA-256 of ShapeText(ops).
func ConfigHash(ops []ShapeOp) string {
	sum := sha256.Sum256([]byte(ShapeText(ops)))
	return hex.EncodeToString(sum[:])
}

// ShapeText is the JSON text the configuration hash is taken of, members in
// the order clients/STREAMS.md gives.
func ShapeText(ops []ShapeOp) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, op := range ops {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"kind":`)
		jsString(&b, op.Kind)
		switch op.Kind {
		case "reduce":
			b.WriteString(`,"hasInitial":` + strconv.FormatBool(op.HasInitial))
		case "aggregate":
			b.WriteString(`,"fields":[`)
			for j, f := range op.Fields {
				if j > 0 {
					b.WriteByte(',')
				}
				jsString(&b, f)
			}
			b.WriteByte(']')
		case "window-tumbling", "window-sliding", "window-cron", "window-session":
			switch op.Kind {
			case "window-tumbling":
				b.WriteString(`,"seconds":` + jsNumber(op.Seconds))
			case "window-sliding":
				b.WriteString(`,"size":` + jsNumber(op.Size) + `,"slide":` + jsNumber(op.Slide))
			case "window-cron":
				b.WriteString(`,"every":`)
				jsString(&b, op.Every)
			case "window-session":
				b.WriteString(`,"gap":` + jsNumber(op.Gap))
			}
			b.WriteString(`,"gracePeriod":` + jsNumber(op.GracePeriod) + `,"idleFlushMs":0,"eventTime":` +
				strconv.FormatBool(op.EventTime) + `,"allowedLateness":` + jsNumber(op.AllowedLateness) +
				`,"onLate":"drop"`)
		case "sink":
			b.WriteString(`,"queue":`)
			jsString(&b, op.Queue)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

// jsString writes s as JSON.stringify does: only '"', '\' and U+0000..U+001F
// are escaped (the five with short forms use them), every other character
// is written as itself.
func jsString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// jsNumber is ECMAScript's Number-to-String (as JSON.stringify writes a
// number): the shortest round-tripping digits, plain between 1e-7 and 1e21,
// else d.ddde+N / e-N; NaN and the infinities are null.
func jsNumber(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	if f == 0 {
		return "0" // -0 too
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// 'e' with -1 gives the shortest digits as d.ddde±XX.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, n := len(digits), x+1 // value = 0.digits * 10^n
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	es := "+"
	if n-1 < 0 {
		es = "-"
	}
	frac := ""
	if k > 1 {
		frac = "." + digits[1:]
	}
	return sign + digits[:1] + frac + "e" + es + strconv.Itoa(abs(n-1))
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}
