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

// Cond is a KV write's condition or bound.
type Cond func(m map[string]any)

// Expect applies the write only while the key holds version v (0: absent).
func Expect(v int64) Cond { return func(m map[string]any) { m["expect"] = v } }

// Required turns a lost condition into a *Error with Code kv_precondition
// (IsPrecondition) instead of a result with Applied false.
func Required() Cond { return func(m map[string]any) { m["required"] = true } }

// Min and Max bound an increment: past them it does not apply (reason limit).
func Min(x float64) Cond { return func(m map[string]any) { m["min"] = json.Number(formatFloat(x)) } }
func Max(x float64) Cond { return func(m map[string]any) { m["max"] = json.Number(formatFloat(x)) } }

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

// KVOp is one wire op for Apply and the transaction builder: "op" is get,
// put, putIfAbsent, delete, incr, getMany or getPrefix, with the wire's
// member names (ns, key, value, ttlSeconds or forever, expect, required,
// delta, min, max, keys, prefix, after, limit, keysOnly).
type KVOp map[string]any

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
	for _, cond := range conds {
		cond(m)
	}
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
	for _, cond := range conds {
		cond(m)
	}
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
	op, err := putIfAbsentOp(ns, key, value, exp, conds)
	if err != nil {
		return nil, err
	}
	return c.oneOp(ctx, op)
}

// Incr adds delta to a numeric key (Min and Max bound it). Never retried
// after a request was sent.
func (c *Client) Incr(ctx context.Context, ns, key string, delta float64, exp Expiry, conds ...Cond) (*KVResult, error) {
	op, err := incrOp(ns, key, delta, exp, conds)
	if err != nil {
		return nil, err
	}
	return c.oneOp(ctx, op)
}

// GetMany reads several keys of one namespace: Rows found, Missing not.
func (c *Client) GetMany(ctx context.Context, ns string, keys []string) (*KVResult, error) {
	if keys == nil {
		keys = []string{}
	}
	return c.oneOp(ctx, KVOp{"op": "getMany", "ns": ns, "keys": keys})
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
	op := KVOp{"op": "getPrefix", "ns": ns, "prefix": prefix}
	if o.After != "" {
		op["after"] = o.After
	}
	if o.Limit != 0 {
		op["limit"] = o.Limit
	}
	if o.KeysOnly {
		op["keysOnly"] = true
	}
	return c.oneOp(ctx, op)
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
// FailedIndex, and nothing of the batch was written.
func (c *Client) Apply(ctx context.Context, ops []KVOp) ([]*KVResult, error) {
	if ops == nil {
		ops = []KVOp{}
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

// Namespaces lists the namespaces holding keys (GET .../kv/namespaces).
func (c *Client) Namespaces(ctx context.Context) (json.RawMessage, error) {
	rep, err := c.do(ctx, request{method: "GET", path: "/api/v1/resources/kv/namespaces", safe: true})
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	return raw, decode(rep, &raw)
}

// The wire ops the one-op calls and the transaction builder share.

func writeOp(name, ns, key string, value any, exp Expiry, conds []Cond) (KVOp, error) {
	raw, err := marshal(value)
	if err != nil {
		return nil, err
	}
	op := KVOp{"op": name, "ns": ns, "key": key, "value": json.RawMessage(raw)}
	if err := exp.into(op); err != nil {
		return nil, err
	}
	for _, cond := range conds {
		cond(op)
	}
	return op, nil
}

func putIfAbsentOp(ns, key string, value any, exp Expiry, conds []Cond) (KVOp, error) {
	return writeOp("putIfAbsent", ns, key, value, exp, conds)
}

func incrOp(ns, key string, delta float64, exp Expiry, conds []Cond) (KVOp, error) {
	op := KVOp{"op": "incr", "ns": ns, "key": key, "delta": json.Number(formatFloat(delta))}
	if err := exp.into(op); err != nil {
		return nil, err
	}
	for _, cond := range conds {
		cond(op)
	}
	return op, nil
}
