package queen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// shapeOf turns a scenario pipeline (clients/conformance/streams/README.md)
// into the operators the configuration hash sees.
func shapeOf(t *testing.T, pipeline []json.RawMessage) []ShapeOp {
	var ops []ShapeOp
	for _, raw := range pipeline {
		var o map[string]json.RawMessage
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		var name string
		_ = json.Unmarshal(o["op"], &name)
		num := func(k string) float64 {
			var f float64
			if v, ok := o[k]; ok {
				if err := json.Unmarshal(v, &f); err != nil {
					t.Fatalf("%s.%s: %v", name, k, err)
				}
			}
			return f
		}
		_, et := o["eventTime"]
		op := ShapeOp{GracePeriod: num("gracePeriod"), AllowedLateness: num("allowedLateness"), EventTime: et}
		switch name {
		case "map", "filter", "flatMap", "keyBy", "gate", "foreach":
			op = ShapeOp{Kind: name}
		case "reduce":
			init, ok := o["initial"]
			op = ShapeOp{Kind: "reduce", HasInitial: ok && string(bytes.TrimSpace(init)) != "null"}
		case "aggregate":
			// The names in the order the scenario gives them: read as tokens,
			// since a Go map would lose the order.
			d := json.NewDecoder(bytes.NewReader(o["fields"]))
			_, _ = d.Token()
			op = ShapeOp{Kind: "aggregate"}
			for d.More() {
				k, _ := d.Token()
				op.Fields = append(op.Fields, k.(string))
				var skip json.RawMessage
				_ = d.Decode(&skip)
			}
		case "windowTumbling":
			op.Kind, op.Seconds = "window-tumbling", num("seconds")
		case "windowSliding":
			op.Kind, op.Size, op.Slide = "window-sliding", num("size"), num("slide")
		case "windowCron":
			op.Kind = "window-cron"
			_ = json.Unmarshal(o["every"], &op.Every)
		case "windowSession":
			op.Kind, op.Gap = "window-session", num("gap")
		case "to":
			op = ShapeOp{Kind: "sink"}
			_ = json.Unmarshal(o["queue"], &op.Queue)
		default:
			t.Fatalf("unknown op %q", name)
		}
		ops = append(ops, op)
	}
	return ops
}

func TestStreamsHashVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "conformance", "streams", "hash_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name       string
			Pipeline   []json.RawMessage
			Canonical  string
			ConfigHash string
		}
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range f.Vectors {
		ops := shapeOf(t, v.Pipeline)
		if got := ShapeText(ops); got != v.Canonical {
			t.Errorf("%s: text\n got %s\nwant %s", v.Name, got, v.Canonical)
		}
		if got := ConfigHash(ops); got != v.ConfigHash {
			t.Errorf("%s: hash %s, want %s", v.Name, got, v.ConfigHash)
		}
	}
}

func TestStreamsNumbersAsECMAScript(t *testing.T) {
	for f, want := range map[float64]string{60: "60", 1.5: "1.5", 0.000001: "0.000001", 1e-7: "1e-7",
		1e21: "1e+21", 1e20: "100000000000000000000", -2.5e-8: "-2.5e-8", 123456789012: "123456789012",
		0.1: "0.1", 1.2345e22: "1.2345e+22"} {
		if got := jsNumber(f); got != want {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
	}
}

// The routes against a real broker: a registration resumes with its hash,
// another hash is refused with 409 streams_config_mismatch, reset replaces it.
func TestStreamsRegisterAndConfigMismatch(t *testing.T) {
	b := sharedBroker(t)
	c, _ := New(Options{URLs: []string{b.base}})
	defer c.Close()
	ctx := context.Background()
	src, name := "streams-go-cfg-"+runToken(), "conf.cfg.go."+runToken()
	if _, err := c.Configure(ctx, QueueConfig{Queue: src}); err != nil {
		t.Fatal(err)
	}
	h1 := ConfigHash([]ShapeOp{{Kind: "map"}})
	h2 := ConfigHash([]ShapeOp{{Kind: "filter"}})
	reg := func(h string, reset bool) (StreamsRegistration, error) {
		return c.StreamsRegister(ctx, StreamsQuery{Name: name, SourceQueue: src, ConfigHash: h, Reset: reset})
	}
	first, err := reg(h1, false)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Fresh || first.QueryID == "" {
		t.Fatalf("first registration: %v", first)
	}
	again, err := reg(h1, false)
	if err != nil || again.Fresh || again.QueryID != first.QueryID {
		t.Fatalf("same hash resumes: %v %v", again, err)
	}
	_, err = reg(h2, false)
	var qe *Error
	if !errors.As(err, &qe) || qe.Status != 409 || qe.Reason != "streams_config_mismatch" {
		t.Fatalf("other hash: %v", err)
	}
	r, err := reg(h2, true)
	if err != nil || !r.Reset {
		t.Fatalf("reset: %v %v", r, err)
	}
	rows, err := c.StreamsStateGet(ctx, StreamsStateQuery{QueryID: r.QueryID,
		PartitionID: "00000000-0000-0000-0000-000000000000"})
	if err != nil || len(rows) != 0 {
		t.Fatalf("state get: %v %v", rows, err)
	}
}
