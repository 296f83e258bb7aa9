package queen

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Kind is clients/API.md's error kind: one set in every client.
type Kind string

const (
	KindBadRequest   Kind = "bad_request"  // 400, 413, other 4xx; and what the client refuses itself (bad_argument)
	KindAuth         Kind = "auth"         // 401, 403
	KindNotFound     Kind = "not_found"    // 404
	KindConflict     Kind = "conflict"     // 409
	KindPrecondition Kind = "precondition" // a required KV op lost (200 kv_precondition)
	KindRateLimited  Kind = "rate_limited" // 429
	KindUnavailable  Kind = "unavailable"  // 503
	KindServer       Kind = "server"       // 500, other 5xx
	KindTransport    Kind = "transport"    // no usable answer: unreachable, timeout, transport, bad_response
)

// kindOf is the kind of a status and code (clients/API.md's table).
func kindOf(status int, code string) Kind {
	switch {
	case code == "kv_precondition":
		return KindPrecondition
	case status == 0 && code == "bad_argument":
		return KindBadRequest
	case status == 0:
		return KindTransport
	case status == 401 || status == 403:
		return KindAuth
	case status == 404:
		return KindNotFound
	case status == 409:
		return KindConflict
	case status == 429:
		return KindRateLimited
	case status == 503:
		return KindUnavailable
	case status >= 500:
		return KindServer
	case status >= 400:
		return KindBadRequest
	}
	return KindTransport // a 2xx that did not read: bad_response
}

// Error is every failure a call returns: the broker's error envelope as it
// was sent, a KV precondition verdict (Status 200, Code "kv_precondition"),
// or the client's own failure (Status 0; Code "bad_argument", "unreachable",
// "timeout", "transport" or "bad_response"). errors.Is(err,
// context.DeadlineExceeded) and context.Canceled hold when the call's
// context ended it (Unwrap).
type Error struct {
	Kind       Kind   // clients/API.md's error kind
	Status     int    // HTTP status; 0: no HTTP answer; 200: a KV precondition verdict
	Code       string // the envelope's code, or the client's own
	Reason     string // the envelope's reason (the client's own: the same as Code)
	Detail     string // the envelope's detail, or the client's words
	RetryAfter int    // the last answer's Retry-After seconds; 0: none
	Attempts   int    // HTTP attempts made for the call, the first included

	// A KV precondition verdict's members (Code "kv_precondition"), as sent.
	FailedIndex  int
	KVReason     string          // exists | absent | version | limit | type
	Version      int64           // the live row's version; 0: none
	Value        json.RawMessage // the live value's JSON text (null: none)
	ValueOmitted bool
	ValueBytes   int64

	cause error // what ended the call below HTTP: the context's error, a dial error
}

// Unwrap gives what ended the call below HTTP (context.DeadlineExceeded,
// context.Canceled, a network error), or nil.
func (e *Error) Unwrap() error { return e.cause }

// Is matches the sentinels of the broker's reasons a caller acts on:
// ErrConfigMismatch (409 streams_config_mismatch) and ErrLeaseLost (409
// streams_lease_lost).
func (e *Error) Is(target error) bool {
	switch target {
	case ErrConfigMismatch:
		return e.Reason == "streams_config_mismatch"
	case ErrLeaseLost:
		return e.Reason == "streams_lease_lost"
	}
	return false
}

func (e *Error) Error() string {
	if e.Code == "kv_precondition" {
		// clients/API.md's one wording, whatever the language.
		return fmt.Sprintf("kv precondition failed at op %d: %s", e.FailedIndex, e.KVReason)
	}
	if e.Status == 0 {
		return fmt.Sprintf("queen: %s: %s", e.Code, e.Detail)
	}
	return fmt.Sprintf("queen: HTTP %d %s/%s: %s", e.Status, e.Code, e.Reason, e.Detail)
}

// IsPrecondition reports whether err is a KV precondition verdict: a
// required op lost (the key existed, was absent, had another version, or an
// increment hit its bound) and nothing of the call was written.
func IsPrecondition(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == "kv_precondition"
}

// StatusOf returns the HTTP status of a *Error (0 for the client's own
// failures and for errors that are not a *Error).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// MarshalJSON renders the error as the conformance suite names its members.
func (e *Error) MarshalJSON() ([]byte, error) {
	m := map[string]any{
		"status": e.Status, "code": e.Code, "reason": e.Reason, "detail": e.Detail,
		"retryAfter": e.RetryAfter, "attempts": e.Attempts, "kind": e.Kind,
	}
	if e.Code == "kv_precondition" || e.KVReason != "" {
		m["failedIndex"] = e.FailedIndex
		m["kvReason"] = e.KVReason
		m["version"] = e.Version
		val := e.Value
		if val == nil {
			val = json.RawMessage("null")
		}
		m["value"] = val
		m["valueOmitted"] = e.ValueOmitted
		m["valueBytes"] = e.ValueBytes
	}
	return json.Marshal(m)
}

// verdictBody is the precondition members of a verdict or a refusal.
type verdictBody struct {
	OK           *bool           `json:"ok"`
	Code         string          `json:"code"`
	Reason       string          `json:"reason"`
	Detail       string          `json:"detail"`
	Error        string          `json:"error"`
	FailedIndex  *int            `json:"failedIndex"`
	KVReason     string          `json:"kvReason"`
	Version      int64           `json:"version"`
	Value        json.RawMessage `json:"value"`
	ValueOmitted bool            `json:"valueOmitted"`
	ValueBytes   int64           `json:"valueBytes"`
}

func (e *Error) takePrecondition(v *verdictBody) {
	if v.FailedIndex != nil {
		e.FailedIndex = *v.FailedIndex
	}
	e.KVReason = v.KVReason
	e.Version = v.Version
	e.Value = v.Value
	if e.Value == nil && !v.ValueOmitted {
		e.Value = json.RawMessage("null")
	}
	e.ValueOmitted = v.ValueOmitted
	e.ValueBytes = v.ValueBytes
}

// kvVerdict turns a 200 {"ok":false,"reason":"kv_precondition",...} into
// the typed error; nil for any other body.
func kvVerdict(body []byte, attempts int) *Error {
	if len(body) == 0 || body[0] != '{' {
		return nil
	}
	var v verdictBody
	if json.Unmarshal(body, &v) != nil || v.OK == nil || *v.OK || v.Reason != "kv_precondition" {
		return nil
	}
	e := &Error{Kind: KindPrecondition, Status: 200, Code: "kv_precondition", Reason: "kv_precondition",
		Detail: "a required op lost", Attempts: attempts}
	e.takePrecondition(&v)
	return e
}

// envelopeError reads a 4xx/5xx answer; a body that is not the envelope
// keeps its status and says so.
func envelopeError(status int, body []byte, retryAfter, attempts int) *Error {
	e := &Error{Status: status, RetryAfter: retryAfter, Attempts: attempts}
	var v verdictBody
	if json.Unmarshal(body, &v) == nil && v.Code != "" {
		e.Code, e.Reason, e.Detail = v.Code, v.Reason, v.Detail
		if e.Detail == "" {
			e.Detail = v.Error
		}
		if v.FailedIndex != nil {
			e.takePrecondition(&v)
		}
		e.Kind = kindOf(status, e.Code)
		return e
	}
	e.Code = fmt.Sprintf("http_%d", status)
	e.Reason = e.Code
	e.Detail = fmt.Sprintf("HTTP %d without the error envelope", status)
	e.Kind = kindOf(status, e.Code)
	return e
}

func ownError(code, detail string, attempts int) *Error {
	return &Error{Kind: kindOf(0, code), Code: code, Reason: code, Detail: detail, Attempts: attempts}
}
