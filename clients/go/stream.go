// The streams runtime's pipeline: From(queue) and its operators. Every
// operator's meaning, the configuration hash and the worker cycle are
// written once in clients/STREAMS.md; this file and stream_worker.go follow
// it (the Python and JS runtimes are their twins on the same shared
// scenarios, clients/conformance/streams).

package queen

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Values flowing through a pipeline are JSON values as encoding/json
// decodes them with UseNumber (json.Number, string, bool, nil, []any,
// map[string]any), or whatever an earlier function returned. AsFloat reads
// a number of any of Go's numeric types.

// Ctx is what map, filter, flat_map and foreach functions receive with the
// value: the source partition, the key and, for a window's output, the
// window (epoch ms; WindowKey is the start as ISO 8601).
type Ctx struct {
	Partition   string
	PartitionID string
	Key         string
	HasWindow   bool
	WindowStart int64
	WindowEnd   int64
	WindowKey   string
}

// GateCtx is what a gate function receives: State is the key's state (a
// copy: its changes are kept only if the message is allowed), StreamTimeMs
// the worker's clock at the cycle's start.
type GateCtx struct {
	State        map[string]any
	StreamTimeMs int64
	Key          string
	Partition    string
	PartitionID  string
}

// The function types of the operators. An error stops the worker (the
// batch is left to its lease); a panic is turned into such an error.
type (
	MapFunc     func(v any, c Ctx) (any, error)
	FilterFunc  func(v any, c Ctx) (bool, error)
	FlatMapFunc func(v any, c Ctx) ([]any, error)
	KeyFunc     func(v any) (any, error)
	ReduceFunc  func(acc, v any) (any, error)
	ValueFunc   func(v any) (any, error)
	GateFunc    func(v any, c *GateCtx) (bool, error)
	ForeachFunc func(v any, c Ctx) error
)

// Field is one named field of Aggregate: count, sum, min, max, avg, or any
// other name (summed); Of extracts the number from the value.
type Field struct {
	Name string
	Of   ValueFunc
}

// WindowOptions are a window's settings, in seconds. EventTime, when set,
// gives the value's time (epoch ms, an ISO 8601 text or a time.Time);
// without it the message's createdAt is used.
type WindowOptions struct {
	GracePeriod     float64
	AllowedLateness float64
	EventTime       ValueFunc
}

// ErrPipeline is matched (errors.Is) by every *PipelineError.
var ErrPipeline = errors.New("queen: invalid stream pipeline")

// PipelineError is a pipeline refused where it was built: an operator out
// of order, a bad setting, a missing function.
type PipelineError struct {
	Op     string // the operator's kind
	Detail string
}

func (e *PipelineError) Error() string { return "queen: stream pipeline: " + e.Op + ": " + e.Detail }

// Is makes errors.Is(err, ErrPipeline) hold.
func (e *PipelineError) Is(target error) bool { return target == ErrPipeline }

// FuncError is a user function of the pipeline that failed (an error it
// returned, or a panic): the cycle is not committed and the worker stops.
type FuncError struct {
	Op  string // the operator's kind
	Err error
}

func (e *FuncError) Error() string { return "queen: stream " + e.Op + " function: " + e.Err.Error() }
func (e *FuncError) Unwrap() error { return e.Err }

// call runs a user function, turning a panic into a *FuncError.
func call[T any](op string, f func() (T, error)) (out T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &FuncError{Op: op, Err: fmt.Errorf("panic: %v", r)}
		}
	}()
	out, err = f()
	if err != nil {
		var fe *FuncError
		if !errors.As(err, &fe) {
			err = &FuncError{Op: op, Err: err}
		}
	}
	return out, err
}

// ---- operators ----

type operator interface{ shape() ShapeOp }

type mapOp struct {
	kind    string // map, filter, flatMap
	mapFn   MapFunc
	filter  FilterFunc
	flatMap FlatMapFunc
}

func (o *mapOp) shape() ShapeOp { return ShapeOp{Kind: o.kind} }

// apply gives the values one value becomes.
func (o *mapOp) apply(v any, c Ctx) ([]any, error) {
	switch o.kind {
	case "map":
		out, err := call(o.kind, func() (any, error) { return o.mapFn(v, c) })
		return []any{out}, err
	case "filter":
		keep, err := call(o.kind, func() (bool, error) { return o.filter(v, c) })
		if err != nil || !keep {
			return nil, err
		}
		return []any{v}, nil
	}
	return call(o.kind, func() ([]any, error) { return o.flatMap(v, c) })
}

type keyByOp struct{ fn KeyFunc }

func (o *keyByOp) shape() ShapeOp { return ShapeOp{Kind: "keyBy"} }

type reduceOp struct {
	kind    string // reduce, aggregate
	fn      ReduceFunc
	initial any
	fields  []Field
}

func (o *reduceOp) shape() ShapeOp {
	if o.kind == "aggregate" {
		s := ShapeOp{Kind: "aggregate"}
		for _, f := range o.fields {
			s.Fields = append(s.Fields, f.Name)
		}
		return s
	}
	return ShapeOp{Kind: "reduce", HasInitial: o.initial != nil}
}

func (o *reduceOp) start() any {
	if o.kind == "aggregate" {
		acc := map[string]any{}
		for _, f := range o.fields {
			switch f.Name {
			case "min", "max":
				acc[f.Name] = nil
			case "avg":
				acc["__avg_sum"], acc["__avg_count"], acc["avg"] = 0.0, 0.0, 0.0
			default:
				acc[f.Name] = 0.0
			}
		}
		return acc
	}
	return cloneJSON(o.initial)
}

func (o *reduceOp) step(acc, v any) (any, error) {
	if o.kind == "reduce" {
		return call("reduce", func() (any, error) { return o.fn(acc, v) })
	}
	prev, ok := acc.(map[string]any)
	if !ok {
		prev = o.start().(map[string]any)
	}
	next := make(map[string]any, len(prev))
	for k, x := range prev {
		next[k] = x
	}
	for _, f := range o.fields {
		raw, err := call("aggregate", func() (any, error) { return f.Of(v) })
		if err != nil {
			return nil, err
		}
		n, isNum := AsFloat(raw)
		cur, hasCur := AsFloat(next[f.Name])
		switch f.Name {
		case "count":
			if !isNum {
				n = 1
			}
			next["count"] = cur + n
		case "min", "max":
			if isNum {
				if hasCur && ((f.Name == "min" && cur < n) || (f.Name == "max" && cur > n)) {
					n = cur
				}
				next[f.Name] = n
			}
		case "avg":
			if isNum {
				s, _ := AsFloat(next["__avg_sum"])
				c, _ := AsFloat(next["__avg_count"])
				next["__avg_sum"], next["__avg_count"], next["avg"] = s+n, c+1, (s+n)/(c+1)
			}
		default:
			if !isNum {
				n = 0
			}
			next[f.Name] = cur + n
		}
	}
	return next, nil
}

// result is the emitted value: an aggregate's fields without the running
// sums behind avg (names starting "__").
func (o *reduceOp) result(acc any) any {
	m, ok := acc.(map[string]any)
	if o.kind == "reduce" || !ok {
		return acc
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		if !strings.HasPrefix(k, "__") {
			out[k] = x
		}
	}
	return out
}

type windowOp struct {
	s          ShapeOp
	tag        string // the state keys' prefix: tumb:60, slide:60:10, cron:week, sess:5
	graceMs    int64
	latenessMs int64
	eventTime  ValueFunc
	session    bool
	gapMs      int64
	sizeMs     int64
	slideMs    int64
	offsetMs   int64 // window starts are offsetMs plus a multiple of the slide
}

func (o *windowOp) shape() ShapeOp { return o.s }

// assign gives the [start, end) of every fixed window holding ts.
func (o *windowOp) assign(ts int64) [][2]int64 {
	last := floorDiv(ts-o.offsetMs, o.slideMs)*o.slideMs + o.offsetMs
	var out [][2]int64
	for s := last - o.sizeMs + o.slideMs; s <= last; s += o.slideMs {
		out = append(out, [2]int64{s, s + o.sizeMs})
	}
	return out
}

type gateOp struct{ fn GateFunc }

func (o *gateOp) shape() ShapeOp { return ShapeOp{Kind: "gate"} }

type sinkOp struct {
	queue     string
	partition string
	by        ValueFunc
}

func (o *sinkOp) shape() ShapeOp { return ShapeOp{Kind: "sink", Queue: o.queue} }

type foreachOp struct{ fn ForeachFunc }

func (o *foreachOp) shape() ShapeOp { return ShapeOp{Kind: "foreach"} }

// ---- the builder ----

// Stream is an immutable pipeline: each method returns a new Stream with
// one operator more. A bad operator (or one out of order) is kept as the
// stream's error, returned by Err, Worker and Run; nothing panics.
type Stream struct {
	source string
	ops    []operator
	err    error
}

// From is the stream of the messages of queue.
func From(queue string) *Stream {
	s := &Stream{source: queue}
	if queue == "" {
		s.err = &PipelineError{Op: "from", Detail: "a stream needs a source queue"}
	}
	return s
}

func (s *Stream) with(op operator, bad string) *Stream {
	n := &Stream{source: s.source, ops: append(append([]operator(nil), s.ops...), op), err: s.err}
	if n.err == nil && bad != "" {
		n.err = &PipelineError{Op: op.shape().Kind, Detail: bad}
	}
	if n.err == nil {
		_, n.err = compile(n.ops)
	}
	return n
}

func need(fnIsNil bool, what string) string {
	if fnIsNil {
		return what + " needs a function"
	}
	return ""
}

// Source is the source queue.
func (s *Stream) Source() string { return s.source }

// Err is the first error of the pipeline's construction, or nil.
func (s *Stream) Err() error { return s.err }

// Map makes each value fn(value, ctx).
func (s *Stream) Map(fn MapFunc) *Stream {
	return s.with(&mapOp{kind: "map", mapFn: fn}, need(fn == nil, "map"))
}

// Filter keeps the values for which fn(value, ctx) is true.
func (s *Stream) Filter(fn FilterFunc) *Stream {
	return s.with(&mapOp{kind: "filter", filter: fn}, need(fn == nil, "filter"))
}

// FlatMap makes each value the values fn(value, ctx) gives (none, one or many), in order.
func (s *Stream) FlatMap(fn FlatMapFunc) *Stream {
	return s.with(&mapOp{kind: "flatMap", flatMap: fn}, need(fn == nil, "flatMap"))
}

// KeyBy makes the key the text of fn(value) (default: the source partition's name).
func (s *Stream) KeyBy(fn KeyFunc) *Stream {
	return s.with(&keyByOp{fn: fn}, need(fn == nil, "keyBy"))
}

// Reduce folds the values per key (per window after a window): acc =
// fn(acc, value), from a copy of initial (nil: none). Without a window it
// emits the new accumulator for every value.
func (s *Stream) Reduce(fn ReduceFunc, initial any) *Stream {
	return s.with(&reduceOp{kind: "reduce", fn: fn, initial: initial}, need(fn == nil, "reduce"))
}

// Aggregate is a reduce into named fields, in the order given.
func (s *Stream) Aggregate(fields ...Field) *Stream {
	bad := ""
	seen := map[string]bool{}
	if len(fields) == 0 {
		bad = "aggregate needs at least one field"
	}
	for _, f := range fields {
		switch {
		case f.Of == nil:
			bad = "aggregate field " + f.Name + " needs a function"
		case seen[f.Name]:
			bad = "aggregate field " + f.Name + " is given twice"
		}
		seen[f.Name] = true
	}
	return s.with(&reduceOp{kind: "aggregate", fields: append([]Field(nil), fields...)}, bad)
}

func seconds(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// maxMs bounds durations in ms (2^53, some 285,000 years): a longer grace,
// lateness or session gap behaves the same (nothing ever closes) and keeps
// the window arithmetic within int64.
const maxMs = 1 << 53

func msOf(sec float64) int64 {
	if ms := math.Round(sec * 1000); ms < maxMs {
		return int64(ms)
	}
	return maxMs
}

func newWindow(s ShapeOp, tag string, o WindowOptions) (*windowOp, string) {
	s.GracePeriod, s.AllowedLateness, s.EventTime = o.GracePeriod, o.AllowedLateness, o.EventTime != nil
	w := &windowOp{s: s, tag: tag, graceMs: msOf(o.GracePeriod), latenessMs: msOf(o.AllowedLateness),
		eventTime: o.EventTime}
	if !seconds(o.GracePeriod) || !seconds(o.AllowedLateness) {
		return w, "GracePeriod and AllowedLateness are seconds >= 0"
	}
	return w, ""
}

func fixedWindow(s ShapeOp, tag string, size, slide float64, offsetMs int64, o WindowOptions) (*windowOp, string) {
	w, bad := newWindow(s, tag, o)
	if bad != "" {
		return w, bad
	}
	if !(size > 0) || !(slide > 0) || math.IsInf(size, 0) || math.IsInf(slide, 0) {
		return w, "window sizes are seconds > 0"
	}
	w.sizeMs, w.slideMs, w.offsetMs = msOf(size), msOf(slide), offsetMs
	if w.sizeMs >= maxMs {
		return w, "a window's size is under 2^53 ms"
	}
	if w.slideMs < 1 {
		return w, "a window's size and slide are 1 ms at least"
	}
	if w.sizeMs%w.slideMs != 0 {
		return w, "a sliding window's size must be a whole multiple of its slide"
	}
	return w, ""
}

// WindowTumbling is consecutive windows of seconds, per key.
func (s *Stream) WindowTumbling(secs float64, o WindowOptions) *Stream {
	w, bad := fixedWindow(ShapeOp{Kind: "window-tumbling", Seconds: secs}, "tumb:"+jsNumber(secs), secs, secs, 0, o)
	return s.with(w, bad)
}

// WindowSliding is windows of size seconds starting every slide seconds, per key.
func (s *Stream) WindowSliding(size, slide float64, o WindowOptions) *Stream {
	w, bad := fixedWindow(ShapeOp{Kind: "window-sliding", Size: size, Slide: slide},
		"slide:"+jsNumber(size)+":"+jsNumber(slide), size, slide, 0, o)
	return s.with(w, bad)
}

var cronUnits = map[string]float64{"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}

// WindowCron is windows of one calendar unit in UTC: every is second,
// minute, hour, day or week (weeks start on Monday 00:00).
func (s *Stream) WindowCron(every string, o WindowOptions) *Stream {
	size, ok := cronUnits[every]
	var offset int64
	if every == "week" {
		offset = 4 * 86400 * 1000 // 1970-01-01 was a Thursday, 4 days after a Monday
	}
	w, bad := fixedWindow(ShapeOp{Kind: "window-cron", Every: every}, "cron:"+every, size, size, offset, o)
	if !ok {
		bad = "every is second, minute, hour, day or week"
	}
	return s.with(w, bad)
}

// WindowSession is, per key, a window lasting while values come at most gap seconds apart.
func (s *Stream) WindowSession(gap float64, o WindowOptions) *Stream {
	w, bad := newWindow(ShapeOp{Kind: "window-session", Gap: gap}, "sess:"+jsNumber(gap), o)
	w.session, w.gapMs = true, msOf(gap)
	if bad == "" && (!(gap > 0) || math.IsInf(gap, 0) || w.gapMs < 1) {
		bad = "a session's gap is 1 ms at least"
	}
	return s.with(w, bad)
}

// Gate lets values through while fn allows them; the first denied message
// stops the batch there (acked up to it; the rest come back in order once
// the worker's lease ends).
func (s *Stream) Gate(fn GateFunc) *Stream { return s.with(&gateOp{fn: fn}, need(fn == nil, "gate")) }

// To pushes each value to queue, to the partition of the source's name.
func (s *Stream) To(queue string) *Stream { return s.to(&sinkOp{queue: queue}) }

// ToPartition pushes each value to the partition named partition of queue.
func (s *Stream) ToPartition(queue, partition string) *Stream {
	return s.to(&sinkOp{queue: queue, partition: partition})
}

// ToPartitionBy pushes each value to the partition of queue named by the text of fn(value).
func (s *Stream) ToPartitionBy(queue string, fn ValueFunc) *Stream {
	if fn == nil {
		return s.with(&sinkOp{queue: queue}, "ToPartitionBy needs a function")
	}
	return s.to(&sinkOp{queue: queue, by: fn})
}

func (s *Stream) to(o *sinkOp) *Stream {
	bad := ""
	if o.queue == "" {
		bad = "to needs a queue name"
	}
	return s.with(o, bad)
}

// Foreach calls fn for each value before the cycle commits: at least once
// (a cycle that does not commit calls it again when its batch comes back).
func (s *Stream) Foreach(fn ForeachFunc) *Stream {
	return s.with(&foreachOp{fn: fn}, need(fn == nil, "foreach"))
}

// Shape is the pipeline as the configuration hash sees it.
func (s *Stream) Shape() []ShapeOp {
	out := make([]ShapeOp, 0, len(s.ops))
	for _, op := range s.ops {
		out = append(out, op.shape())
	}
	return out
}

// ShapeText is the text the configuration hash is taken of.
func (s *Stream) ShapeText() string { return ShapeText(s.Shape()) }

// ConfigHash is the pipeline's configuration hash, the one every runtime
// computes for the same pipeline.
func (s *Stream) ConfigHash() string { return ConfigHash(s.Shape()) }

// plan is a pipeline checked for order (STREAMS.md, "The pipeline").
type plan struct {
	pre     []operator // map/filter/flatMap/keyBy before the stateful stage, in chain order
	window  *windowOp
	reducer *reduceOp
	gate    *gateOp
	post    []*mapOp
	sink    *sinkOp
	foreach *foreachOp
}

func compile(ops []operator) (*plan, error) {
	p := &plan{}
	keyed := false
	for i, op := range ops {
		bad := ""
		switch o := op.(type) {
		case *sinkOp, *foreachOp:
			if i != len(ops)-1 {
				bad = "must end the stream"
			} else if sk, ok := o.(*sinkOp); ok {
				p.sink = sk
			} else {
				p.foreach = o.(*foreachOp)
			}
		case *mapOp:
			switch {
			case p.window != nil && p.reducer == nil:
				bad = "between a window and its reduce: put it before the window"
			case p.reducer != nil || p.gate != nil:
				p.post = append(p.post, o)
			default:
				p.pre = append(p.pre, o)
			}
		case *keyByOp:
			if keyed || p.window != nil || p.reducer != nil || p.gate != nil {
				bad = "one keyBy, before any window, reduce or gate"
			}
			keyed = true
			p.pre = append(p.pre, o)
		case *windowOp:
			if p.window != nil || p.reducer != nil || p.gate != nil {
				bad = "one window, before its reduce and without a gate"
			}
			p.window = o
		case *reduceOp:
			if p.reducer != nil || p.gate != nil {
				bad = "one reduce or aggregate, without a gate"
			}
			p.reducer = o
		case *gateOp:
			if p.gate != nil || p.window != nil || p.reducer != nil {
				bad = "one gate, without window or reduce"
			}
			p.gate = o
		}
		if bad != "" {
			return nil, &PipelineError{Op: op.shape().Kind, Detail: bad}
		}
	}
	return p, nil
}

// ---- values ----

// AsFloat reads v as a number: json.Number, the float and integer types.
func AsFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil && !math.IsInf(f, 0)
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

// KeyText is a key as text, the same in every runtime: a string as it is,
// a number in ECMAScript form, anything else as JSON.
func KeyText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if f, ok := AsFloat(v); ok {
		return jsNumber(f)
	}
	b, err := marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// cloneJSON is a deep copy of the maps and slices of a JSON value.
func cloneJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = cloneJSON(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = cloneJSON(e)
		}
		return l
	}
	return v
}

// parseTime reads an event time: epoch ms, an ISO 8601 text, a time.Time.
func parseTime(v any) (int64, error) {
	if t, ok := v.(time.Time); ok {
		return t.UnixMilli(), nil
	}
	if f, ok := AsFloat(v); ok {
		return int64(math.Trunc(f)), nil
	}
	if s, ok := v.(string); ok {
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t.UnixMilli(), nil
			}
		}
	}
	return 0, fmt.Errorf("event time %v is neither epoch milliseconds, an ISO 8601 text nor a time.Time", v)
}

// isoMs is epoch ms as ISO 8601 UTC with milliseconds, as window keys carry it.
func isoMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// TokenBucketGate is a gate function: per key, capacity tokens refilled at
// refillPerSec by the cycle's clock; a message costing more than the
// tokens left is denied (cost nil: 1 each).
func TokenBucketGate(capacity, refillPerSec float64, cost func(v any) float64) (GateFunc, error) {
	if !(capacity > 0) || !(refillPerSec > 0) || math.IsInf(capacity, 0) || math.IsInf(refillPerSec, 0) {
		return nil, &PipelineError{Op: "gate", Detail: "TokenBucketGate: capacity and refillPerSec are numbers > 0"}
	}
	return func(v any, c *GateCtx) (bool, error) {
		now := float64(c.StreamTimeMs)
		tokens, ok := AsFloat(c.State["tokens"])
		if !ok {
			tokens = capacity
		}
		last, ok := AsFloat(c.State["lastRefillAt"])
		if !ok {
			last = now
		}
		tokens = math.Min(capacity, tokens+math.Max(0, now-last)/1000*refillPerSec)
		c.State["lastRefillAt"] = c.StreamTimeMs
		n := 1.0
		if cost != nil {
			if n = cost(v); !(n >= 0) {
				n = 1
			}
		}
		if tokens < n {
			c.State["tokens"] = tokens
			return false, nil
		}
		c.State["tokens"] = tokens - n
		return true, nil
	}, nil
}
