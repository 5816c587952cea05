package mockupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestFailsAtShare checks that any prefix of N requests holds floor(N·r) failures,
// including rates that floating point would round the wrong way.
func TestFailsAtShare(t *testing.T) {
	for _, r := range []float64{0.001, 0.1, 0.29, 1.0 / 3, 0.5, 0.7, 0.999} {
		ppm := failRatePPM(r)
		n := 0
		for i := range uint64(1000) {
			if failsAt(i, ppm) {
				n++
			}
			if want := int((i + 1) * ppm / 1e6); n != want {
				t.Fatalf("rate %v: after %d requests %d failures, want %d", r, i+1, n, want)
			}
		}
	}
}

// TestValidate lists the values commands refuse.
func TestValidate(t *testing.T) {
	tests := []struct {
		b         Behavior
		wantField string
	}{
		{Behavior{}, ""},
		{Behavior{Status: 503, FailRate: 0.5, Chunks: 10, Latency: time.Second}, ""},
		{Behavior{Latency: -1}, "Latency"},
		{Behavior{ChunkInterval: -1}, "ChunkInterval"},
		{Behavior{Chunks: -1}, "Chunks"},
		{Behavior{ResetAfterChunks: maxCount + 1}, "ResetAfterChunks"},
		{Behavior{Status: 42}, "Status"},
		{Behavior{FailRate: 2}, "FailRate"},
		{Behavior{HangRate: -0.5}, "HangRate"},
		{Behavior{SlowRate: 1.5}, "SlowRate"},
		{Behavior{SlowDelay: -1}, "SlowDelay"},
	}
	for _, tt := range tests {
		err := tt.b.Validate()
		var fe *FieldError
		switch {
		case tt.wantField == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want nil", tt.b, err)
		case tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField):
			t.Errorf("Validate(%+v) = %v, want a FieldError for %s", tt.b, err, tt.wantField)
		}
	}
}

// TestAppendJSONEscaped compares the hand-written escaper with encoding/json, since
// models and identities reach the JSON unchecked.
func TestAppendJSONEscaped(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "ctl\x00\x01\x1f\n\r\t", "é€😀", "bad\xffutf8\xc3", "sep\u2028\u2029", "<&>"} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("appendJSONString(%q) = %s: invalid JSON: %v", s, got, err)
			continue
		}
		var wantBack string
		_ = json.Unmarshal(want.Bytes(), &wantBack)
		if back != wantBack {
			t.Errorf("appendJSONString(%q) decodes to %q, encoding/json to %q", s, back, wantBack)
		}
	}
}
