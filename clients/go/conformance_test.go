package queen

// The conformance runner: every scenario of clients/conformance/scenarios,
// as that folder's README defines them, one subtest each, against real
// brokers on the private PostgreSQL.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	mainOnce   sync.Once
	mainBroker *broker
)

func TestMain(m *testing.M) {
	code := m.Run()
	mainBroker.stop()
	os.Exit(code)
}

// sharedBroker is the broker scenarios without needs use (started once).
func sharedBroker(t *testing.T) *broker {
	needBrokerEnv(t)
	mainOnce.Do(func() { mainBroker = startBroker(t) })
	if mainBroker == nil {
		t.Fatal("the shared broker did not start")
	}
	return mainBroker
}

// parse decodes JSON keeping every number's text (json.Number).
func parse(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func render(v any) string {
	b, err := marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// ---- variables -------------------------------------------------------------------

type vars map[string]any

func (vs vars) text(name string) (string, error) {
	v, ok := vs[name]
	if !ok {
		return "", fmt.Errorf("unknown variable %s", name)
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	return render(v), nil
}

func (vs vars) substString(s string) (any, error) {
	if strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}") && strings.Count(s, "}") == 1 {
		v, ok := vs[s[2:len(s)-1]]
		if !ok {
			return nil, fmt.Errorf("unknown variable %s", s)
		}
		return v, nil
	}
	return vs.embed(s)
}

func (vs vars) embed(s string) (string, error) {
	var out strings.Builder
	for {
		open := strings.Index(s, "${")
		if open < 0 {
			out.WriteString(s)
			return out.String(), nil
		}
		end := strings.IndexByte(s[open:], '}')
		if end < 0 {
			out.WriteString(s)
			return out.String(), nil
		}
		t, err := vs.text(s[open+2 : open+end])
		if err != nil {
			return "", err
		}
		out.WriteString(s[:open])
		out.WriteString(t)
		s = s[open+end+1:]
	}
}

func (vs vars) subst(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return vs.substString(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = vs.subst(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			name, err := vs.embed(k)
			if err != nil {
				return nil, err
			}
			if out[name], err = vs.subst(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

// ---- patterns --------------------------------------------------------------------

// numEqual compares two numbers' decimal values exactly (never through a float).
func numEqual(a, b json.Number) bool {
	x, ok1 := new(big.Rat).SetString(string(a))
	y, ok2 := new(big.Rat).SetString(string(b))
	return ok1 && ok2 && x.Cmp(y) == 0
}

func equal(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && numEqual(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return "number"
		}
		return "integer"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

// match checks v (present: ok) against pattern p at path.
func match(p, v any, present bool, path string) error {
	if m, ok := p.(map[string]any); ok && len(m) == 1 {
		for k, arg := range m {
			if strings.HasPrefix(k, "$") {
				return matcher(k, arg, v, present, path)
			}
		}
	}
	if !present {
		return fmt.Errorf("%s: absent, expected %s", path, render(p))
	}
	switch x := p.(type) {
	case map[string]any:
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %s is not an object", path, render(v))
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			w, has := obj[k]
			if err := match(x[k], w, has, path+"/"+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		arr, ok := v.([]any)
		if !ok || len(arr) != len(x) {
			return fmt.Errorf("%s: %s is not an array of %d", path, render(v), len(x))
		}
		for i := range x {
			if err := match(x[i], arr[i], true, fmt.Sprintf("%s/%d", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if !equal(p, v) {
		return fmt.Errorf("%s: %s, expected %s", path, render(v), render(p))
	}
	return nil
}

func matcher(name string, arg, v any, present bool, path string) error {
	if name == "$absent" {
		if present {
			return fmt.Errorf("%s: present (%s), expected absent", path, render(v))
		}
		return nil
	}
	if !present {
		return fmt.Errorf("%s: absent, expected %s", path, name)
	}
	switch name {
	case "$any":
		return nil
	case "$type":
		want, got := arg.(string), typeName(v)
		if got == want || (want == "number" && got == "integer") {
			return nil
		}
		return fmt.Errorf("%s: %s is %s, expected %s", path, render(v), got, want)
	case "$raw":
		// json.Number is the number's text exactly as the broker sent it.
		if n, ok := v.(json.Number); ok && string(n) == arg.(string) {
			return nil
		}
		if _, ok := v.(json.Number); !ok && render(v) == arg.(string) {
			return nil
		}
		return fmt.Errorf("%s: %s, expected the text %s", path, render(v), arg)
	case "$len":
		arr, ok := v.([]any)
		n, _ := arg.(json.Number).Int64()
		if ok && int64(len(arr)) == n {
			return nil
		}
		return fmt.Errorf("%s: %s is not an array of %d", path, render(v), n)
	case "$ne":
		if equal(arg, v) {
			return fmt.Errorf("%s: %s, expected anything else", path, render(v))
		}
		return nil
	}
	return fmt.Errorf("%s: unknown matcher %s", path, name)
}

// pointer resolves an RFC 6901 JSON Pointer.
func pointer(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// ---- calls -----------------------------------------------------------------------

type args map[string]any

func (a args) str(k string) string   { s, _ := a[k].(string); return s }
func (a args) boolean(k string) bool { b, _ := a[k].(bool); return b }
func (a args) num(k string) (json.Number, bool) {
	n, ok := a[k].(json.Number)
	return n, ok
}
func (a args) int(k string) int {
	n, _ := a.num(k)
	i, _ := n.Int64()
	return int(i)
}
func (a args) raw(k string) json.RawMessage {
	v, ok := a[k]
	if !ok {
		return nil
	}
	return json.RawMessage(render(v))
}

// into converts a scenario value to a client type, keeping number texts.
func into(v any, out any) error {
	d := json.NewDecoder(strings.NewReader(render(v)))
	d.UseNumber()
	return d.Decode(out)
}

// expiry is the scenario's: both, or neither, is the zero Expiry, which the
// client refuses as it refuses a bad TTL.
func (a args) expiry() Expiry {
	n, ttl := a.num("ttlSeconds")
	if a.boolean("forever") && !ttl {
		return Forever
	}
	if ttl && !a.boolean("forever") {
		s, _ := n.Int64()
		return TTL(time.Duration(s) * time.Second)
	}
	return Expiry{}
}

// kvOp is a scenario's wire op made with the client's typed constructor
// for it; an op the client has none for (a name the broker refuses) goes
// as the scenario wrote it, for the broker to answer.
func kvOp(v any) (KVOp, error) {
	var m map[string]any
	if err := into(v, &m); err != nil {
		return KVOp{}, err
	}
	a := args(m)
	switch a.str("op") {
	case "get":
		return GetOp(a.str("ns"), a.str("key")), nil
	case "put":
		return PutOp(a.str("ns"), a.str("key"), a.raw("value"), a.expiry(), a.conds()...), nil
	case "putIfAbsent":
		return PutIfAbsentOp(a.str("ns"), a.str("key"), a.raw("value"), a.expiry(), a.conds()...), nil
	case "delete":
		return DeleteOp(a.str("ns"), a.str("key"), a.conds()...), nil
	case "incr":
		n, _ := a.num("delta")
		d, _ := n.Float64()
		return IncrOp(a.str("ns"), a.str("key"), d, a.expiry(), a.conds()...), nil
	case "getMany":
		var keys []string
		if err := into(a["keys"], &keys); err != nil {
			return KVOp{}, err
		}
		return GetManyOp(a.str("ns"), keys), nil
	case "getPrefix":
		return GetPrefixOp(a.str("ns"), a.str("prefix"),
			PrefixOptions{After: a.str("after"), Limit: a.int("limit"), KeysOnly: a.boolean("keysOnly")}), nil
	}
	return KVOp{wire: m}, nil
}

func (a args) conds() []Cond {
	var cs []Cond
	if n, ok := a.num("expect"); ok {
		v, _ := n.Int64()
		cs = append(cs, Expect(v))
	}
	if a.boolean("required") {
		cs = append(cs, Required())
	}
	for _, bound := range []string{"min", "max"} {
		if n, ok := a.num(bound); ok {
			f, _ := n.Float64()
			if bound == "min" {
				cs = append(cs, Min(f))
			} else {
				cs = append(cs, Max(f))
			}
		}
	}
	return cs
}

func rawOf(r *KVResult, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return json.RawMessage(r.Raw), nil
}

func doCall(ctx context.Context, c *Client, call string, a args) (any, error) {
	if t := a.str("tenant"); t != "" {
		ctx = WithTenant(ctx, t)
	}
	switch call {
	case "health":
		return c.Health(ctx)
	case "kv_get":
		return rawOf(c.Get(ctx, a.str("ns"), a.str("key")))
	case "kv_put":
		return rawOf(c.Put(ctx, a.str("ns"), a.str("key"), a.raw("value"), a.expiry(), a.conds()...))
	case "kv_put_if_absent":
		return rawOf(c.PutIfAbsent(ctx, a.str("ns"), a.str("key"), a.raw("value"), a.expiry(), a.conds()...))
	case "kv_delete":
		return rawOf(c.Delete(ctx, a.str("ns"), a.str("key"), a.conds()...))
	case "kv_incr":
		n, _ := a.num("delta")
		d, _ := n.Float64()
		return rawOf(c.Incr(ctx, a.str("ns"), a.str("key"), d, a.expiry(), a.conds()...))
	case "kv_get_many":
		var keys []string
		if err := into(a["keys"], &keys); err != nil {
			return nil, err
		}
		return rawOf(c.GetMany(ctx, a.str("ns"), keys))
	case "kv_get_prefix":
		return rawOf(c.GetPrefix(ctx, a.str("ns"), a.str("prefix"),
			PrefixOptions{After: a.str("after"), Limit: a.int("limit"), KeysOnly: a.boolean("keysOnly")}))
	case "kv_scan":
		keys := []string{}
		pages, err := c.Scan(ctx, a.str("ns"), a.str("prefix"), a.int("limit"), false, func(r KVRow) bool {
			keys = append(keys, r.Key)
			return true
		})
		if err != nil {
			return nil, err
		}
		return map[string]any{"keys": keys, "pages": pages}, nil
	case "kv_apply":
		var ops []KVOp
		list, _ := a["ops"].([]any)
		for _, v := range list {
			op, err := kvOp(v)
			if err != nil {
				return nil, err
			}
			ops = append(ops, op)
		}
		results, err := c.Apply(ctx, ops)
		if err != nil {
			return nil, err
		}
		out := make([]json.RawMessage, len(results))
		for i, r := range results {
			out[i] = r.Raw
		}
		return out, nil
	case "kv_namespaces":
		list, err := c.Namespaces(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]any{"namespaces": list}, nil
	case "push":
		var items []PushItem
		if err := into(a["items"], &items); err != nil {
			return nil, err
		}
		results, err := c.Push(ctx, items)
		if err != nil {
			return nil, err
		}
		out := make([]json.RawMessage, len(results))
		for i, r := range results {
			out[i] = r.Raw
		}
		return out, nil
	case "pop":
		o := PopOptions{Queue: a.str("queue"), Partition: a.str("partition"), Group: a.str("group"),
			Batch: a.int("batch"), LeaseSeconds: a.int("leaseSeconds"), AutoAck: a.boolean("autoAck")}
		if a.boolean("wait") {
			o.Wait = 30 * time.Second
			if ms := a.int("timeoutMs"); ms > 0 {
				o.Wait = time.Duration(ms) * time.Millisecond
			}
		}
		p, err := c.Pop(ctx, o)
		if err != nil || p == nil {
			return nil, err
		}
		return p.Raw, nil
	case "ack":
		var acks []AckItem
		if err := into(a["acks"], &acks); err != nil {
			return nil, err
		}
		results, err := c.Ack(ctx, acks, a.str("group"))
		if err != nil {
			return nil, err
		}
		out := make([]json.RawMessage, len(results))
		for i, r := range results {
			out[i] = r.Raw
		}
		return out, nil
	case "lease_extend":
		r, err := c.LeaseExtend(ctx, a.str("leaseId"), a.int("seconds"))
		if err != nil {
			return nil, err
		}
		return r.Raw, nil
	case "configure":
		cfg := QueueConfig{Queue: a.str("queue"), Namespace: a.str("namespace"), Task: a.str("task")}
		if o, ok := a["options"].(map[string]any); ok {
			cfg.Options = o
		}
		r, err := c.Configure(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return r.Raw, nil
	case "queues":
		list, err := c.Queues(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]any{"queues": list}, nil
	case "queue_delete":
		r, err := c.QueueDelete(ctx, a.str("queue"))
		if err != nil {
			return nil, err
		}
		return r.Raw, nil
	case "transaction":
		tx := NewTx()
		ops, _ := a["ops"].([]any)
		for _, op := range ops {
			m, _ := op.(map[string]any)
			switch {
			case m["ack"] != nil:
				var ack AckItem
				if err := into(m["ack"], &ack); err != nil {
					return nil, err
				}
				tx.Ack(ack)
			case m["push"] != nil:
				var item PushItem
				if err := into(m["push"], &item); err != nil {
					return nil, err
				}
				tx.Push(item)
			case m["kv"] != nil:
				op, err := kvOp(m["kv"])
				if err != nil {
					return nil, err
				}
				tx.KV(op)
			default:
				return nil, fmt.Errorf("unknown transaction op %s", render(op))
			}
		}
		leases, _ := a["requiredLeases"].([]any)
		for _, l := range leases {
			tx.RequireLease(l.(string))
		}
		r, err := c.Commit(ctx, tx)
		if err != nil {
			return nil, err
		}
		return r.Raw, nil
	case "consume":
		return runConsume(ctx, c, a)
	}
	return nil, fmt.Errorf("unknown call %s", call)
}

// runConsume drives the consume loop with the handler the args describe.
func runConsume(ctx context.Context, c *Client, a args) (any, error) {
	handler, _ := a["handler"].(map[string]any)
	h := args(handler)
	stopAfter := a.int("stopAfter")
	timeout := time.Duration(a.int("timeoutMs")) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	handled, failed := 0, 0
	deliveries := map[string]int{}
	done := make(chan error, 1)
	go func() {
		done <- c.Consume(loopCtx, ConsumeOptions{Queue: a.str("queue"), Group: a.str("group"),
			Concurrency: a.int("concurrency"), Batch: a.int("batch"), LeaseSeconds: a.int("leaseSeconds"),
			Poll: 500 * time.Millisecond},
			func(_ context.Context, m *Message, tx *Tx) error {
				mu.Lock()
				deliveries[m.TransactionID]++
				first := deliveries[m.TransactionID] == 1
				mu.Unlock()
				if ms := h.int("sleepMs"); ms > 0 {
					time.Sleep(time.Duration(ms) * time.Millisecond)
				}
				if h.boolean("failFirst") && first {
					mu.Lock()
					failed++
					mu.Unlock()
					return errors.New("the first delivery fails")
				}
				if effect, ok := h["effect"]; ok {
					op, err := kvOp(effect)
					if err != nil {
						return err
					}
					tx.KV(op)
				}
				mu.Lock()
				handled++
				if stopAfter > 0 && handled >= stopAfter {
					stop()
				}
				mu.Unlock()
				return nil
			})
	}()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
	case <-time.After(timeout):
		stop()
		<-done
		return nil, fmt.Errorf("the consume loop did not stop within %v", timeout)
	}
	mu.Lock()
	defer mu.Unlock()
	return map[string]any{"handled": handled, "failed": failed, "deliveries": deliveries}, nil
}

// ---- needs: the brokers a scenario runs against ----------------------------------

type world struct {
	brokers []*broker
	urls    []string
	held    net.Conn
	tenant  string
}

func (w *world) teardown(t *testing.T) {
	if w.held != nil {
		w.held.Close()
	}
	for _, b := range w.brokers {
		b.stop()
	}
	if w.tenant != "" {
		psql(t, "DELETE FROM queen.kv_quota WHERE tenant_id = '"+w.tenant+"'")
	}
}

func deadURL(t *testing.T) string { return fmt.Sprintf("http://127.0.0.1:%d", freePort(t)) }

// saturate starts a broker with one connection place and takes it: every
// request after that is answered 503 too_many_connections.
func (w *world) saturate(t *testing.T) {
	b := spawnBroker(t, "QUEEN_MAX_CONNECTIONS=1", "QUEEN_HTTP_THREADS=1", "QUEEN_IDLE_TIMEOUT_MS=600000",
		"QUEEN_REQUEST_READ_TIMEOUT_MS=600000")
	w.brokers = append(w.brokers, b)
	deadline := time.Now().Add(30 * time.Second)
	// The held connection must be the broker's first, before any probe.
	for {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", b.port))
		if err == nil {
			w.held = conn
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the saturated broker never listened (log: %s)", b.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		resp, err := hc.Get(b.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 503 {
				break
			}
			if resp.StatusCode == 200 {
				t.Fatal("the held connection did not take the broker's only place")
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the saturated broker never answered (log: %s)", b.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.urls = append(w.urls, b.base)
}

func setupWorld(t *testing.T, needs map[string]any) *world {
	w := &world{}
	t.Cleanup(func() { w.teardown(t) })
	switch {
	case needs == nil:
		w.urls = append(w.urls, sharedBroker(t).base)
	case needs["noBroker"] != nil:
		needBrokerEnv(t)
		w.urls = append(w.urls, deadURL(t))
	case needs["saturated"] != nil:
		w.saturate(t)
	case needs["quota"] != nil:
		// A fresh tenant per scenario: its quota row is its own.
		id := make([]byte, 6)
		rand.Read(id)
		w.tenant = "00000000-0000-4000-8000-" + hex.EncodeToString(id)
		cols, vals := "", ""
		for k, v := range needs["quota"].(map[string]any) {
			cols += ", " + k
			vals += ", " + render(v)
		}
		psql(t, fmt.Sprintf("INSERT INTO queen.kv_quota (tenant_id, enabled%s) VALUES ('%s', true%s)", cols,
			w.tenant, vals))
		b := startBroker(t, "QUEEN_TENANCY_HEADER=1", "QUEEN_TRUSTED_PROXY=1")
		w.brokers = append(w.brokers, b)
		w.urls = append(w.urls, b.base)
	default:
		if needs["deadUrlFirst"] != nil {
			needBrokerEnv(t)
			w.urls = append(w.urls, deadURL(t))
		}
		n := 0
		if x, ok := needs["brokers"].(json.Number); ok {
			v, _ := x.Int64()
			n = int(v)
		}
		for i := 0; i < n; i++ {
			b := startBroker(t)
			w.brokers = append(w.brokers, b)
			w.urls = append(w.urls, b.base)
		}
		if n == 0 {
			w.urls = append(w.urls, sharedBroker(t).base)
		}
	}
	return w
}

// ---- scenarios -------------------------------------------------------------------

func scenarioDir() string {
	if d := os.Getenv("QUEEN_CONFORMANCE_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "conformance", "scenarios")
}

func runToken() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func TestConformance(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarioDir(), "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios at %s", scenarioDir())
	}
	sort.Strings(files)
	only := os.Getenv("QUEEN_CONFORMANCE_ONLY") // a name substring, to run a few while working
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := parse(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		list, _ := doc.(map[string]any)["scenarios"].([]any)
		for _, s := range list {
			sc := s.(map[string]any)
			name := sc["name"].(string)
			if only != "" && !strings.Contains(name, only) {
				continue
			}
			t.Run(name, func(t *testing.T) { runScenario(t, sc) })
		}
	}
}

func clientOptions(co map[string]any, urls []string) Options {
	get := func(k string, def int64) int64 {
		if n, ok := co[k].(json.Number); ok {
			v, _ := n.Int64()
			return v
		}
		return def
	}
	return Options{URLs: urls, MaxAttempts: int(get("max_attempts", 3)),
		Backoff:    time.Duration(get("backoff_ms", 50)) * time.Millisecond,
		MaxBackoff: time.Duration(get("max_backoff_ms", 2000)) * time.Millisecond,
		Timeout:    time.Duration(get("timeout_ms", 10000)) * time.Millisecond}
}

func runScenario(t *testing.T, sc map[string]any) {
	needs, _ := sc["needs"].(map[string]any)
	w := setupWorld(t, needs)
	co, _ := sc["client"].(map[string]any)
	c, err := New(clientOptions(co, w.urls))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	vs := vars{"run": runToken()}
	if w.tenant != "" {
		vs["tenant"] = w.tenant
	}
	steps, _ := sc["steps"].([]any)
	for i, s := range steps {
		step := s.(map[string]any)
		if h, ok := step["harness"].(string); ok {
			n, _ := step["broker"].(json.Number).Int64()
			if h != "stop_broker" || int(n) >= len(w.brokers) {
				t.Fatalf("step %d: harness %s broker %d is not something this runner can do", i, h, n)
			}
			w.brokers[n].stop()
			continue
		}
		call := step["call"].(string)
		a, err := vs.subst(step["args"])
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, call, err)
		}
		argMap, _ := a.(map[string]any)
		expect, err := vs.subst(step["expect"])
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, call, err)
		}
		before := c.Retries()
		result, callErr := doCall(context.Background(), c, call, args(argMap))
		retries := c.Retries() - before
		var got any
		var gotText string
		if callErr != nil {
			var qe *Error
			if !errors.As(callErr, &qe) {
				t.Fatalf("step %d (%s): not a typed error: %v", i, call, callErr)
			}
			gotText = render(qe)
		} else {
			switch r := result.(type) {
			case nil:
				gotText = "null"
			case json.RawMessage:
				gotText = string(r) // the broker's text itself, numbers as sent
				if r == nil {
					gotText = "null"
				}
			default:
				gotText = render(result)
			}
		}
		if got, err = parse([]byte(gotText)); err != nil {
			t.Fatalf("step %d (%s): the answer is not JSON: %s", i, call, gotText)
		}
		exp, _ := expect.(map[string]any)
		if want, ok := exp["error"]; ok {
			if callErr == nil {
				t.Fatalf("step %d (%s): succeeded with %s, expected an error", i, call, gotText)
			}
			if err := match(want, got, true, ""); err != nil {
				t.Fatalf("step %d (%s): error %v: %s", i, call, err, gotText)
			}
		} else {
			if callErr != nil {
				t.Fatalf("step %d (%s): failed with %s", i, call, gotText)
			}
			if want, ok := exp["result"]; ok {
				if err := match(want, got, true, ""); err != nil {
					t.Fatalf("step %d (%s): result %v: %s", i, call, err, gotText)
				}
			}
		}
		if want, ok := step["retries"].(json.Number); ok {
			if n, _ := want.Int64(); n != retries {
				t.Fatalf("step %d (%s): %d retries, expected %d", i, call, retries, n)
			}
		}
		save, _ := step["save"].(map[string]any)
		for name, p := range save {
			v, ok := pointer(got, p.(string))
			if !ok {
				t.Fatalf("step %d (%s): save %s: nothing at %s in %s", i, call, name, p, gotText)
			}
			vs[name] = v
		}
	}
}
