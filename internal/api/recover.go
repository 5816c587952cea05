package api

import (
	"log/slog"
	"net/http"
	"runtime/debug"
)

// trackingWriter remembers whether the response has started, so that a
// panic can still be answered with a 500 before it and must abort the
// connection after it. Unwrap keeps http.ResponseController working.
type trackingWriter struct {
	http.ResponseWriter
	started bool
}

func (t *trackingWriter) WriteHeader(code int) {
	if code >= 200 {
		t.started = true
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.started = true
	return t.ResponseWriter.Write(b)
}

func (t *trackingWriter) Flush() { _ = t.FlushError() }

// FlushError is what http.ResponseController.Flush calls: with it, a flush
// that fails (the client is gone, or stopped reading past the write
// deadline) is reported, not swallowed.
func (t *trackingWriter) FlushError() error {
	t.started = true
	switch f := t.ResponseWriter.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
	}
	return nil
}

func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// recoverer turns a panic into an OpenAI-shaped 500 when nothing was sent
// yet and aborts the connection otherwise, so a client never sees a
// clean-looking end of a broken response. The stack is logged once.
func recoverer(log *slog.Logger, onPanic func()) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tw := &trackingWriter{ResponseWriter: w}
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
					panic(v)
				}
				if onPanic != nil {
					onPanic()
				}
				log.Error("panic serving request", "request_id", requestID(r.Context()).String(),
					"path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				if tw.started {
					panic(http.ErrAbortHandler)
				}
				writeError(tw, r, http.StatusInternalServerError, typeServer, codeInternal, "", "internal error")
			}()
			next.ServeHTTP(tw, r)
		})
	}
}
