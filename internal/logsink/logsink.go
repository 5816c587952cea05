// Package logsink owns where the gateway's log lines go: a Writer that
// passes each line on at once, except while a caller holds it, when lines
// wait and then go out together in one write; and a slog Handler through
// which a logger's user can reach that hold. It does not format lines:
// the JSON and text handlers above it do.
//
// The access log is the caller it exists for: one line per request, written
// a tick's worth at a time, cost a write system call per request (and, on a
// machine where the routes file shares a directory with the log, a wake-up
// of the routes watcher). Held, a tick's lines cost one.
package logsink

import (
	"io"
	"log/slog"
	"sync"
)

// keptBuffer is the largest buffer a Writer keeps between holds, so one
// burst of lines does not pin its memory.
const keptBuffer = 64 << 10

// Writer writes log lines to out. Lines are written in the order they were
// given, whether held or not.
type Writer struct {
	mu   sync.Mutex
	out  io.Writer
	held int    // Hold depth
	buf  []byte // lines given while held
}

// NewWriter returns a Writer that writes to out.
func NewWriter(out io.Writer) *Writer { return &Writer{out: out} }

// Write writes p, one whole line from a slog handler, now, or when the
// last hold is released.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held > 0 {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	return w.out.Write(p)
}

// Hold keeps the lines written from now until the matching Release.
func (w *Writer) Hold() {
	w.mu.Lock()
	w.held++
	w.mu.Unlock()
}

// Release ends a Hold; the last one writes the lines kept, in one write.
func (w *Writer) Release() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held == 0 {
		return nil
	}
	w.held--
	if w.held > 0 || len(w.buf) == 0 {
		return nil
	}
	_, err := w.out.Write(w.buf)
	if cap(w.buf) > keptBuffer {
		w.buf = nil
	} else {
		w.buf = w.buf[:0]
	}
	return err
}

// Handler is a slog.Handler writing to a Writer, which it lets its users
// hold: a logger's user finds the hold with a type assertion on
// Logger.Handler(), as net/http's users find a Flusher.
type Handler struct {
	slog.Handler
	w *Writer
}

// NewHandler wraps h, which must write to w.
func NewHandler(h slog.Handler, w *Writer) *Handler { return &Handler{Handler: h, w: w} }

// WithAttrs implements slog.Handler, keeping the hold reachable.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{Handler: h.Handler.WithAttrs(attrs), w: h.w}
}

// WithGroup implements slog.Handler, keeping the hold reachable.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{Handler: h.Handler.WithGroup(name), w: h.w}
}

// Hold holds the Writer's lines; see Writer.Hold.
func (h *Handler) Hold() { h.w.Hold() }

// Release ends a Hold; see Writer.Release.
func (h *Handler) Release() error { return h.w.Release() }
