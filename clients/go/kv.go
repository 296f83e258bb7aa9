package queen

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Expiry is a KV write's lifetime: Forever or TTL(d). The client never
// invents one, and a write without exactly one valid expiry fails before
// anything is sent (Kind bad_request, Code bad_argument): the zero Expiry,
// and a TTL that is not a whole number of seconds > 0 (clients/API.md).
type Expiry struct {
	ttl     time.Duration
	forever bool
}

// Forever keeps the key until it is deleted.
var Forever = Expiry{forever: true}

// TTL expires the key after d, a whole number of seconds > 0 (a
// time.Duration, as PopOptions.Wait is: TTL(time.Hour)).
func TTL(d time.Duration) Expiry { return Expiry{ttl: d} }

const expiryRule = "expiry: give ttl (seconds > 0) or forever"

func (e Expiry) into(m map[string]any) error {
	switch {
	case e.forever:
		m["forever"] = true
	case e.ttl >= time.Second && e.ttl%time.Second == 0:
		m["ttlSeconds"] = int64(e.ttl / time.Second)
	case e.ttl == 0:
		return ownError("bad_argument", expiryRule+" (the zero Expiry is none)", 0)
	default:
		return ownError("bad_argument", fmt.Sprintf("%s (TTL %v)", expiryRule, e.ttl), 0)
	}
	return nil
}

// Cond is a KV write's condition or bound: Expect, Required, Min or Max.
// Opaque, so a write carries only the members the broker defines.
type Cond struct{ set func(m map[string]any) }

func applyConds(m map[string]any, conds []Cond) {
	for _, c := range conds {
		if c.set != nil {
			c.set(m)
		}
	}
}

// Expect applies the write only while the key holds version v (0: absent).
func Expect(v int64) Cond { return Cond{func(m map[string]any) { m["expect"] = v }} }

// Required turns a lost condition into a *Error with Code kv_precondition
// (IsPrecondition) instead of a result with Applied false.
func Required() Cond { return Cond{func(m map[string]any) { m["required"] = true }} }

// Min and Max bound an increment: past them it does not apply (reason limit).
func Min(x float64) Cond {
	return Cond{func(m map[string]any) { m["min"] = json.Number(formatFloat(x)) }}
}
func Max(x float64) Cond {
	return Cond{func(m map[string]any) { m["max"] = json.Number(formatFloat(x)) }}
}

// formatFloat is the shortest text that reads back as the same float64.
func formatFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// KVRow is one row of a getMany or getPrefix answer.
type KVRow struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value,omitempty"`
	Version   int64           `json:"version,omitempty"`
	ExpiresAt *string         `json:"expiresAt,omitempty"`
}

// KVResult is one result element of a KV op, as the broker sent it: Raw is
// its whole JSON text; the fields are the members the ops have.
type KVResult struct {
	Index     int             `json:"index"`
	Op        string          `json:"op"`
	Key       string          `json:"key"`
	Found     bool            `json:"found"`   // get
	Applied   bool            `json:"applied"` // put, putIfAbsent, delete, incr
	Reason    string          `json:"reason"`  // why not applied: exists, absent, version, limit, type
	Version   int64           `json:"version"` // the type Expect takes
	Value     json.RawMessage `json:"value"`
	ExpiresAt *string         `json:"expiresAt"`
	Rows      []KVRow         `json:"rows"`      // getMany, getPrefix
	Missing   []string        `json:"missing"`   // getMany
	Truncated bool            `json:"truncated"` // getPrefix
	NextAfter string          `json:"nextAfter"` // getPrefix
	Raw       json.RawMessage `json:"-"`
}

// KVOp is one kv op for Apply and Tx.KV, made by GetOp, PutOp,
// PutIfAbsentOp, DeleteOp, IncrOp, GetManyOp or GetPrefixOp: one per op the
// broker has (sql/kv.sql), taking what the one-op calls take. There is
// no public map form: an op's members are typed, and a write's expiry is
// checked where the op is made. A refused op (a bad expiry, a value JSON
// cannot hold) carries its error to Apply or Commit, which return it before
// anything is sent; so does the zero KVOp.
type KVOp struct {
	wire map[string]any
	err  error
}

// MarshalJSON is the op as the wire has it.
func (o KVOp) MarshalJSON() ([]byte, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return marshal(o.wire)
}

func (o KVOp) check() error {
	if o.err != nil {
		return o.err
	}
	if o.wire == nil {
		return ownError("bad_argument", "an empty KVOp: make ops with GetOp, PutOp, PutIfAbsentOp, DeleteOp, "+
			"IncrOp, GetManyOp or GetPrefixOp", 0)
	}
	return nil
}

// GetOp reads one key.
func GetOp(ns, key string) KVOp { return KVOp{wire: map[string]any{"op": "get", "ns": ns, "key": key}} }

// PutOp writes value, as Client.Put does.
func PutOp(ns, key string, value any, exp Expiry, conds ...Cond) KVOp {
	return writeOp("put", ns, key, value, exp, conds)
}

// PutIfAbsentOp writes value only when the key is absent, as
// Client.PutIfAbsent does.
func PutIfAbsentOp(ns, key string, value any, exp Expiry, conds ...Cond) KVOp {
	return writeOp("putIfAbsent", ns, key, value, exp, conds)
}

// DeleteOp removes a key, as Client.Delete does.
func DeleteOp(ns, key string, conds ...Cond) KVOp {
	op := map[string]any{"op": "delete", "ns": ns, "key": key}
	applyConds(op, conds)
	return KVOp{wire: op}
}

// IncrOp adds delta to a numeric key, as Client.Incr does.
func IncrOp(ns, key string, delta float64, exp Expiry, conds ...Cond) KVOp {
	op := map[string]any{"op": "incr", "ns": ns, "key": key, "delta": json.Number(formatFloat(delta))}
	if err := exp.into(op); err != nil {
		return KVOp{err: err}
	}
	applyConds(op, conds)
	return KVOp{wire: op}
}

// GetManyOp reads several keys of one namespace.
func GetManyOp(ns string, keys []string) KVOp {
	if keys == nil {
		keys = []string{}
	}
	return KVOp{wire: map[string]any{"op": "getMany", "ns": ns, "keys": keys}}
}

// GetPrefixOp reads one page of the keys under prefix.
func GetPrefixOp(ns, prefix string, o PrefixOptions) KVOp {
	op := map[string]any{"op": "getPrefix", "ns": ns, "prefix": prefix}
	if o.After != "" {
		op["after"] = o.After
	}
	if o.Limit != 0 {
		op["limit"] = o.Limit
	}
	if o.KeysOnly {
		op["keysOnly"] = true
	}
	return KVOp{wire: op}
}

func keyPath(ns, key string) string { return "/api/v1/kv/" + pathEscape(ns) + "/" + pathEscape(key) }

// pathEscape percent-encodes everything but the unreserved characters, so
// '/' and '%' stay inside one path segment.
func pathEscape(s string) string {
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)*3)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' ||
			ch == '.' || ch == '~' {
			b = append(b, ch)
		} else {
			b = append(b, '%', hex[ch>>4], hex[ch&15])
		}
	}
	return string(b)
}

func toResult(raw json.RawMessage) (*KVResult, error) {
	var r KVResult
	if err := decode(&reply{status: 200, body: raw}, &r); err != nil {
		return nil, err
	}
	r.Raw = raw
	return &r, nil
}

// kvAnswer reads a per-key route's answer: a verdict is the typed error.
func kvAnswer(rep *reply) (*KVResult, error) {
	if v := kvVerdict(rep.body, 0); v != nil {
		return nil, v
	}
	return toResult(rep.body)
}

// Get reads one key; a missing key is Found false, not an error.
func (c *Client) Get(ctx context.Context, ns, key string) (*KVResult, error) {
	rep, err := c.do(ctx, request{method: "GET", path: keyPath(ns, key), safe: true})
	if err != nil {
		return nil, err
	}
	return kvAnswer(rep)
}

// Put writes value (any JSON: json.RawMessage passes through byte for byte).
func (c *Client) Put(ctx context.Context, ns, key string, value any, exp Expiry, conds ...Cond) (*KVResult, error) {
	raw, err := marshal(value)
	if err != nil {
		return nil, err
	}
	m := map[string]any{"value": json.RawMessage(raw)}
	if err := exp.into(m); err != nil {
		return nil, err
	}
	applyConds(m, conds)
	body, err := marshal(m)
	if err != nil {
		return nil, err
	}
	_, conditional := m["expect"]
	rep, err := c.do(ctx, request{method: "PUT", path: keyPath(ns, key), body: body, safe: !conditional})
	if err != nil {
		return nil, err
	}
	return kvAnswer(rep)
}

// Delete removes a key (Applied false, Reason absent, when there was none).
func (c *Client) Delete(ctx context.Context, ns, key string, conds ...Cond) (*KVResult, error) {
	m := map[string]any{}
	applyConds(m, conds)
	rq := request{method: "DELETE", path: keyPath(ns, key), safe: true}
	if len(m) > 0 {
		body, err := marshal(m)
		if err != nil {
			return nil, err
		}
		rq.body = body
		_, conditional := m["expect"]
		rq.safe = !conditional
	}
	rep, err := c.do(ctx, rq)
	if err != nil {
		return nil, err
	}
	return kvAnswer(rep)
}

// PutIfAbsent writes only when the key is absent (else Reason exists, with
// the live value). Never retried after a request was sent.
func (c *Client) PutIfAbsent(ctx context.Context, ns, key string, value any, exp Expiry, conds ...Cond) (*KVResult, error) {
	return c.oneOp(ctx, PutIfAbsentOp(ns, key, value, exp, conds...))
}

// Incr adds delta to a numeric key (Min and Max bound it). Never retried
// after a request was sent.
func (c *Client) Incr(ctx context.Context, ns, key string, delta float64, exp Expiry, conds ...Cond) (*KVResult, error) {
	return c.oneOp(ctx, IncrOp(ns, key, delta, exp, conds...))
}

// GetMany reads several keys of one namespace: Rows found, Missing not.
func (c *Client) GetMany(ctx context.Context, ns string, keys []string) (*KVResult, error) {
	return c.oneOp(ctx, GetManyOp(ns, keys))
}

// PrefixOptions page a prefix read.
type PrefixOptions struct {
	After    string // "": from the start
	Limit    int    // 0: the broker's default
	KeysOnly bool
}

// GetPrefix reads one page of the keys under prefix, in byte order:
// Truncated says more follow after NextAfter.
func (c *Client) GetPrefix(ctx context.Context, ns, prefix string, o PrefixOptions) (*KVResult, error) {
	return c.oneOp(ctx, GetPrefixOp(ns, prefix, o))
}

// Scan reads every row under prefix page after page (pageLimit rows each;
// 0: the broker's default) until a page is not truncated, calling fn with
// each row in key order; fn returning false stops early. It returns the
// number of pages read.
func (c *Client) Scan(ctx context.Context, ns, prefix string, pageLimit int, keysOnly bool, fn func(KVRow) bool) (int, error) {
	o := PrefixOptions{Limit: pageLimit, KeysOnly: keysOnly}
	for pages := 1; ; pages++ {
		page, err := c.GetPrefix(ctx, ns, prefix, o)
		if err != nil {
			return pages - 1, err
		}
		for _, row := range page.Rows {
			if !fn(row) {
				return pages, nil
			}
		}
		if !page.Truncated || page.NextAfter == "" {
			return pages, nil
		}
		o.After = page.NextAfter
	}
}

// repeatable reports whether every op leaves the same state however often
// it runs: reads, and puts and deletes without expect.
func repeatable(ops []byte) bool {
	var list []map[string]json.RawMessage
	if json.Unmarshal(ops, &list) != nil {
		return false
	}
	for _, op := range list {
		var name string
		json.Unmarshal(op["op"], &name)
		_, expect := op["expect"]
		switch {
		case name == "get" || name == "getMany" || name == "getPrefix":
		case (name == "put" || name == "delete") && !expect:
		default:
			return false
		}
	}
	return true
}

// Apply runs ops in one transaction and returns one result per op, in
// order. A required op that lost is a *Error (IsPrecondition) naming its
// FailedIndex, and nothing of the batch was written. An op refused where it
// was made is returned before anything is sent.
func (c *Client) Apply(ctx context.Context, ops []KVOp) ([]*KVResult, error) {
	if ops == nil {
		ops = []KVOp{}
	}
	for _, op := range ops {
		if err := op.check(); err != nil {
			return nil, err
		}
	}
	body, err := marshal(ops)
	if err != nil {
		return nil, err
	}
	rep, err := c.do(ctx, request{method: "POST", path: "/api/v1/kv", body: body, safe: repeatable(body)})
	if err != nil {
		return nil, err
	}
	if v := kvVerdict(rep.body, 0); v != nil {
		return nil, v
	}
	var batch struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := decode(rep, &batch); err != nil {
		return nil, err
	}
	if batch.Results == nil {
		return nil, &Error{Kind: KindTransport, Status: rep.status, Code: "bad_response", Reason: "bad_response",
			Detail: "a kv batch answered without results"}
	}
	out := make([]*KVResult, 0, len(batch.Results))
	for _, raw := range batch.Results {
		r, err := toResult(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (c *Client) oneOp(ctx context.Context, op KVOp) (*KVResult, error) {
	results, err := c.Apply(ctx, []KVOp{op})
	if err != nil {
		return nil, err
	}
	if len(results) != 1 {
		return nil, &Error{Kind: KindTransport, Status: 200, Code: "bad_response", Reason: "bad_response",
			Detail: "a one-op batch answered no element"}
	}
	return results[0], nil
}

// NamespaceCount is one namespace holding keys, and how many.
type NamespaceCount struct {
	Namespace string `json:"namespace"`
	Keys      int64  `json:"keys"`
}

// Namespaces lists the namespaces holding keys (GET .../kv/namespaces).
func (c *Client) Namespaces(ctx context.Context) ([]NamespaceCount, error) {
	r, _, err := typedCall[struct {
		Namespaces []NamespaceCount `json:"namespaces"`
	}](ctx, c, "GET", "/api/v1/resources/kv/namespaces", nil)
	if err != nil {
		return nil, err
	}
	return r.Namespaces, nil
}

// writeOp is a put or putIfAbsent op.
func writeOp(name, ns, key string, value any, exp Expiry, conds []Cond) KVOp {
	raw, err := marshal(value)
	if err != nil {
		return KVOp{err: err}
	}
	op := map[string]any{"op": name, "ns": ns, "key": key, "value": json.RawMessage(raw)}
	if err := exp.into(op); err != nil {
		return KVOp{err: err}
	}
	applyConds(op, conds)
	return KVOp{wire: op}
}
