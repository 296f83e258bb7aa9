// Package queen is the Go client of the Queen broker: KV with explicit
// expiry and compare-and-set, batches and prefix paging, push, pop, ack and
// lease renewal, a consume loop and the transaction builder (ack + push +
// kv in one commit), over HTTP to one or more brokers.
//
// The client validates nothing the broker validates: it shapes each call,
// sends it, and hands back what the broker answered. Values and payloads
// travel as JSON text (json.RawMessage, or values decoded with UseNumber),
// so 0.1 and 12345678901234567890 come back exactly as they went.
//
// Retries follow the conformance contract (clients/conformance/README.md):
// a call that got no connection is retried whatever it is; a 429, a 503, a
// timeout or a broken connection only when a repeat cannot apply twice.
package queen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Client. Zero fields take the defaults shown.
type Options struct {
	URLs           []string      // broker base URLs, tried in order for failover (at least one)
	Token          string        // sent as Authorization: Bearer; "": none
	MaxAttempts    int           // attempts per call, the first included; 0: 3
	Backoff        time.Duration // base of the jittered exponential backoff; 0: 50ms
	MaxBackoff     time.Duration // cap of one wait, Retry-After included; 0: 5s
	Timeout        time.Duration // one attempt (a long poll adds its wait); 0: 30s
	ConnectTimeout time.Duration // 0: 3s
	// OnRetry, when set, is called before every retry with the attempt that
	// failed (1 for the first), its error and the wait before the next.
	OnRetry func(attempt int, err error, wait time.Duration)
}

// Client is safe for use by many goroutines; connections are kept alive
// and reused.
type Client struct {
	urls        []string
	token       string
	maxAttempts int
	backoff     time.Duration
	maxBackoff  time.Duration
	timeout     time.Duration
	onRetry     func(attempt int, err error, wait time.Duration)
	http        *http.Client
	current     atomic.Int64 // index of the URL that answered last
	retries     atomic.Int64
	rngMu       sync.Mutex
	rng         *rand.Rand
}

// New makes a client; it connects on the first call.
// With no URLs it reads QUEEN_URL (a comma-separated list), as every Queen
// client does.
func New(o Options) (*Client, error) {
	if len(o.URLs) == 0 {
		for _, u := range strings.Split(os.Getenv("QUEEN_URL"), ",") {
			if u = strings.TrimSpace(u); u != "" {
				o.URLs = append(o.URLs, u)
			}
		}
	}
	if len(o.URLs) == 0 {
		return nil, ownError("bad_argument", "no broker URL given (Options.URLs, or QUEEN_URL)", 0)
	}
	c := &Client{token: o.Token, maxAttempts: o.MaxAttempts, backoff: o.Backoff, maxBackoff: o.MaxBackoff,
		timeout: o.Timeout, onRetry: o.OnRetry, rng: rand.New(rand.NewSource(time.Now().UnixNano()))}
	for _, u := range o.URLs {
		c.urls = append(c.urls, strings.TrimRight(u, "/")) // paths bring their own '/'
	}
	if c.maxAttempts <= 0 {
		c.maxAttempts = 3
	}
	if c.backoff <= 0 {
		c.backoff = 50 * time.Millisecond
	}
	if c.maxBackoff <= 0 {
		c.maxBackoff = 5 * time.Second
	}
	if c.timeout <= 0 {
		c.timeout = 30 * time.Second
	}
	connect := o.ConnectTimeout
	if connect <= 0 {
		connect = 3 * time.Second
	}
	dialer := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	c.http = &http.Client{Transport: &http.Transport{
		DialContext:         dialer.DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     60 * time.Second,
	}}
	return c, nil
}

// Close drops the idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Retries is the number of attempts made beyond the first, by every call of
// this client so far (for tests and metrics).
func (c *Client) Retries() int64 { return c.retries.Load() }

type tenantKey struct{}

// WithTenant makes every call made with the returned context send tenant
// (a uuid) as the x-queen-tenant header, for a broker behind a proxy with
// tenancy on.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

func tenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

type request struct {
	method string
	path   string
	body   []byte // nil: none
	safe   bool   // a repeat cannot apply twice: retried on 429, 503, timeouts, broken connections
	extra  time.Duration
}

type reply struct {
	status int
	body   []byte
}

// backoffFor is a random wait in [d/2, d], d the base doubled per attempt,
// so clients retrying together spread out.
func (c *Client) backoffFor(attempt int) time.Duration {
	d := c.backoff
	for i := 1; i < attempt && d < c.maxBackoff; i++ {
		d *= 2
	}
	if d > c.maxBackoff {
		d = c.maxBackoff
	}
	c.rngMu.Lock()
	j := time.Duration(c.rng.Int63n(int64(d/2) + 1))
	c.rngMu.Unlock()
	return d/2 + j
}

func noConnection(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (c *Client) do(ctx context.Context, rq request) (*reply, error) {
	urlIndex := int(c.current.Load()) % len(c.urls)
	tenant := tenantOf(ctx)
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			c.retries.Add(1)
		}
		rep, failure, retryable, nextURL := c.attempt(ctx, rq, c.urls[urlIndex], tenant, attempt)
		if failure == nil {
			c.current.Store(int64(urlIndex))
			return rep, nil
		}
		if failure.Status != 0 {
			c.current.Store(int64(urlIndex))
		}
		if ctx.Err() != nil {
			failure.cause = ctx.Err() // errors.Is(err, context.DeadlineExceeded) holds
			return nil, failure
		}
		if !retryable || attempt >= c.maxAttempts {
			return nil, failure
		}
		wait := c.backoffFor(attempt)
		if ra := time.Duration(failure.RetryAfter) * time.Second; ra > wait {
			wait = ra
		}
		if wait > c.maxBackoff {
			wait = c.maxBackoff
		}
		if nextURL {
			urlIndex = (urlIndex + 1) % len(c.urls)
		}
		if c.onRetry != nil {
			c.onRetry(attempt, failure, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			failure.cause = ctx.Err()
			return nil, failure
		case <-t.C:
		}
	}
}

// attempt makes one HTTP exchange. It returns the 2xx reply, or the
// failure with whether it may be retried and whether on the next URL.
func (c *Client) attempt(ctx context.Context, rq request, base, tenant string, n int) (*reply, *Error, bool, bool) {
	actx, cancel := context.WithTimeout(ctx, c.timeout+rq.extra)
	defer cancel()
	var body io.Reader
	if rq.body != nil {
		body = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequestWithContext(actx, rq.method, base+rq.path, body)
	if err != nil {
		return nil, ownError("bad_request", err.Error(), n), false, false
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if tenant != "" {
		req.Header.Set("x-queen-tenant", tenant)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if noConnection(err) {
			// Nothing was sent without a connection: any call may go again.
			e := ownError("unreachable", base+": "+err.Error(), n)
			e.cause = err
			return nil, e, true, true
		}
		code := "transport"
		if actx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			code = "timeout"
		}
		e := ownError(code, base+": "+err.Error(), n)
		e.cause = err // an attempt's own deadline unwraps to context.DeadlineExceeded too
		return nil, e, rq.safe, true
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		code := "transport"
		if actx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			code = "timeout"
		}
		return nil, ownError(code, base+": "+err.Error(), n), rq.safe, true
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return &reply{status: resp.StatusCode, body: data}, nil, false, false
	}
	retryAfter := 0
	if v, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && v > 0 && v < 86400 {
		retryAfter = v
	}
	e := envelopeError(resp.StatusCode, data, retryAfter, n)
	retry := (resp.StatusCode == 429 || resp.StatusCode == 503) && rq.safe
	// A rate limit is the tenant's on every broker: retry where it was asked.
	return nil, e, retry, resp.StatusCode != 429
}

// decode reads a 2xx body into out; a body that is not that JSON is the
// client's bad_response.
func decode(rep *reply, out any) error {
	d := json.NewDecoder(bytes.NewReader(rep.body))
	d.UseNumber()
	if err := d.Decode(out); err != nil {
		return &Error{Kind: KindTransport, Status: rep.status, Code: "bad_response", Reason: "bad_response",
			Detail: "the answer is not the JSON the route gives: " + err.Error()}
	}
	return nil
}

// Health is GET /health's body (status, version, ...).
func (c *Client) Health(ctx context.Context) (json.RawMessage, error) {
	rep, err := c.do(ctx, request{method: "GET", path: "/health", safe: true})
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := decode(rep, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// marshal renders v as JSON without HTML escaping (values travel as given).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, ownError("bad_request", "a value is not JSON: "+err.Error(), 0)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
