package queen

// The streams runtime (stream.go, stream_worker.go) on a real broker: every
// shared scenario of clients/conformance/streams, the configuration hash
// vectors byte for byte through the builder, a worker stopped between and
// inside cycles, a cycle whose lease was lost, another pipeline refused.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func streamsDir() string { return filepath.Join("..", "conformance", "streams") }

// orderedObj is a JSON object read keeping its members' order (aggregate
// fields are in the order given).
type orderedObj struct {
	keys []string
	vals map[string]any
}

// readOrdered decodes JSON with numbers as json.Number and objects as
// *orderedObj.
func readOrdered(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			var l []any
			for d.More() {
				v, err := readOrdered(d)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err = d.Token()
			if l == nil {
				l = []any{}
			}
			return l, err
		}
		o := &orderedObj{vals: map[string]any{}}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := readOrdered(d)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, k.(string))
			o.vals[k.(string)] = v
		}
		_, err = d.Token()
		return o, err
	}
	return tok, nil
}

func ordered(t *testing.T, raw []byte) any {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := readOrdered(d)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// plain turns *orderedObj back into map[string]any.
func plain(v any) any {
	switch x := v.(type) {
	case *orderedObj:
		m := map[string]any{}
		for k, e := range x.vals {
			m[k] = plain(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = plain(e)
		}
		return l
	}
	return v
}

// ---- the scenario expression language (the README's vocabulary) ----

func exprText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if f, ok := AsFloat(v); ok {
		return jsNumber(f)
	}
	b, _ := marshal(v)
	return string(b)
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	}
	if f, ok := AsFloat(v); ok {
		return f != 0 && !math.IsNaN(f)
	}
	return true
}

func ev(e any, vars map[string]any) (any, error) {
	o, ok := e.(*orderedObj)
	if !ok {
		if _, isList := e.([]any); isList {
			return nil, errors.New(`a list literal is written {"list": [...]}`)
		}
		return e, nil
	}
	if len(o.keys) != 1 {
		return nil, fmt.Errorf("an expression has one member: %v", o.keys)
	}
	op, a := o.keys[0], o.vals[o.keys[0]]
	evAll := func(l any) ([]any, error) {
		items, _ := l.([]any)
		out := make([]any, len(items))
		for i, x := range items {
			v, err := ev(x, vars)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	switch op {
	case "var":
		parts := strings.Split(a.(string), ".")
		cur := vars[parts[0]]
		for _, p := range parts[1:] {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, nil
			}
			cur = m[p]
		}
		return cur, nil
	case "obj":
		m := map[string]any{}
		src := a.(*orderedObj)
		for _, k := range src.keys {
			v, err := ev(src.vals[k], vars)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case "list":
		return evAll(a)
	case "str":
		v, err := ev(a, vars)
		return exprText(v), err
	case "concat":
		vs, err := evAll(a)
		var b strings.Builder
		for _, v := range vs {
			b.WriteString(exprText(v))
		}
		return b.String(), err
	case "not":
		v, err := ev(a, vars)
		return !truthy(v), err
	case "if":
		l := a.([]any)
		c, err := ev(l[0], vars)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return ev(l[1], vars)
		}
		return ev(l[2], vars)
	}
	vs, err := evAll(a)
	if err != nil {
		return nil, err
	}
	switch op {
	case "and", "or":
		for _, v := range vs {
			if truthy(v) != (op == "and") {
				return op == "or", nil
			}
		}
		return op == "and", nil
	case "eq":
		x, xn := AsFloat(vs[0])
		y, yn := AsFloat(vs[1])
		if xn && yn {
			return x == y, nil
		}
		return reflect.DeepEqual(vs[0], vs[1]), nil
	}
	ns := make([]float64, len(vs))
	for i, v := range vs {
		f, ok := AsFloat(v)
		if !ok {
			return nil, fmt.Errorf("%s: %v is not a number", op, v)
		}
		ns[i] = f
	}
	switch op {
	case "add":
		s := 0.0
		for _, n := range ns {
			s += n
		}
		return s, nil
	case "sub":
		return ns[0] - ns[1], nil
	case "mul":
		return ns[0] * ns[1], nil
	case "mod":
		return math.Mod(math.Mod(ns[0], ns[1])+ns[1], ns[1]), nil // the sign of the divisor
	case "gt":
		return ns[0] > ns[1], nil
	case "lt":
		return ns[0] < ns[1], nil
	}
	return nil, fmt.Errorf("unknown expression %s", op)
}

// counterGate allows while the key's state.count is under limit.
func counterGate(limit float64) GateFunc {
	return func(v any, c *GateCtx) (bool, error) {
		n, _ := AsFloat(c.State["count"])
		if n >= limit {
			return false, nil
		}
		c.State["count"] = n + 1
		return true, nil
	}
}

// buildStream turns a scenario pipeline into a Stream.
func buildStream(t *testing.T, source string, pipeline []any) *Stream {
	s := From(source)
	for _, x := range pipeline {
		op := x.(*orderedObj)
		f := func(k string) float64 {
			n, _ := AsFloat(op.vals[k])
			return n
		}
		fn := op.vals["fn"]
		wo := WindowOptions{GracePeriod: f("gracePeriod"), AllowedLateness: f("allowedLateness")}
		if et, ok := op.vals["eventTime"]; ok {
			wo.EventTime = func(v any) (any, error) { return ev(et, map[string]any{"value": v}) }
		}
		withCtx := func(v any, c Ctx) map[string]any {
			cm := map[string]any{"partition": c.Partition, "partitionId": c.PartitionID, "key": c.Key}
			if c.HasWindow {
				cm["windowStart"], cm["windowEnd"], cm["windowKey"] = c.WindowStart, c.WindowEnd, c.WindowKey
			}
			return map[string]any{"value": v, "ctx": cm}
		}
		switch name := op.vals["op"].(string); name {
		case "map":
			s = s.Map(func(v any, c Ctx) (any, error) { return ev(fn, withCtx(v, c)) })
		case "filter":
			s = s.Filter(func(v any, c Ctx) (bool, error) {
				r, err := ev(fn, withCtx(v, c))
				return truthy(r), err
			})
		case "flatMap":
			s = s.FlatMap(func(v any, c Ctx) ([]any, error) {
				r, err := ev(fn, withCtx(v, c))
				l, _ := r.([]any)
				return l, err
			})
		case "keyBy":
			s = s.KeyBy(func(v any) (any, error) { return ev(fn, map[string]any{"value": v}) })
		case "windowTumbling":
			s = s.WindowTumbling(f("seconds"), wo)
		case "windowSliding":
			s = s.WindowSliding(f("size"), f("slide"), wo)
		case "windowCron":
			s = s.WindowCron(op.vals["every"].(string), wo)
		case "windowSession":
			s = s.WindowSession(f("gap"), wo)
		case "reduce":
			s = s.Reduce(func(acc, v any) (any, error) { return ev(fn, map[string]any{"acc": acc, "value": v}) },
				plain(op.vals["initial"]))
		case "aggregate":
			fo := op.vals["fields"].(*orderedObj)
			var fields []Field
			for _, k := range fo.keys {
				x := fo.vals[k]
				fields = append(fields, Field{Name: k, Of: func(v any) (any, error) {
					return ev(x, map[string]any{"value": v})
				}})
			}
			s = s.Aggregate(fields...)
		case "gate":
			s = s.Gate(counterGate(f2(op.vals["counter"].(*orderedObj).vals["limit"])))
		case "to":
			q := op.vals["queue"].(string)
			switch p := op.vals["partition"].(type) {
			case nil:
				s = s.To(q)
			case string:
				s = s.ToPartition(q, p)
			default:
				s = s.ToPartitionBy(q, func(v any) (any, error) { return ev(p, map[string]any{"value": v}) })
			}
		default:
			t.Fatalf("unknown op %q", name)
		}
	}
	if s.Err() != nil {
		t.Fatalf("the pipeline: %v", s.Err())
	}
	return s
}

func f2(v any) float64 { n, _ := AsFloat(v); return n }

// sameJSON compares JSON values by value: numbers as numbers, objects
// whatever the order of their members.
func sameJSON(a, b any) bool {
	norm := func(v any) any {
		raw, _ := marshal(v)
		var out any
		_ = json.Unmarshal(raw, &out) // numbers as float64: 2 equals 2.0
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

type streamsEnv struct {
	t   *testing.T
	c   *Client
	ctx context.Context
}

func newStreamsEnv(t *testing.T) *streamsEnv {
	b := sharedBroker(t)
	c, err := New(Options{URLs: []string{b.base}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &streamsEnv{t, c, context.Background()}
}

func (e *streamsEnv) fresh(queues ...string) {
	for _, q := range queues {
		if _, err := e.c.QueueDelete(e.ctx, q); err != nil && StatusOf(err) != 404 {
			e.t.Fatalf("delete %s: %v", q, err)
		}
	}
}

func (e *streamsEnv) feed(source string, input map[string][]any) {
	for p, items := range input {
		var push []PushItem
		for _, x := range items {
			push = append(push, PushItem{Queue: source, Partition: p, Payload: x})
		}
		if _, err := e.c.Push(e.ctx, push); err != nil {
			e.t.Fatalf("push: %v", err)
		}
	}
}

func (e *streamsEnv) sinkOf(queue, partition string) []any {
	r, err := e.c.Pop(e.ctx, PopOptions{Queue: queue, Partition: partition, Batch: 1000, AutoAck: true})
	if err != nil {
		e.t.Fatalf("pop %s/%s: %v", queue, partition, err)
	}
	out := []any{}
	if r != nil {
		for _, m := range r.Messages {
			v, _ := decodeValue(m.Data)
			out = append(out, v)
		}
	}
	return out
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type scenario struct {
	file     string
	name     string
	source   string
	sink     string
	batch    int
	lease    int
	input    map[string][]any
	pipeline []any
	hash     string
	expect   map[string]any
}

func loadScenarios(t *testing.T) []scenario {
	files, err := filepath.Glob(filepath.Join(streamsDir(), "[0-9]*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	sort.Strings(files)
	var out []scenario
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o := ordered(t, raw).(*orderedObj)
		sc := scenario{file: filepath.Base(f), name: o.vals["name"].(string), source: o.vals["source"].(string),
			batch: int(f2(o.vals["batch"])), lease: int(f2(o.vals["leaseSeconds"])), input: map[string][]any{},
			pipeline: o.vals["pipeline"].([]any), hash: o.vals["configHash"].(string),
			expect: plain(o.vals["expect"]).(map[string]any)}
		in := o.vals["input"].(*orderedObj)
		for _, p := range in.keys {
			sc.input[p] = plain(in.vals[p]).([]any)
		}
		for _, x := range sc.pipeline {
			if op := x.(*orderedObj); op.vals["op"] == "to" {
				sc.sink = op.vals["queue"].(string)
			}
		}
		out = append(out, sc)
	}
	return out
}

func TestStreamsScenarios(t *testing.T) {
	scs := loadScenarios(t)
	if len(scs) != 11 {
		t.Errorf("%d scenarios, the README lists 11", len(scs))
	}
	for _, sc := range scs {
		sc := sc
		t.Run(strings.TrimSuffix(sc.file, ".json"), func(t *testing.T) {
			e := newStreamsEnv(t)
			e.fresh(sc.source, sc.sink)
			e.feed(sc.source, sc.input)
			s := buildStream(t, sc.source, sc.pipeline)
			if got := s.ConfigHash(); got != sc.hash {
				t.Fatalf("config hash %s, want %s (%s)", got, sc.hash, s.ShapeText())
			}
			w, err := s.Worker(e.c, "conf."+sc.name+".go", WorkerOptions{Batch: sc.batch, Wait: 200 * time.Millisecond,
				Reset: true, LeaseSeconds: sc.lease})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Drain(e.ctx); err != nil {
				t.Fatal(err)
			}
			for p, want := range sc.expect["sink"].(map[string]any) {
				if got := e.sinkOf(sc.sink, p); !sameJSON(got, want) {
					t.Errorf("sink of %s: %s, want %s", p, render(got), render(want))
				}
			}
			for p, want := range sc.expect["state"].(map[string]any) {
				got, err := w.State(e.ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				if !sameJSON(got, want) {
					t.Errorf("state of %s: %s, want %s", p, render(got), render(want))
				}
			}
			st := w.Stats()
			if float64(st.Messages) != f2(sc.expect["acked"]) || float64(st.Late) != f2(sc.expect["late"]) {
				t.Errorf("acked %d late %d, want %v %v", st.Messages, st.Late, sc.expect["acked"], sc.expect["late"])
			}
			tails, _ := sc.expect["tail"].(map[string]any)
			for p, want := range tails {
				// The denied tail is still leased to the worker: it comes back, in order, once the lease ends.
				var got []any
				waitFor(t, 15*time.Second, "the tail of "+p, func() bool {
					r, err := e.c.Pop(e.ctx, PopOptions{Queue: sc.source, Partition: p, Group: w.Group(), Batch: 1000,
						Wait: time.Second, AutoAck: true})
					if err != nil {
						t.Fatal(err)
					}
					if r != nil {
						for _, m := range r.Messages {
							v, _ := decodeValue(m.Data)
							got = append(got, v)
						}
					}
					return len(got) >= len(want.([]any))
				})
				if !sameJSON(got, want) {
					t.Errorf("tail of %s: %s, want %s", p, render(got), render(want))
				}
			}
		})
	}
}

func TestStreamsBuilderHashVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(streamsDir(), "hash_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	vs := plainVectors(t, raw)
	if len(vs) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range vs {
		s := buildStream(t, "src", v.vals["pipeline"].([]any))
		if got := s.ShapeText(); got != v.vals["canonical"] {
			t.Errorf("%s: text\n got %s\nwant %s", v.vals["name"], got, v.vals["canonical"])
		}
		if got := s.ConfigHash(); got != v.vals["configHash"] {
			t.Errorf("%s: hash %s, want %s", v.vals["name"], got, v.vals["configHash"])
		}
	}
}

func plainVectors(t *testing.T, raw []byte) []*orderedObj {
	var out []*orderedObj
	for _, v := range ordered(t, raw).(*orderedObj).vals["vectors"].([]any) {
		out = append(out, v.(*orderedObj))
	}
	return out
}

func TestStreamsPipelineRefusedWhereBuilt(t *testing.T) {
	id := func(v any, c Ctx) (any, error) { return v, nil }
	sum := func(acc, v any) (any, error) { return v, nil }
	for name, s := range map[string]*Stream{
		"map between window and reduce": From("q").WindowTumbling(1, WindowOptions{}).Map(id).Reduce(sum, 0),
		"two keyBy":                     From("q").KeyBy(func(v any) (any, error) { return 1, nil }).KeyBy(func(v any) (any, error) { return 1, nil }),
		"sink not last":                 From("q").To("s").Map(id),
		"sliding not a multiple":        From("q").WindowSliding(10, 3, WindowOptions{}).Reduce(sum, 0),
		"negative grace":                From("q").WindowTumbling(1, WindowOptions{GracePeriod: -1}).Reduce(sum, 0),
		"cron unit":                     From("q").WindowCron("fortnight", WindowOptions{}).Reduce(sum, 0),
		"nil function":                  From("q").Map(nil),
		"gate after reduce":             From("q").Reduce(sum, 0).Gate(counterGate(1)),
		"no source":                     From(""),
	} {
		if !errors.Is(s.Err(), ErrPipeline) {
			t.Errorf("%s: %v, want ErrPipeline", name, s.Err())
		}
		var pe *PipelineError
		if _, err := s.Worker(&Client{}, "n", WorkerOptions{}); !errors.As(err, &pe) {
			t.Errorf("%s: Worker gave %v", name, err)
		}
	}
	if _, err := From("q").WindowTumbling(1, WindowOptions{}).Worker(&Client{}, "n", WorkerOptions{}); !errors.Is(err, ErrPipeline) {
		t.Errorf("a window without its reduce: %v", err)
	}
	if _, err := TokenBucketGate(0, 1, nil); !errors.Is(err, ErrPipeline) {
		t.Errorf("a token bucket of no capacity: %v", err)
	}
}

// A worker stopped between cycles, and one stopped inside a cycle (its
// context ended before the commit): the next worker under the same name
// resumes from the committed state, and every total is exact.
func TestStreamsRestartResumesState(t *testing.T) {
	e := newStreamsEnv(t)
	var sc scenario
	for _, s := range loadScenarios(t) {
		if s.name == "tumbling" {
			sc = s
		}
	}
	name := "conf.restart.go"
	for stopAfter := 1; stopAfter <= 3; stopAfter++ {
		e.fresh(sc.source, sc.sink)
		e.feed(sc.source, sc.input)
		first, err := buildStream(t, sc.source, sc.pipeline).Worker(e.c, name,
			WorkerOptions{Batch: 2, Wait: 200 * time.Millisecond, Reset: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < stopAfter; i++ {
			if _, err := first.Step(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
		c2, _ := New(Options{URLs: e.c.urls})
		second, _ := buildStream(t, sc.source, sc.pipeline).Worker(c2, name, WorkerOptions{Batch: 2, Wait: 200 * time.Millisecond})
		reg, err := second.Register(e.ctx)
		if err != nil || reg.Fresh || reg.QueryID != first.QueryID() {
			t.Fatalf("the second worker registers the same query: %+v %v", reg, err)
		}
		if err := second.Drain(e.ctx); err != nil {
			t.Fatal(err)
		}
		if n := first.Stats().Messages + second.Stats().Messages; float64(n) != f2(sc.expect["acked"]) {
			t.Errorf("stop after %d: acked %d in all", stopAfter, n)
		}
		want := sc.expect["sink"].(map[string]any)["p1"]
		if got := e.sinkOf(sc.sink, "p1"); !sameJSON(got, want) {
			t.Errorf("stop after %d: sink %s, want %s", stopAfter, render(got), render(want))
		}
		st, err := second.State(e.ctx, "p1")
		if err != nil || !sameJSON(st, sc.expect["state"].(map[string]any)["p1"]) {
			t.Errorf("stop after %d: state %s %v", stopAfter, render(st), err)
		}
		c2.Close()
	}

	// Inside a cycle: Run's context ends while the third cycle is being
	// computed (in the sink's partition function), so its commit is never
	// sent; that batch comes back once its lease ends.
	src, sink := "streams-go-restart", "streams-go-restart-sink"
	e.fresh(src, sink)
	var in []any
	for i := 1; i <= 10; i++ {
		in = append(in, map[string]any{"n": i})
	}
	e.feed(src, map[string][]any{"p1": in})
	pipe := func(hook func()) *Stream {
		return From(src).Reduce(func(acc, v any) (any, error) {
			return f2(acc) + f2(v.(map[string]any)["n"]), nil
		}, 0).ToPartitionBy(sink, func(v any) (any, error) { hook(); return "p1", nil })
	}
	ctx, stop := context.WithCancel(e.ctx)
	var pushes atomic.Int64
	stats, err := pipe(func() {
		if pushes.Add(1) == 5 { // the third cycle's first value (batches of 2)
			stop()
		}
	}).Run(ctx, e.c, "conf.restart2.go", WorkerOptions{Batch: 2, Wait: 200 * time.Millisecond, Reset: true, LeaseSeconds: 1})
	if err != nil || stats.Messages != 4 {
		t.Fatalf("the stopped worker: %+v %v", stats, err)
	}
	next, _ := pipe(func() {}).Worker(e.c, "conf.restart2.go", WorkerOptions{Batch: 2, Wait: 200 * time.Millisecond, LeaseSeconds: 1})
	waitFor(t, 15*time.Second, "the rest acked", func() bool {
		if _, err := next.Step(e.ctx); err != nil {
			t.Fatal(err)
		}
		return next.Stats().Messages >= 6
	})
	if next.Stats().Messages != 6 {
		t.Errorf("the next worker acked %d", next.Stats().Messages)
	}
	want := []any{1, 3, 6, 10, 15, 21, 28, 36, 45, 55}
	if got := e.sinkOf(sink, "p1"); !sameJSON(got, want) {
		t.Errorf("running sums %s, want %s", render(got), render(want))
	}
}

// Worker A's cycle waits (in its sink's partition function, while the
// cycle's body is built) until its lease has ended and worker B has run the
// batch: A's commit is refused, counted, and writes nothing; B's output is
// there once.
func TestStreamsLeaseLostCycleRefused(t *testing.T) {
	e := newStreamsEnv(t)
	src, sink, name := "streams-go-lease", "streams-go-lease-sink", "conf.lease.go"
	e.fresh(src, sink)
	e.feed(src, map[string][]any{"p1": {1, 2, 3}})
	aIn, bDone := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	pipe := func(hook func()) *Stream {
		return From(src).Map(func(v any, c Ctx) (any, error) { return f2(v) * 10, nil }).
			ToPartitionBy(sink, func(v any) (any, error) { hook(); return "p1", nil })
	}
	a, err := pipe(func() {
		if once.CompareAndSwap(false, true) {
			close(aIn)
			<-bDone
		}
	}).Worker(e.c, name, WorkerOptions{Batch: 10, Wait: 200 * time.Millisecond, Reset: true, LeaseSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	aErr := make(chan error, 1)
	go func() { _, err := a.Step(e.ctx); aErr <- err }()
	<-aIn
	b, _ := pipe(func() {}).Worker(e.c, name, WorkerOptions{Batch: 10, Wait: 500 * time.Millisecond})
	waitFor(t, 15*time.Second, "B to run the batch", func() bool {
		if _, err := b.Step(e.ctx); err != nil {
			t.Fatal(err)
		}
		return b.Stats().Messages >= 3
	})
	close(bDone)
	if err := <-aErr; err != nil {
		t.Fatalf("a refused cycle is not an error of Step: %v", err)
	}
	if st := a.Stats(); st.LeaseLost != 1 || st.Messages != 0 || st.Cycles != 0 {
		t.Errorf("A: %+v", st)
	}
	if got := e.sinkOf(sink, "p1"); !sameJSON(got, []any{10, 20, 30}) {
		t.Errorf("sink %s", render(got))
	}
	// The refusal itself, typed: a cycle under a lease that is gone.
	_, err = e.c.StreamsCycle(e.ctx, StreamsCycleRequest{QueryID: a.QueryID(), PartitionID: a.partitions["p1"],
		ConsumerGroup: a.Group(), Ack: &StreamsAck{TransactionID: "00000000-0000-0000-0000-000000000000",
			LeaseID: "00000000-0000-0000-0000-000000000000", Count: 1}})
	var qe *Error
	if !errors.Is(err, ErrLeaseLost) || !errors.As(err, &qe) || qe.Status != 409 {
		t.Errorf("a cycle without its lease: %v", err)
	}
}

func TestStreamsConfigMismatchRefused(t *testing.T) {
	e := newStreamsEnv(t)
	src, name := "streams-go-cfg2", "conf.cfg2.go"
	e.fresh(src)
	id := func(v any, c Ctx) (any, error) { return v, nil }
	keep := func(v any, c Ctx) (bool, error) { return true, nil }
	w, _ := From(src).Map(id).Worker(e.c, name, WorkerOptions{Reset: true})
	if _, err := w.Register(e.ctx); err != nil {
		t.Fatal(err)
	}
	other, _ := From(src).Filter(keep).Worker(e.c, name, WorkerOptions{Wait: 100 * time.Millisecond})
	_, err := other.Register(e.ctx)
	var qe *Error
	if !errors.Is(err, ErrConfigMismatch) || !errors.As(err, &qe) || qe.Status != 409 || qe.Kind != KindConflict {
		t.Fatalf("another pipeline: %v", err)
	}
	if _, err := From(src).Filter(keep).Run(e.ctx, e.c, name, WorkerOptions{}); !errors.Is(err, ErrConfigMismatch) {
		t.Fatalf("Run: %v", err)
	}
	reset, _ := From(src).Filter(keep).Worker(e.c, name, WorkerOptions{Reset: true})
	if r, err := reset.Register(e.ctx); err != nil || !r.Reset {
		t.Fatalf("reset: %+v %v", r, err)
	}
}

// A user function's failure stops Run with a *FuncError and commits nothing.
func TestStreamsFunctionErrorStopsRun(t *testing.T) {
	e := newStreamsEnv(t)
	src := "streams-go-fnerr"
	e.fresh(src)
	e.feed(src, map[string][]any{"p1": {1}})
	boom := errors.New("boom")
	_, err := From(src).Map(func(v any, c Ctx) (any, error) { return nil, boom }).Run(e.ctx, e.c, "conf.fnerr.go",
		WorkerOptions{Reset: true, Wait: 100 * time.Millisecond, LeaseSeconds: 1})
	var fe *FuncError
	if !errors.Is(err, boom) || !errors.As(err, &fe) || fe.Op != "map" {
		t.Fatalf("Run: %v", err)
	}
	st, err := From(src).Map(func(v any, c Ctx) (any, error) { panic("bad input") }).Run(e.ctx, e.c, "conf.fnerr.go",
		WorkerOptions{Wait: 100 * time.Millisecond, LeaseSeconds: 1})
	if !errors.As(err, &fe) || st.Messages != 0 {
		t.Fatalf("a panicking function: %+v %v", st, err)
	}
}

// The token bucket by the worker's clock: two tokens, one more per 1000 s.
func TestStreamsTokenBucketGate(t *testing.T) {
	e := newStreamsEnv(t)
	src, sink := "streams-go-tb", "streams-go-tb-sink"
	e.fresh(src, sink)
	e.feed(src, map[string][]any{"p1": {1, 2, 3, 4}})
	var now atomic.Int64
	now.Store(1_000_000)
	g, err := TokenBucketGate(2, 0.001, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := From(src).Gate(g).To(sink).Worker(e.c, "conf.tb.go", WorkerOptions{Batch: 10, Wait: 200 * time.Millisecond,
		Reset: true, LeaseSeconds: 1, Clock: func() time.Time { return time.UnixMilli(now.Load()) }})
	if err := w.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Messages != 2 || st.Denied != 2 {
		t.Errorf("first drain: %+v", st)
	}
	if got := e.sinkOf(sink, "p1"); !sameJSON(got, []any{1, 2}) {
		t.Errorf("sink %s", render(got))
	}
	now.Add(1_000_000)
	waitFor(t, 15*time.Second, "the third message", func() bool {
		if _, err := w.Step(e.ctx); err != nil {
			t.Fatal(err)
		}
		return w.Stats().Messages >= 3
	})
	if got := e.sinkOf(sink, "p1"); !sameJSON(got, []any{3}) {
		t.Errorf("sink after a token %s", render(got))
	}
	st, _ := w.State(e.ctx, "p1")
	if tok := f2(st["gate\u001fp1"].(map[string]any)["tokens"]); tok >= 1 {
		t.Errorf("tokens left %v", tok)
	}
}

// Run ends cleanly when its context does, while a pop waits.
func TestStreamsRunStopsOnContext(t *testing.T) {
	e := newStreamsEnv(t)
	src := "streams-go-stop"
	e.fresh(src)
	w, _ := From(src).Map(func(v any, c Ctx) (any, error) { return v, nil }).Worker(e.c, "conf.stop.go",
		WorkerOptions{Reset: true, Wait: 5 * time.Second})
	ctx, stop := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor(t, 10*time.Second, "registration", func() bool { return w.QueryID() != "" })
	stop()
	select {
	case err := <-done:
		if err != nil || w.Stats().Errors != 0 {
			t.Fatalf("Run: %v %+v", err, w.Stats())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
}

// Workers stopped at random points (their context ended before, inside or
// after a cycle's commit, so some answers are lost), then replaced: the
// sink holds each partition's running sums exactly once and in order.
func TestStreamsStoppedAtRandomNeverDuplicates(t *testing.T) {
	e := newStreamsEnv(t)
	src, sink, name, n := "streams-go-kill", "streams-go-kill-sink", "conf.kill.go", 150
	e.fresh(src, sink)
	// A stopped worker's batch comes back when its lease expires and counts a delivery: past the queue's
	// retryLimit (3) it would go to the dead letters and skip the sums. The property here is the cycle's,
	// so no run may reach the limit.
	if _, err := e.c.Configure(e.ctx, QueueConfig{Queue: src, Options: map[string]any{"retryLimit": 1000000}}); err != nil {
		t.Fatal(err)
	}
	in := map[string][]any{}
	for _, p := range []string{"p1", "p2"} {
		for i := 1; i <= n; i++ {
			in[p] = append(in[p], i)
		}
	}
	e.feed(src, in)
	pipe := From(src).Reduce(func(acc, v any) (any, error) { return f2(acc) + f2(v), nil }, 0).To(sink)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	o := WorkerOptions{Batch: 3, Wait: 100 * time.Millisecond, LeaseSeconds: 1}
	if w, _ := pipe.Worker(e.c, name, WorkerOptions{Reset: true}); w != nil {
		if _, err := w.Register(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	stops := 0
	acked := 0
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); {
		// The stop point, not a synchronisation: a worker runs this long.
		ctx, stop := context.WithTimeout(e.ctx, time.Duration(2+rng.Intn(30))*time.Millisecond)
		st, err := pipe.Run(ctx, e.c, name, o)
		if err != nil {
			t.Fatal(err)
		}
		acked += st.Messages
		stop()
		stops++
	}
	t.Logf("%d workers stopped, %d messages acked by them (that they know of)", stops, acked)
	last, _ := pipe.Worker(e.c, name, o)
	var want []any
	for i, sum := 1, 0; i <= n; i++ {
		sum += i
		want = append(want, sum)
	}
	got := map[string][]any{}
	done := func() bool {
		for _, p := range []string{"p1", "p2"} {
			got[p] = append(got[p], e.sinkOf(sink, p)...)
			if len(got[p]) < n {
				return false
			}
		}
		return true
	}
	waitFor(t, 30*time.Second, "every running sum in the sink", func() bool {
		if _, err := last.Step(e.ctx); err != nil {
			t.Fatal(err)
		}
		return done()
	})
	// Nothing more comes: the source is drained and the sink holds no more.
	if err := last.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	done()
	for _, p := range []string{"p1", "p2"} {
		if !sameJSON(got[p], want) {
			t.Errorf("%s after %d stops: %s", p, stops, render(got[p]))
		}
	}
}

// Without an event-time function a window takes the message's createdAt.
func TestStreamsWindowByCreatedAt(t *testing.T) {
	e := newStreamsEnv(t)
	src := "streams-go-ctime"
	e.fresh(src)
	before := time.Now().Add(-time.Minute).UnixMilli()
	e.feed(src, map[string][]any{"p1": {5}})
	w, err := From(src).WindowTumbling(3600, WindowOptions{}).Aggregate(Field{Name: "sum", Of: func(v any) (any, error) {
		return v, nil
	}}).Worker(e.c, "conf.ctime.go", WorkerOptions{Reset: true, Wait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Minute).UnixMilli()
	st, err := w.State(e.ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	wm, _ := st["__wm__"].(map[string]any)
	if at := int64(f2(wm["eventTimeMs"])); at < before || at > after {
		t.Fatalf("the watermark %d is not the message's createdAt (%d..%d)", at, before, after)
	}
	start := int64(f2(wm["eventTimeMs"])) / 3600000 * 3600000
	row, _ := st["tumb:3600\u001f"+isoMs(start)+"\u001fp1"].(map[string]any)
	if acc, _ := row["acc"].(map[string]any); f2(acc["sum"]) != 5 || int64(f2(row["windowStart"])) != start {
		t.Fatalf("state %s", render(st))
	}
}

// A pop the broker refuses (a 4xx) ends Run with that error, not a retry loop.
func TestStreamsRefusedPopEndsRun(t *testing.T) {
	e := newStreamsEnv(t)
	ctx, stop := context.WithTimeout(e.ctx, 20*time.Second)
	defer stop()
	st, err := From("streams-go-refused").Map(func(v any, c Ctx) (any, error) { return v, nil }).Run(ctx, e.c,
		"conf.refused.go", WorkerOptions{Reset: true, Group: "bad group name/\x01"})
	if s := StatusOf(err); s < 400 || s >= 500 || ctx.Err() != nil {
		t.Fatalf("Run: %v (%+v)", err, st)
	}
}
