package queen

// clients/API.md as this client holds it: the expiry rules, the error
// kinds, context errors through Unwrap, int64 versions, the typed
// transaction kv ops, QUEEN_URL and the retry hook.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAWriteWithoutOneValidExpiryNeverLeavesTheClient(t *testing.T) {
	c, _ := New(Options{URLs: []string{deadURL(t)}, MaxAttempts: 3, Backoff: time.Millisecond})
	ctx := context.Background()
	for _, exp := range []Expiry{{}, TTL(0), TTL(-time.Second), TTL(1), TTL(1500 * time.Millisecond)} {
		calls := map[string]error{}
		_, calls["put"] = c.Put(ctx, "ns", "k", 1, exp)
		_, calls["putIfAbsent"] = c.PutIfAbsent(ctx, "ns", "k", 1, exp)
		_, calls["incr"] = c.Incr(ctx, "ns", "k", 1, exp)
		_, calls["tx"] = NewTx().KVPut("ns", "k", 1, exp).KVDelete("ns", "j").JSON()
		for name, err := range calls {
			var qe *Error
			if !errors.As(err, &qe) || qe.Kind != KindBadRequest || qe.Code != "bad_argument" || qe.Status != 0 ||
				!strings.Contains(qe.Detail, "expiry: give ttl (seconds > 0) or forever") {
				t.Fatalf("%s with %+v: %v, expected a local bad_argument", name, exp, err)
			}
		}
	}
	if c.Retries() != 0 {
		t.Fatalf("%d retries: something was sent", c.Retries())
	}
	if _, err := c.Put(ctx, "ns", "k", 1, TTL(time.Minute)); err == nil || err.(*Error).Code != "unreachable" {
		t.Fatalf("a valid expiry is sent: %v", err)
	}
}

func TestEachStatusHasItsKind(t *testing.T) {
	for status, kind := range map[int]Kind{400: KindBadRequest, 413: KindBadRequest, 401: KindAuth, 403: KindAuth,
		404: KindNotFound, 409: KindConflict, 429: KindRateLimited, 503: KindUnavailable, 500: KindServer,
		502: KindServer} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			fmt.Fprint(w, `{"error":"x","code":"x","reason":"x","detail":"d"}`)
		}))
		c, _ := New(Options{URLs: []string{srv.URL}, MaxAttempts: 1})
		_, err := c.Get(context.Background(), "ns", "k")
		srv.Close()
		var qe *Error
		if !errors.As(err, &qe) || qe.Kind != kind || qe.Status != status {
			t.Fatalf("%d: %v, expected kind %s", status, err, kind)
		}
	}
}

func TestAContextDeadlineUnwraps(t *testing.T) {
	c, _ := New(Options{URLs: []string{silentPeer(t, "")}, MaxAttempts: 3, Backoff: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Get(ctx, "ns", "k")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v: errors.Is(err, context.DeadlineExceeded) is false", err)
	}
	var qe *Error
	if !errors.As(err, &qe) || qe.Kind != KindTransport {
		t.Fatalf("%v: expected a transport *Error", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, ccancel)
	if _, err := c.Get(cctx, "ns", "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v: errors.Is(err, context.Canceled) is false", err)
	}
}

func TestTypedTransactionAndVersions(t *testing.T) {
	b := sharedBroker(t)
	c, _ := New(Options{URLs: []string{b.base}})
	ctx := context.Background()
	ns, q := "go-tx-"+runToken(), "go-tx-"+runToken()
	if _, err := c.Push(ctx, []PushItem{{Queue: q, Payload: 1, TransactionID: "t1"}}); err != nil {
		t.Fatal(err)
	}
	p, err := c.Pop(ctx, PopOptions{Queue: q, Wait: 5 * time.Second})
	if err != nil || p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop: %v %+v", err, p)
	}
	m := p.Messages[0]
	r, err := c.Commit(ctx, NewTx().Ack(m.AckItem("")).KVPutIfAbsent(ns, "done", true, Forever).
		KVIncr(ns, "n", 2, TTL(time.Hour), Max(10)).KVPut(ns, "p", "x", Forever).KVDelete(ns, "nothing"))
	if err != nil || !r.Success {
		t.Fatalf("commit: %v %s", err, r.Raw)
	}
	got, err := c.Get(ctx, ns, "p")
	if err != nil || !got.Found {
		t.Fatalf("get: %v", err)
	}
	// The version a read gives is the type Expect takes.
	if w, err := c.Put(ctx, ns, "p", "y", Forever, Expect(got.Version)); err != nil || !w.Applied ||
		w.Version != got.Version+1 {
		t.Fatalf("put expecting %d: %v %+v", got.Version, err, w)
	}
	_, err = c.PutIfAbsent(ctx, ns, "done", 1, Forever, Required())
	if err == nil || err.Error() != "kv precondition failed at op 0: exists" || err.(*Error).Kind != KindPrecondition {
		t.Fatalf("a lost required op: %v", err)
	}
	if _, err := c.Commit(ctx, NewTx().KVIncr(ns, "n", 1, Expiry{})); err == nil || err.(*Error).Code != "bad_argument" {
		t.Fatalf("a transaction with a bad expiry: %v, expected bad_argument before sending", err)
	}
}

func TestQueenURLAndTheRetryHook(t *testing.T) {
	b := sharedBroker(t)
	t.Setenv("QUEEN_URL", deadURL(t)+", "+b.base)
	var seen []string
	c, err := New(Options{OnRetry: func(attempt int, err error, wait time.Duration) {
		seen = append(seen, fmt.Sprintf("%d %s", attempt, err.(*Error).Code))
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.Retries() != 1 || len(seen) != 1 || seen[0] != "1 unreachable" {
		t.Fatalf("retries %d, hook saw %v: expected the dead URL first, once", c.Retries(), seen)
	}
	t.Setenv("QUEEN_URL", "")
	if _, err := New(Options{}); err == nil {
		t.Fatal("no URL and no QUEEN_URL made a client")
	}
}

// Finding 6 of issue 38: the transaction's kv ops (and Apply's) are typed
// values made by one constructor per op, not maps; no public method of the
// client or the builder takes a map, and no kv op has an exported member
// through which one could be built.
func TestKVOpsAreTyped(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeOf(KVOp{}), reflect.TypeOf(Cond{})} {
		if typ.Kind() != reflect.Struct {
			t.Fatalf("%s is a %s: a kv op is built by its constructors only", typ, typ.Kind())
		}
		for i := 0; i < typ.NumField(); i++ {
			if typ.Field(i).IsExported() {
				t.Fatalf("%s.%s is exported", typ, typ.Field(i).Name)
			}
		}
	}
	takesMap := func(typ reflect.Type) bool {
		for typ.Kind() == reflect.Slice || typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		return typ.Kind() == reflect.Map
	}
	for _, owner := range []reflect.Type{reflect.TypeOf(&Tx{}), reflect.TypeOf(&Client{})} {
		for i := 0; i < owner.NumMethod(); i++ {
			m := owner.Method(i)
			for j := 1; j < m.Type.NumIn(); j++ {
				if takesMap(m.Type.In(j)) {
					t.Fatalf("%s.%s takes %s: an untyped map", owner, m.Name, m.Type.In(j))
				}
			}
		}
	}

	// Refused where made, returned before anything is sent.
	c, _ := New(Options{URLs: []string{deadURL(t)}, MaxAttempts: 3, Backoff: time.Millisecond})
	ctx := context.Background()
	for name, op := range map[string]KVOp{"zero": {}, "incr": IncrOp("ns", "k", 1, Expiry{}),
		"put": PutOp("ns", "k", 1, TTL(0)), "value": PutOp("ns", "k", func() {}, Forever)} {
		_, applyErr := c.Apply(ctx, []KVOp{GetOp("ns", "k"), op})
		_, commitErr := c.Commit(ctx, NewTx().KV(DeleteOp("ns", "k")).KV(op))
		for _, err := range []error{applyErr, commitErr} {
			var qe *Error
			if name != "value" && (!errors.As(err, &qe) || qe.Code != "bad_argument" || qe.Status != 0) {
				t.Fatalf("%s: %v, expected a local bad_argument", name, err)
			}
			if err == nil {
				t.Fatalf("%s: no error", name)
			}
		}
	}
	if c.Retries() != 0 {
		t.Fatalf("%d retries: a refused op was sent", c.Retries())
	}

	// Every constructor against the broker, in a batch and in a transaction.
	b := sharedBroker(t)
	c, _ = New(Options{URLs: []string{b.base}})
	ns := "go-ops-" + runToken()
	rs, err := c.Apply(ctx, []KVOp{PutOp(ns, "p/a", "x", Forever), PutIfAbsentOp(ns, "p/b", 2, TTL(time.Hour)),
		IncrOp(ns, "n", 2.5, Forever, Max(10)), GetOp(ns, "p/a"), GetManyOp(ns, []string{"p/a", "none"}),
		DeleteOp(ns, "none")})
	if err != nil || len(rs) != 6 {
		t.Fatalf("apply: %v %d", err, len(rs))
	}
	if !rs[0].Applied || !rs[1].Applied || string(rs[2].Value) != "2.5" || string(rs[3].Value) != `"x"` ||
		len(rs[4].Rows) != 1 || rs[4].Missing[0] != "none" || rs[5].Applied || rs[5].Reason != "absent" {
		t.Fatalf("apply results: %+v", rs)
	}
	more, err := c.Apply(ctx, []KVOp{GetPrefixOp(ns, "p/", PrefixOptions{Limit: 1, KeysOnly: true}),
		PutOp(ns, "p/a", "y", Forever, Expect(rs[0].Version+1))})
	if err != nil || len(more[0].Rows) != 1 || more[0].Rows[0].Key != "p/a" || !more[0].Truncated ||
		more[1].Applied || more[1].Reason != "version" {
		t.Fatalf("getPrefix and a put expecting a version the key does not hold: %v %+v", err, more)
	}
	r, err := c.Commit(ctx, NewTx().KV(IncrOp(ns, "n", 1, Forever)).KV(DeleteOp(ns, "p/b", Expect(rs[1].Version))).
		KV(PutIfAbsentOp(ns, "p/a", 0, Forever, Required())))
	if err != nil || r.Success || r.KVReason != "exists" || r.FailedIndex == nil || *r.FailedIndex != 2 {
		t.Fatalf("a transaction whose required op lost rolls back: %v %+v", err, r)
	}
	r, err = c.Commit(ctx, NewTx().KV(IncrOp(ns, "n", 1, Forever)).KV(DeleteOp(ns, "p/b", Expect(rs[1].Version))))
	if err != nil || !r.Success {
		t.Fatalf("commit: %v %s", err, r.Raw)
	}
	if n, err := c.Get(ctx, ns, "n"); err != nil || string(n.Value) != "3.5" {
		t.Fatalf("n: %v %s, expected 3.5 (the rolled-back incr not counted)", err, n.Raw)
	}
}

// Every call's answer is a typed result (a raw body only behind its Raw
// member), except Health, whose body is the broker's to extend.
func TestQueueCallsAreTyped(t *testing.T) {
	rawType := reflect.TypeOf(json.RawMessage(nil))
	owner := reflect.TypeOf(&Client{})
	for i := 0; i < owner.NumMethod(); i++ {
		m := owner.Method(i)
		if m.Name != "Health" && m.Type.NumOut() > 0 && m.Type.Out(0) == rawType {
			t.Fatalf("Client.%s answers json.RawMessage: give it a typed result", m.Name)
		}
	}

	b := sharedBroker(t)
	c, _ := New(Options{URLs: []string{b.base}})
	ctx := context.Background()
	queue, ns := "go-typed-"+runToken(), "go-typed-ns-"+runToken()
	cfg, err := c.Configure(ctx, QueueConfig{Queue: queue, Namespace: "billing", Options: map[string]any{"leaseTime": 45}})
	if err != nil || cfg.Queue != queue || cfg.QueueID == "" || cfg.Namespace == nil || *cfg.Namespace != "billing" ||
		cfg.Task != nil || string(cfg.Options["leaseTime"]) != "45" || len(cfg.Raw) == 0 {
		t.Fatalf("configure: %v %+v", err, cfg)
	}
	if _, err := c.Push(ctx, []PushItem{{Queue: queue, Payload: 1}}); err != nil {
		t.Fatal(err)
	}
	queues, err := c.Queues(ctx)
	found := false
	for _, q := range queues {
		if q.Name == queue {
			found = q.Messages.Total == 1 && q.Messages.Pending == 1 && q.Partitions == 1
		}
	}
	if err != nil || !found {
		t.Fatalf("queues: %v %+v, expected %s with one pending message", err, queues, queue)
	}
	p, err := c.Pop(ctx, PopOptions{Queue: queue})
	if err != nil || p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop: %v %+v", err, p)
	}
	lease, err := c.LeaseExtend(ctx, p.Messages[0].LeaseID, 60)
	if err != nil || !lease.Renewed || lease.LeaseID != p.Messages[0].LeaseID || lease.ExpiresAt == nil {
		t.Fatalf("lease extend: %v %+v", err, lease)
	}
	gone, err := c.LeaseExtend(ctx, "00000000-0000-4000-8000-000000000000", 60)
	if err != nil || gone.Renewed || gone.ExpiresAt != nil {
		t.Fatalf("an unknown lease: %v %+v, expected not renewed", err, gone)
	}
	if _, err := c.Put(ctx, ns, "a", 1, Forever); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, ns, "b", 2, Forever); err != nil {
		t.Fatal(err)
	}
	spaces, err := c.Namespaces(ctx)
	keys := int64(-1)
	for _, s := range spaces {
		if s.Namespace == ns {
			keys = s.Keys
		}
	}
	if err != nil || keys != 2 {
		t.Fatalf("namespaces: %v %+v, expected %s with 2 keys", err, spaces, ns)
	}
	for _, existed := range []bool{true, false} {
		d, err := c.QueueDelete(ctx, queue)
		if err != nil || d.Queue != queue || d.Existed != existed {
			t.Fatalf("queue delete: %v %+v, expected existed %v", err, d, existed)
		}
	}
}
