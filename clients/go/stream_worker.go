// The streams worker: pop a batch from one source partition under a lease,
// run it against that partition's state, commit the state changes, the sink
// pushes and the batch's ack in one POST /streams/v1/cycle (clients/STREAMS.md,
// "The worker cycle"). The worker keeps no state of its own between cycles,
// so one stopped anywhere resumes from what the broker committed.

package queen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	stateSep     = "\u001f"
	watermarkKey = "__wm__"
)

// ErrConfigMismatch is matched (errors.Is) by the *Error of a registration
// refused because the name holds another pipeline (409
// streams_config_mismatch); WorkerOptions.Reset replaces it instead.
var ErrConfigMismatch = errors.New("queen: streams_config_mismatch")

// ErrLeaseLost is matched (errors.Is) by the *Error of a cycle refused
// because its lease ended before the commit (409 streams_lease_lost):
// nothing of it was written.
var ErrLeaseLost = errors.New("queen: streams_lease_lost")

// WorkerOptions configure a stream worker. Zero fields take the defaults.
type WorkerOptions struct {
	Batch        int           // messages per pop; 0: 100
	Group        string        // consumer group; "": streams.<name>
	LeaseSeconds int           // the source lease (a gate's denied tail waits that long); 0: the queue's
	Wait         time.Duration // a pop's long poll; 0: 1s
	// Reset consents to deleting the state of a query registered under the
	// name with another pipeline; without it that is ErrConfigMismatch.
	Reset bool
	Clock func() time.Time // the gate's clock; nil: time.Now
	// ErrorBackoff is Run's wait after a failed pop or cycle; 0: 500ms.
	ErrorBackoff time.Duration
}

// WorkerStats count what a worker's committed cycles did (LeaseLost and
// Errors: the cycles that did not commit).
type WorkerStats struct {
	Cycles    int // committed cycles
	Messages  int // source messages acked
	Pushed    int // sink pushes
	StateOps  int
	Late      int // values dropped as late
	Denied    int // messages a gate stopped (popped again later)
	LeaseLost int // cycles refused with streams_lease_lost
	Errors    int // pops and cycles that failed otherwise
}

// Worker runs a Stream as the query name. Its methods are safe to call
// from several goroutines, but one worker runs one cycle at a time.
type Worker struct {
	stream *Stream
	c      *Client
	name   string
	plan   *plan
	hash   string
	o      WorkerOptions

	mu         sync.Mutex
	cycleMu    sync.Mutex // one cycle at a time
	queryID    string
	partitions map[string]string // source partition name -> id, for those a cycle ran on
	stats      WorkerStats
}

// Worker makes a worker running s as the query name (its durable identity).
func (s *Stream) Worker(c *Client, name string, o WorkerOptions) (*Worker, error) {
	if s.err != nil {
		return nil, s.err
	}
	if c == nil || name == "" {
		return nil, &PipelineError{Op: "worker", Detail: "a stream worker needs a client and a query name"}
	}
	p, err := compile(s.ops)
	if err != nil {
		return nil, err
	}
	if p.window != nil && p.reducer == nil {
		return nil, &PipelineError{Op: p.window.s.Kind, Detail: "a window needs a reduce or aggregate after it"}
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Group == "" {
		o.Group = "streams." + name
	}
	if o.Wait <= 0 {
		o.Wait = time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.ErrorBackoff <= 0 {
		o.ErrorBackoff = 500 * time.Millisecond
	}
	return &Worker{stream: s, c: c, name: name, plan: p, hash: s.ConfigHash(), o: o,
		partitions: map[string]string{}}, nil
}

// Run runs s as the query name until ctx ends (then it returns nil); see Worker.Run.
func (s *Stream) Run(ctx context.Context, c *Client, name string, o WorkerOptions) (WorkerStats, error) {
	w, err := s.Worker(c, name, o)
	if err != nil {
		return WorkerStats{}, err
	}
	err = w.Run(ctx)
	return w.Stats(), err
}

// Group is the consumer group the worker pops under.
func (w *Worker) Group() string { return w.o.Group }

// QueryID is the registered query's id ("" before Register).
func (w *Worker) QueryID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queryID
}

// Stats is a copy of the worker's counters.
func (w *Worker) Stats() WorkerStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Register registers (or resumes) the query; the first Step does it when
// not done. Another pipeline under the name is ErrConfigMismatch.
func (w *Worker) Register(ctx context.Context) (StreamsRegistration, error) {
	q := StreamsQuery{Name: w.name, SourceQueue: w.stream.source, ConfigHash: w.hash, Reset: w.o.Reset}
	if w.plan.sink != nil {
		q.SinkQueue = w.plan.sink.queue
	}
	r, err := w.c.StreamsRegister(ctx, q)
	if err != nil {
		return r, err
	}
	w.mu.Lock()
	w.queryID = r.QueryID
	w.mu.Unlock()
	return r, nil
}

// Run cycles until ctx ends and then returns nil. It returns at once the
// registration's error (ErrConfigMismatch among them), a pipeline
// function's (*FuncError) and a pop refused with a 4xx; a cycle refused
// for a lost lease is dropped (its batch comes back), and other failures
// are counted and waited out, the batch left to its lease.
func (w *Worker) Run(ctx context.Context) error {
	if w.QueryID() == "" {
		if _, err := w.Register(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	for ctx.Err() == nil {
		_, err := w.step(ctx)
		if err == nil || ctx.Err() != nil {
			continue
		}
		var fe *FuncError
		var pe *popError
		if errors.As(err, &fe) {
			return err
		}
		if errors.As(err, &pe) {
			if s := StatusOf(err); s >= 400 && s < 500 && s != 408 && s != 429 {
				return pe.err
			}
		}
		w.mu.Lock()
		w.stats.Errors++
		w.mu.Unlock()
		t := time.NewTimer(w.o.ErrorBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return nil
}

// Drain cycles until a pop finds nothing (tests, batch jobs).
func (w *Worker) Drain(ctx context.Context) error {
	for {
		n, err := w.Step(ctx)
		if err != nil || n == 0 {
			return err
		}
	}
}

// popError marks a failed pop for Run.
type popError struct{ err error }

func (e *popError) Error() string { return e.err.Error() }
func (e *popError) Unwrap() error { return e.err }

// Step pops one batch and commits its cycle; it returns the messages
// popped (0: none came). A cycle refused for a lost lease is no error
// (Stats().LeaseLost counts it).
func (w *Worker) Step(ctx context.Context) (int, error) {
	n, err := w.step(ctx)
	var pe *popError
	if errors.As(err, &pe) {
		err = pe.err
	}
	return n, err
}

// step is Step, a failed pop marked as a *popError for Run.
func (w *Worker) step(ctx context.Context) (int, error) {
	w.cycleMu.Lock()
	defer w.cycleMu.Unlock()
	if w.QueryID() == "" {
		if _, err := w.Register(ctx); err != nil {
			return 0, err
		}
	}
	res, err := w.c.Pop(ctx, PopOptions{Queue: w.stream.source, Group: w.o.Group, Batch: w.o.Batch,
		LeaseSeconds: w.o.LeaseSeconds, Wait: w.o.Wait})
	if err != nil {
		return 0, &popError{err}
	}
	if res == nil || len(res.Messages) == 0 {
		return 0, nil
	}
	msgs := res.Messages
	pid := res.PartitionID
	if pid == "" {
		pid = msgs[0].PartitionID
	}
	lease := res.LeaseID
	if lease == "" {
		lease = msgs[0].LeaseID
	}
	rows := map[string]any{}
	if w.plan.reducer != nil || w.plan.gate != nil {
		if rows, err = w.readState(ctx, pid); err != nil {
			return len(msgs), err
		}
	}
	w.mu.Lock()
	w.partitions[msgs[0].Partition] = pid
	w.mu.Unlock()
	cy, err := w.compute(msgs, pid, msgs[0].Partition, lease, rows)
	if err != nil || cy == nil {
		return len(msgs), err
	}
	if _, err := w.c.StreamsCycle(ctx, cy.req); err != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		// Another worker may hold the batch now (or this cycle committed and
		// its answer was lost): nothing of this work was written; the next
		// pop starts from the committed cursor.
		if errors.Is(err, ErrLeaseLost) {
			w.stats.LeaseLost++
			return len(msgs), nil
		}
		return len(msgs), err
	}
	w.mu.Lock()
	w.stats.Cycles++
	w.stats.Messages += cy.req.Ack.Count
	w.stats.Denied += len(msgs) - cy.req.Ack.Count
	w.stats.Pushed += len(cy.req.PushItems)
	w.stats.StateOps += len(cy.req.StateOps)
	w.stats.Late += cy.late
	w.mu.Unlock()
	return len(msgs), nil
}

// State is the committed state of a source partition (by name) this worker
// has run a cycle on: key -> value, numbers as json.Number.
func (w *Worker) State(ctx context.Context, partition string) (map[string]any, error) {
	w.mu.Lock()
	pid, ok := w.partitions[partition]
	w.mu.Unlock()
	if !ok {
		return nil, ownError("bad_argument", "no cycle has run on partition "+partition, 0)
	}
	return w.readState(ctx, pid)
}

func (w *Worker) readState(ctx context.Context, pid string) (map[string]any, error) {
	rows, err := w.c.StreamsStateGet(ctx, StreamsStateQuery{QueryID: w.QueryID(), PartitionID: pid})
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(rows))
	for _, r := range rows {
		v, err := decodeValue(r.Value)
		if err != nil {
			return nil, err
		}
		out[r.Key] = v
	}
	return out, nil
}

// decodeValue reads JSON text keeping numbers' text (json.Number); empty is null.
func decodeValue(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, &Error{Kind: KindTransport, Code: "bad_response", Reason: "bad_response",
			Detail: "a value is not JSON: " + err.Error()}
	}
	return v, nil
}

// shard is one partition's state, read once per cycle and written as ops.
type shard struct {
	loaded  map[string]any
	live    map[string]any
	touched []string
	seen    map[string]bool
}

func newShard(rows map[string]any) *shard {
	live := make(map[string]any, len(rows))
	for k, v := range rows {
		live[k] = v
	}
	return &shard{loaded: rows, live: live, seen: map[string]bool{}}
}

func (s *shard) touch(k string) {
	if !s.seen[k] {
		s.seen[k] = true
		s.touched = append(s.touched, k)
	}
}
func (s *shard) put(k string, v any) { s.live[k] = v; s.touch(k) }
func (s *shard) del(k string)        { delete(s.live, k); s.touch(k) }

func (s *shard) ops() ([]StreamsStateOp, error) {
	var out []StreamsStateOp
	for _, k := range s.touched {
		if v, ok := s.live[k]; ok {
			b, err := marshal(v)
			if err != nil {
				return nil, err
			}
			out = append(out, StreamsStateOp{Type: "upsert", Key: k, Value: b})
		} else if _, was := s.loaded[k]; was {
			out = append(out, StreamsStateOp{Type: "delete", Key: k})
		}
	}
	return out, nil
}

// env is a value on its way: the source message it came from, its key, the value.
type env struct {
	i   int
	key string
	v   any
}

// emitted is a value out of the stateful stage, with its context.
type emitted struct {
	v any
	c Ctx
}

type cycle struct {
	req  StreamsCycleRequest
	late int
}

func asObj(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok
}

func num(v any) float64 { f, _ := AsFloat(v); return f }

// compute is the cycle of one batch given its partition's state (no I/O);
// nil when nothing is to be committed (a gate denied the first message).
func (w *Worker) compute(msgs []Message, pid, pname, lease string, rows map[string]any) (*cycle, error) {
	p := w.plan
	sh := newShard(rows)
	base := Ctx{Partition: pname, PartitionID: pid}
	envs := make([]env, 0, len(msgs))
	for i := range msgs {
		v, err := decodeValue(msgs[i].Data)
		if err != nil {
			return nil, err
		}
		envs = append(envs, env{i, pname, v})
	}
	// Through the operators before the stateful stage, in chain order.
	for _, op := range p.pre {
		next := make([]env, 0, len(envs))
		for _, e := range envs {
			if kb, ok := op.(*keyByOp); ok {
				k, err := call("keyBy", func() (any, error) { return kb.fn(e.v) })
				if err != nil {
					return nil, err
				}
				next = append(next, env{e.i, KeyText(k), e.v})
				continue
			}
			c := base
			c.Key = e.key
			outs, err := op.(*mapOp).apply(e.v, c)
			if err != nil {
				return nil, err
			}
			for _, o := range outs {
				next = append(next, env{e.i, e.key, o})
			}
		}
		envs = next
	}
	cy := &cycle{}
	allowed := len(msgs)
	var emits []emitted
	var err error
	switch {
	case p.gate != nil:
		emits, allowed, err = w.runGate(p.gate, envs, len(msgs), sh, base)
	case p.window != nil:
		emits, cy.late, err = w.runWindow(p.window, p.reducer, envs, msgs, sh, base)
	case p.reducer != nil:
		for _, e := range envs {
			sk := p.reducer.kind + stateSep + e.key
			var acc any
			if row, ok := asObj(sh.live[sk]); ok {
				acc = row["acc"]
			} else {
				acc = p.reducer.start()
			}
			if acc, err = p.reducer.step(acc, e.v); err != nil {
				return nil, err
			}
			sh.put(sk, map[string]any{"acc": acc})
			c := base
			c.Key = e.key
			emits = append(emits, emitted{p.reducer.result(acc), c})
		}
	default:
		for _, e := range envs {
			c := base
			c.Key = e.key
			emits = append(emits, emitted{e.v, c})
		}
	}
	if err != nil {
		return nil, err
	}
	for _, op := range p.post {
		next := make([]emitted, 0, len(emits))
		for _, e := range emits {
			outs, err := op.apply(e.v, e.c)
			if err != nil {
				return nil, err
			}
			for _, o := range outs {
				next = append(next, emitted{o, e.c})
			}
		}
		emits = next
	}
	if allowed == 0 {
		// The first message was denied: nothing to commit; the batch stays
		// leased until its lease ends and comes back in order.
		w.mu.Lock()
		w.stats.Denied += len(msgs)
		w.mu.Unlock()
		return nil, nil
	}
	if p.foreach != nil {
		for _, e := range emits {
			if _, err := call("foreach", func() (struct{}, error) { return struct{}{}, p.foreach.fn(e.v, e.c) }); err != nil {
				return nil, err
			}
		}
	}
	if p.sink != nil {
		for _, e := range emits {
			part := pname
			if p.sink.by != nil {
				k, err := call("sink", func() (any, error) { return p.sink.by(e.v) })
				if err != nil {
					return nil, err
				}
				part = KeyText(k)
			} else if p.sink.partition != "" {
				part = p.sink.partition
			}
			b, err := marshal(e.v)
			if err != nil {
				return nil, &FuncError{Op: "sink", Err: err}
			}
			cy.req.PushItems = append(cy.req.PushItems, PushItem{Queue: p.sink.queue, Partition: part,
				Payload: json.RawMessage(b)})
		}
	}
	if cy.req.StateOps, err = sh.ops(); err != nil {
		return nil, &FuncError{Op: "state", Err: err}
	}
	// A gate's denied tail stays leased to this worker (not popped again at
	// once, in a busy loop); a whole batch ends its lease with the ack anyway.
	release := allowed == len(msgs)
	cy.req.QueryID, cy.req.PartitionID, cy.req.ConsumerGroup = w.QueryID(), pid, w.o.Group
	cy.req.Ack = &StreamsAck{TransactionID: msgs[allowed-1].TransactionID, LeaseID: lease, Status: "completed",
		Count: allowed}
	cy.req.ReleaseLease = &release
	return cy, nil
}

func (w *Worker) runWindow(win *windowOp, red *reduceOp, envs []env, msgs []Message, sh *shard,
	base Ctx) ([]emitted, int, error) {
	var out []emitted
	late := 0
	var wm int64
	hasWM := false
	if row, ok := asObj(sh.live[watermarkKey]); ok {
		wm, hasWM = int64(num(row["eventTimeMs"])), true
	}
	for _, e := range envs {
		ts, err := w.timeOf(win, e.v, &msgs[e.i])
		if err != nil {
			return nil, 0, err
		}
		if win.session {
			ok, err := w.sessionAdd(win, red, sh, e.key, e.v, ts, wm, hasWM, &out, base)
			if err != nil {
				return nil, 0, err
			}
			if !ok {
				late++
			}
		} else {
			for _, se := range win.assign(ts) {
				if hasWM && se[1]+win.graceMs <= wm {
					late++ // its window closed already
					continue
				}
				sk := win.tag + stateSep + isoMs(se[0]) + stateSep + e.key
				var acc any
				if row, ok := asObj(sh.live[sk]); ok {
					acc = row["acc"]
				} else {
					acc = red.start()
				}
				if acc, err = red.step(acc, e.v); err != nil {
					return nil, 0, err
				}
				sh.put(sk, map[string]any{"acc": acc, "windowStart": se[0], "windowEnd": se[1]})
			}
		}
		if mark := ts - win.latenessMs; !hasWM || mark > wm {
			wm, hasWM = mark, true
			sh.put(watermarkKey, map[string]any{"eventTimeMs": wm})
			out = append(out, w.closeWindows(win, red, sh, wm, base)...)
		}
	}
	return out, late, nil
}

func (w *Worker) timeOf(win *windowOp, v any, m *Message) (int64, error) {
	if win.eventTime != nil {
		t, err := call("eventTime", func() (any, error) { return win.eventTime(v) })
		if err != nil {
			return 0, err
		}
		ts, err := parseTime(t)
		if err != nil {
			return 0, &FuncError{Op: "eventTime", Err: err}
		}
		return ts, nil
	}
	var raw struct {
		CreatedAt any `json:"createdAt"`
	}
	_ = json.Unmarshal(m.Raw, &raw)
	ts, err := parseTime(raw.CreatedAt)
	if err != nil {
		return 0, &FuncError{Op: "createdAt", Err: err}
	}
	return ts, nil
}

func windowCtx(base Ctx, key string, start, end int64) Ctx {
	c := base
	c.Key, c.HasWindow, c.WindowStart, c.WindowEnd, c.WindowKey = key, true, start, end, isoMs(start)
	return c
}

// closeWindows emits and deletes every window of the partition whose end
// plus the grace period the watermark has reached, in order of (start, key).
func (w *Worker) closeWindows(win *windowOp, red *reduceOp, sh *shard, wm int64, base Ctx) []emitted {
	type ripe struct {
		start, end int64
		key, sk    string
		acc        any
	}
	var rs []ripe
	prefix := win.tag + stateSep
	for sk, v := range sh.live {
		row, ok := asObj(v)
		if !strings.HasPrefix(sk, prefix) || !ok {
			continue
		}
		var start, end int64
		if win.session {
			start, end = int64(num(row["sessionStart"])), int64(num(row["lastEventTime"]))+win.gapMs
		} else {
			start, end = int64(num(row["windowStart"])), int64(num(row["windowEnd"]))
		}
		if end+win.graceMs <= wm {
			rs = append(rs, ripe{start, end, sk[strings.LastIndex(sk, stateSep)+len(stateSep):], sk, row["acc"]})
		}
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].start != rs[j].start {
			return rs[i].start < rs[j].start
		}
		return rs[i].key < rs[j].key
	})
	out := make([]emitted, 0, len(rs))
	for _, r := range rs {
		sh.del(r.sk)
		out = append(out, emitted{red.result(r.acc), windowCtx(base, r.key, r.start, r.end)})
	}
	return out
}

// sessionAdd folds one value into its key's session; false when it is late.
func (w *Worker) sessionAdd(win *windowOp, red *reduceOp, sh *shard, key string, v any, ts, wm int64, hasWM bool,
	out *[]emitted, base Ctx) (bool, error) {
	sk := win.tag + stateSep + "open" + stateSep + key
	row, open := asObj(sh.live[sk])
	if open && ts > int64(num(row["lastEventTime"]))+win.gapMs {
		// The gap has passed: that session ends, this value starts the next.
		start, end := int64(num(row["sessionStart"])), int64(num(row["lastEventTime"]))+win.gapMs
		*out = append(*out, emitted{red.result(row["acc"]), windowCtx(base, key, start, end)})
		sh.del(sk)
		open = false
	}
	start, last := ts, ts
	acc := red.start()
	if open {
		acc = row["acc"]
		if s := int64(num(row["sessionStart"])); s < start {
			start = s
		}
		if l := int64(num(row["lastEventTime"])); l > last {
			last = l
		}
	} else if hasWM && ts+win.gapMs+win.graceMs <= wm {
		return false, nil // a session of this value alone would have closed
	}
	acc, err := red.step(acc, v)
	if err != nil {
		return false, err
	}
	sh.put(sk, map[string]any{"acc": acc, "sessionStart": start, "lastEventTime": last})
	return true, nil
}

// runGate passes source messages in order while the gate allows them; it
// returns the values passed and how many messages were.
func (w *Worker) runGate(g *gateOp, envs []env, n int, sh *shard, base Ctx) ([]emitted, int, error) {
	now := w.o.Clock().UnixMilli()
	var out []emitted
	for i := 0; i < len(envs); {
		// One source message's values pass together or not at all: the ack is per message.
		idx := envs[i].i
		j := i
		for j < len(envs) && envs[j].i == idx {
			j++
		}
		staged := map[string]map[string]any{}
		var order []string
		for _, e := range envs[i:j] {
			sk := "gate" + stateSep + e.key
			prev, ok := staged[sk]
			if !ok {
				prev, _ = asObj(sh.live[sk])
			}
			st, _ := cloneJSON(prev).(map[string]any)
			if st == nil {
				st = map[string]any{}
			}
			gc := &GateCtx{State: st, StreamTimeMs: now, Key: e.key, Partition: base.Partition,
				PartitionID: base.PartitionID}
			ok, err := call("gate", func() (bool, error) { return g.fn(e.v, gc) })
			if err != nil {
				return nil, 0, err
			}
			if !ok {
				return out, idx, nil // denied: its state changes go with it; the messages before it pass
			}
			if gc.State == nil {
				gc.State = map[string]any{}
			}
			if _, seen := staged[sk]; !seen {
				order = append(order, sk)
			}
			staged[sk] = gc.State
		}
		for _, sk := range order {
			sh.put(sk, staged[sk])
		}
		for _, e := range envs[i:j] {
			c := base
			c.Key = e.key
			out = append(out, emitted{e.v, c})
		}
		i = j
	}
	return out, n, nil
}
