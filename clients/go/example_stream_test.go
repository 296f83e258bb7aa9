package queen_test

import (
	"context"
	"errors"
	"os"
	"os/signal"

	queen "github.com/queen-broker/queen/clients/go"
)

// The README's stream: per customer, the count and sum of each minute's orders.
func ExampleFrom() {
	c, _ := queen.New(queen.Options{URLs: []string{"http://127.0.0.1:6632"}})
	pipe := queen.From("orders").
		KeyBy(func(v any) (any, error) { return v.(map[string]any)["customer"], nil }).
		WindowTumbling(60, queen.WindowOptions{EventTime: func(v any) (any, error) { return v.(map[string]any)["ts"], nil }}).
		Aggregate(queen.Field{Name: "count", Of: func(v any) (any, error) { return 1, nil }},
			queen.Field{Name: "sum", Of: func(v any) (any, error) { return v.(map[string]any)["amount"], nil }}).
		Map(func(acc any, c queen.Ctx) (any, error) {
			return map[string]any{"customer": c.Key, "start": c.WindowStart, "totals": acc}, nil
		}).
		To("order-totals")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	stats, err := pipe.Run(ctx, c, "orders.per_min", queen.WorkerOptions{Batch: 100})
	if errors.Is(err, queen.ErrConfigMismatch) {
		// another pipeline holds the name: WorkerOptions{Reset: true} replaces it
	}
	_ = stats
}
