package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestStringNeverPrints protects against a key reaching a log line or an error body.
func TestStringNeverPrints(t *testing.T) {
	const sentinel = "sk-live-sentinel-123"
	s := New(sentinel)
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "key", s)
	j, _ := json.Marshal(struct{ K String }{s})
	outs := []string{
		fmt.Sprint(s), fmt.Sprintf("%v %s %q %x %#v %+v", s, s, s, s, s, s),
		fmt.Sprintf("%v", struct{ K String }{s}), buf.String(), string(j),
	}
	for _, o := range outs {
		if strings.Contains(o, sentinel) {
			t.Fatalf("secret leaked in %q", o)
		}
	}
	if s.Reveal() != sentinel {
		t.Fatalf("Reveal() = %q, want %q", s.Reveal(), sentinel)
	}
	if !New("").Empty() || s.Empty() {
		t.Fatal("Empty() wrong")
	}
}
