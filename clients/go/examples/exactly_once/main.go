// exactly_once: a consumer whose effect happens once per message. Each
// handled message adds a marker and a running total to the transaction
// that acks it, so a redelivery finds the marker and rolls back whole.
//
//	QUEEN_URL=http://127.0.0.1:6632 go run ./examples/exactly_once orders
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"

	queen "github.com/queen-broker/queen/clients/go"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: exactly_once QUEUE   (QUEEN_URL, QUEEN_TOKEN from the environment)")
		os.Exit(2)
	}
	queue := os.Args[1]
	urls := strings.Split(os.Getenv("QUEEN_URL"), ",")
	c, err := queen.New(queen.Options{URLs: urls, Token: os.Getenv("QUEEN_TOKEN")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Ctrl-C stops cleanly: handlers in flight finish and settle.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err = c.Consume(ctx, queen.ConsumeOptions{Queue: queue, Concurrency: 4},
		func(ctx context.Context, m *queen.Message, tx *queen.Tx) error {
			var order struct {
				Amount float64 `json:"amount"` // sent as its shortest text: 0.1 goes as 0.1
			}
			if err := json.Unmarshal(m.Data, &order); err != nil {
				return err // failed: the broker delivers it again (then dead-letters it)
			}
			// A redelivery finds the marker: the whole transaction rolls back and nothing counts twice.
			tx.KVPutIfAbsent("orders", "done/"+m.TransactionID, true, queen.Forever, queen.Required())
			tx.KVIncr("orders", "total", order.Amount, queen.Forever)
			fmt.Printf("%s: %v\n", m.TransactionID, order.Amount)
			return nil
		})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
