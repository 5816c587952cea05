package api

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/logsink"
	"github.com/llmgw/gateway/internal/upstream"
)

// writeLog records each write the log output was given.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// TestAccessLogWritesATickAtOnce: the lines queued between two drains
// reach a holdable log output in one write, every line whole and in order;
// a plain handler still gets every line.
func TestAccessLogWritesATickAtOnce(t *testing.T) {
	for _, held := range []bool{true, false} {
		out := &writeLog{}
		sink := logsink.NewWriter(out)
		var h slog.Handler = slog.NewJSONHandler(sink, nil)
		if held {
			h = logsink.NewHandler(h, sink)
		}
		a := newAccessLog(slog.New(h))
		const n = 20
		for i := range n {
			a.rejected(uuid.New(), "", upstream.RouteChat, 401, "invalid_api_key", time.Now().Add(-time.Duration(i)*time.Millisecond))
		}
		a.close()
		out.mu.Lock()
		all := strings.Join(out.writes, "")
		writes := len(out.writes)
		out.mu.Unlock()
		if got := strings.Count(all, `"msg":"request"`); got != n {
			t.Fatalf("held=%v: %d access lines, want %d", held, got, n)
		}
		// One drain, or two when the writer's tick fell between the puts.
		if held && writes > 2 {
			t.Errorf("held: %d writes for %d lines queued together, want 1 (2 if a tick fell between)", writes, n)
		}
		if !held && writes != n {
			t.Errorf("not held: %d writes, want one per line (%d)", writes, n)
		}
	}
}
