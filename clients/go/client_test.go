package queen

// The client's own tests, against real brokers (the harness in
// harness_test.go) and, for the failures a broker cannot be made to show
// on demand, a real TCP peer that never answers or answers garbage.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func hs256(secret, payload string) string {
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

func TestBearerTokenReachesAnAuthenticatedBroker(t *testing.T) {
	const secret = "go-client-test-secret-of-32-bytes!"
	b := startBroker(t, "QUEEN_AUTH=jwt", "QUEEN_JWT_SECRET="+secret, "QUEEN_JWT_DEFAULT_TENANT=1")
	defer b.stop()
	ctx := context.Background()
	ns := "go-auth-" + runToken()

	anonymous, _ := New(Options{URLs: []string{b.base}})
	_, err := anonymous.Put(ctx, ns, "k", 1, Forever)
	var qe *Error
	if !errors.As(err, &qe) || qe.Status != 401 || qe.Code != "unauthorized" || qe.Attempts != 1 {
		t.Fatalf("without a token: %v, expected a 401 unauthorized not retried", err)
	}

	// With tokens tenancy is on: the token names a tenant of its own, granted kv here (so the suite runs alone).
	const tenant = "3f6c1d2e-8a4b-4c7d-9e0f-1a2b3c4d5e6f"
	psql(t, "INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ('"+tenant+"', true) "+
		"ON CONFLICT (tenant_id) DO UPDATE SET enabled = true")
	c, _ := New(Options{URLs: []string{b.base},
		Token: hs256(secret, `{"sub":"go-client","role":"admin","tenant":"`+tenant+`"}`)})
	if _, err := c.Put(ctx, ns, "k", json.RawMessage(`12345678901234567890`), Forever); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	r, err := c.Get(ctx, ns, "k")
	if err != nil || string(r.Value) != "12345678901234567890" {
		t.Fatalf("get with the token: %v %s", err, r.Raw)
	}
	q := "go-auth-" + runToken()
	if _, err := c.Push(ctx, []PushItem{{Queue: q, Payload: "x", TransactionID: "t1"}}); err != nil {
		t.Fatal(err)
	}
	p, err := c.Pop(ctx, PopOptions{Queue: q, Wait: 5 * time.Second})
	if err != nil || p == nil || len(p.Messages) != 1 || p.Messages[0].Producer == nil ||
		*p.Messages[0].Producer != "go-client" {
		t.Fatalf("pop with the token: %v %+v", err, p)
	}
}

// silentPeer accepts connections and never answers.
func silentPeer(t *testing.T, answer string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			if answer != "" {
				go func() {
					buf := make([]byte, 4096)
					conn.Read(buf)
					conn.Write([]byte(answer))
				}()
			}
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + l.Addr().String()
}

func TestTimeoutIsTypedAndRetriedOnlyWhenSafe(t *testing.T) {
	url := silentPeer(t, "")
	c, _ := New(Options{URLs: []string{url}, Timeout: 150 * time.Millisecond, MaxAttempts: 2, Backoff: time.Millisecond})
	ctx := context.Background()
	before := c.Retries()
	_, err := c.Get(ctx, "ns", "k")
	var qe *Error
	if !errors.As(err, &qe) || qe.Status != 0 || qe.Code != "timeout" || c.Retries()-before != 1 {
		t.Fatalf("a read past its timeout: %v after %d retries, expected timeout retried once", err, c.Retries()-before)
	}
	before = c.Retries()
	_, err = c.Incr(ctx, "ns", "n", 1, Forever)
	if !errors.As(err, &qe) || qe.Code != "timeout" || c.Retries() != before {
		t.Fatalf("an incr past its timeout: %v after %d retries, expected timeout not retried", err, c.Retries()-before)
	}
}

func TestAnswerThatIsNotJSONIsBadResponse(t *testing.T) {
	url := silentPeer(t, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
	c, _ := New(Options{URLs: []string{url}, MaxAttempts: 1})
	_, err := c.Get(context.Background(), "ns", "k")
	var qe *Error
	if !errors.As(err, &qe) || qe.Code != "bad_response" || qe.Status != 200 {
		t.Fatalf("garbage: %v, expected bad_response", err)
	}
}

func TestExactlyOnceConsumerAndCleanStop(t *testing.T) {
	b := sharedBroker(t)
	c, _ := New(Options{URLs: []string{b.base}})
	defer c.Close()
	ctx := context.Background()
	q, ns := "go-eo-"+runToken(), "go-eo-"+runToken()
	var items []PushItem
	for i := 0; i < 6; i++ {
		items = append(items, PushItem{Queue: q, Payload: json.RawMessage(`{"amount":0.1}`),
			TransactionID: q + "-" + string(rune('a'+i))})
	}
	if _, err := c.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	loop, stop := context.WithCancel(ctx)
	var handled atomic.Int64
	done := make(chan error, 1)
	go func() {
		// The README's consumer: the marker and the effect commit with the ack.
		done <- c.Consume(loop, ConsumeOptions{Queue: q, Concurrency: 3, Poll: 200 * time.Millisecond},
			func(ctx context.Context, m *Message, tx *Tx) error {
				tx.KVPutIfAbsent(ns, "done/"+m.TransactionID, true, Forever, Required())
				tx.KVIncr(ns, "total", 0.1, Forever)
				if handled.Add(1) == 6 {
					stop()
				}
				return nil
			})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		stop()
		t.Fatal("the consume loop did not stop")
	}
	total, err := c.Get(ctx, ns, "total")
	if err != nil || string(total.Value) != "0.6" {
		t.Fatalf("the effect: %v %s, expected 0.6 (six messages once each)", err, total.Raw)
	}
	if p, err := c.Pop(ctx, PopOptions{Queue: q}); err != nil || p != nil {
		t.Fatalf("after the loop: %v %+v, expected nothing left", err, p)
	}
	// A loop stopped with nothing to do returns within its poll.
	idle, stopIdle := context.WithCancel(ctx)
	go func() { time.Sleep(100 * time.Millisecond); stopIdle() }()
	if err := c.Consume(idle, ConsumeOptions{Queue: q, Poll: 200 * time.Millisecond},
		func(context.Context, *Message, *Tx) error { return nil }); err != nil {
		t.Fatalf("an idle stop: %v", err)
	}
}

func TestConsumeReturnsTheRefusalOfItsPop(t *testing.T) {
	b := sharedBroker(t)
	c, _ := New(Options{URLs: []string{b.base}})
	err := c.Consume(context.Background(), ConsumeOptions{Queue: "bad queue name/\x01"},
		func(context.Context, *Message, *Tx) error { return nil })
	if StatusOf(err) < 400 || StatusOf(err) >= 500 {
		t.Fatalf("a refused pop: %v, expected the 4xx", err)
	}
}

func TestCallsShareOneKeepAliveConnection(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"op":"get","key":"k","found":false}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, _ := New(Options{URLs: []string{srv.URL}})
	for i := 0; i < 5; i++ {
		if r, err := c.Get(context.Background(), "ns", "k"); err != nil || r.Found {
			t.Fatalf("get: %v", err)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("five calls opened %d connections, expected one", n)
	}
}
