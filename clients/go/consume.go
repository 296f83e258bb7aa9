package queen

import (
	"context"
	"sync"
	"time"
)

// ConsumeOptions choose what a consume loop pops and how.
type ConsumeOptions struct {
	Queue        string
	Partition    string        // "": any
	Group        string        // consumer group; "": the queue mode
	Concurrency  int           // handlers at once; 0: 1
	Batch        int           // messages per pop; 0: 1
	LeaseSeconds int           // per pop and per renewal; 0: 30
	Poll         time.Duration // one long poll, and so the longest a stop waits for it; 0: 1s
}

// Handler handles one message. Whatever it adds to tx (pushes, kv ops)
// commits in one transaction together with the message's ack, so the
// effect happens once. A non-nil error settles the message as failed and
// the broker delivers it again.
type Handler func(ctx context.Context, m *Message, tx *Tx) error

// Consume pops with Concurrency workers and runs h once per message,
// renewing its lease every third of LeaseSeconds while h runs. A
// transaction that rolls back (a lost marker, a lease gone) fails the
// message like an error from h.
//
// Clean stop: when ctx is done, workers pop no more, handlers in flight
// finish and settle, and Consume returns nil. It returns the error when the
// broker refuses the pop itself (a 4xx); unavailability is waited out.
func (c *Client) Consume(ctx context.Context, o ConsumeOptions, h Handler) error {
	n := o.Concurrency
	if n <= 0 {
		n = 1
	}
	if o.Batch <= 0 {
		o.Batch = 1
	}
	if o.LeaseSeconds <= 0 {
		o.LeaseSeconds = 30
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	// Pops, renewals and settlements outlive a stop: what was popped is ours
	// to finish. They keep the tenant of ctx.
	work := context.Background()
	if t := tenantOf(ctx); t != "" {
		work = WithTenant(work, t)
	}
	var (
		mu       sync.Mutex
		fatal    error
		finished sync.WaitGroup
	)
	stopped := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if fatal != nil {
			return true
		}
		select {
		case <-ctx.Done():
			return true
		default:
			return false
		}
	}
	for i := 0; i < n; i++ {
		finished.Add(1)
		go func() {
			defer finished.Done()
			idle := 50 * time.Millisecond
			for !stopped() {
				p, err := c.Pop(work, PopOptions{Queue: o.Queue, Partition: o.Partition, Group: o.Group,
					Batch: o.Batch, LeaseSeconds: o.LeaseSeconds, Wait: o.Poll})
				if err != nil {
					if s := StatusOf(err); s >= 400 && s < 500 && s != 408 && s != 429 {
						mu.Lock()
						if fatal == nil {
							fatal = err
						}
						mu.Unlock()
						return
					}
					// Unavailable: wait and pop again, longer each time, up to 2 s.
					select {
					case <-ctx.Done():
					case <-time.After(idle):
					}
					if idle *= 2; idle > 2*time.Second {
						idle = 2 * time.Second
					}
					continue
				}
				idle = 50 * time.Millisecond
				if p == nil {
					continue
				}
				for i := range p.Messages {
					c.handleOne(ctx, work, o, &p.Messages[i], h)
				}
			}
		}()
	}
	finished.Wait()
	return fatal
}

func (c *Client) handleOne(ctx, work context.Context, o ConsumeOptions, m *Message, h Handler) {
	if m.TransactionID == "" || m.PartitionID == "" {
		return // not a message this loop can settle; its lease runs out
	}
	renewing := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		period := time.Duration(o.LeaseSeconds) * time.Second / 3
		if period < 100*time.Millisecond {
			period = 100 * time.Millisecond
		}
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-renewing:
				return
			case <-tick.C:
				c.LeaseExtend(work, m.LeaseID, o.LeaseSeconds)
			}
		}
	}()
	tx := NewTx().Ack(AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID,
		ConsumerGroup: o.Group})
	err := safeHandle(ctx, h, m, tx)
	close(renewing)
	<-renewed
	settled := false
	if err == nil {
		if r, err := c.Commit(work, tx); err == nil && r.Success {
			settled = true
		}
	}
	if !settled {
		// Best effort: if it is lost, the lease expires and the message comes back anyway.
		c.Ack(work, []AckItem{{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID,
			Status: "failed", Error: "handler failed"}}, o.Group)
	}
}

// safeHandle turns a handler's panic into a failed message.
func safeHandle(ctx context.Context, h Handler, m *Message, tx *Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Code: "handler_panic", Reason: "handler_panic", Detail: "the handler panicked"}
		}
	}()
	return h(ctx, m, tx)
}
