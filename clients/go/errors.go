package queen

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Error is every failure a call returns: the broker's error envelope as it
// was sent, a KV precondition verdict (Status 200, Code "kv_precondition"),
// or the client's own failure (Status 0; Code "unreachable", "timeout",
// "transport" or "bad_response").
type Error struct {
	Status     int    // HTTP status; 0: no HTTP answer; 200: a KV precondition verdict
	Code       string // the envelope's code, or the client's own
	Reason     string // the envelope's reason (the client's own: the same as Code)
	Detail     string // the envelope's detail, or the client's words
	RetryAfter int    // the last answer's Retry-After seconds; 0: none
	Attempts   int    // HTTP attempts made for the call, the first included

	// A KV precondition verdict's members (Code "kv_precondition"), as sent.
	FailedIndex  int
	KVReason     string          // exists | absent | version | limit | type
	Version      json.Number     // the live row's version; 0: none
	Value        json.RawMessage // the live value's JSON text (null: none)
	ValueOmitted bool
	ValueBytes   int64
}

func (e *Error) Error() string {
	if e.Code == "kv_precondition" {
		return fmt.Sprintf("queen: kv precondition failed at op %d (%s)", e.FailedIndex, e.KVReason)
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
		"retryAfter": e.RetryAfter, "attempts": e.Attempts,
	}
	if e.Code == "kv_precondition" || e.KVReason != "" {
		m["failedIndex"] = e.FailedIndex
		m["kvReason"] = e.KVReason
		v := e.Version
		if v == "" {
			v = "0"
		}
		m["version"] = v
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
	Version      json.Number     `json:"version"`
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
	e := &Error{Status: 200, Code: "kv_precondition", Reason: "kv_precondition", Detail: "a required op lost",
		Attempts: attempts}
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
		return e
	}
	e.Code = fmt.Sprintf("http_%d", status)
	e.Reason = e.Code
	e.Detail = fmt.Sprintf("HTTP %d without the error envelope", status)
	return e
}

func ownError(code, detail string, attempts int) *Error {
	return &Error{Code: code, Reason: code, Detail: detail, Attempts: attempts}
}
