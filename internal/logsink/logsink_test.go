package logsink

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// countingWriter records each write it was given.
type countingWriter struct{ writes []string }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

func TestHeldLinesGoOutTogetherInOrder(t *testing.T) {
	out := &countingWriter{}
	w := NewWriter(out)
	log := slog.New(NewHandler(slog.NewJSONHandler(w, nil), w))

	log.Info("before")
	if len(out.writes) != 1 {
		t.Fatalf("an unheld line: %d writes, want 1", len(out.writes))
	}
	h, ok := log.With("k", "v").Handler().(interface {
		Hold()
		Release() error
	})
	if !ok {
		t.Fatal("a derived logger's handler lost the hold")
	}
	h.Hold()
	h.Hold() // nested: only the outer release writes
	for _, m := range []string{"one", "two", "three"} {
		log.Info(m)
	}
	if err := h.Release(); err != nil || len(out.writes) != 1 {
		t.Fatalf("inner release: %d writes (err %v), want still 1", len(out.writes), err)
	}
	if err := h.Release(); err != nil || len(out.writes) != 2 {
		t.Fatalf("outer release: %d writes (err %v), want 2", len(out.writes), err)
	}
	lines := strings.Split(strings.TrimSuffix(out.writes[1], "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("held write holds %d lines, want 3: %q", len(lines), out.writes[1])
	}
	for i, m := range []string{"one", "two", "three"} {
		if !strings.Contains(lines[i], `"msg":"`+m+`"`) {
			t.Errorf("line %d = %s, want %s", i, lines[i], m)
		}
	}
	if err := h.Release(); err != nil || len(out.writes) != 2 {
		t.Fatalf("an unmatched release wrote: %d writes, err %v", len(out.writes), err)
	}
	log.Info("after")
	if len(out.writes) != 3 {
		t.Fatalf("after the hold: %d writes, want 3", len(out.writes))
	}
}

func TestEmptyHoldWritesNothing(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Hold()
	if err := w.Release(); err != nil || b.Len() != 0 {
		t.Fatalf("empty hold wrote %q (err %v)", b.String(), err)
	}
}
