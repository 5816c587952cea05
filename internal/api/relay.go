package api

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/upstream"
)

// relay writes a committed attempt to the client, the held bytes first and
// then the rest as it arrives, and returns the request's outcome. This is
// the frame that lives as long as a stream, with the handler's beneath it:
// everything before the commit point has returned by now (candidates.Run),
// so it stays small by design. Each event of a stream is written at once
// and flushed unless the provider's next event is already read (Buffered);
// each write is bounded by the stream write timeout so a client that stops
// reading cannot pin the attempt's slots.
func (s *Server) relay(w http.ResponseWriter, a *candidates.Attempt, tc *tokenCount) (out *candidates.Outcome) {
	defer func() {
		if v := recover(); v != nil {
			a.Abort()
			panic(v)
		}
	}()
	rc := http.NewResponseController(w)
	stream := a.Stream()
	commitHeaders(w.Header(), a)
	w.WriteHeader(a.Status())
	var dl writeDeadline
	if stream {
		dl = writeDeadline{rc: rc, d: s.opts.StreamWriteTimeout}
	}
	if tc != nil && !stream {
		return a.Finish(s.sendCounted(w, rc, a, tc))
	}
	tc.beforeEnd(a, a.First())
	// The first event is flushed alone, whatever follows it: it is the
	// first token the user waits for.
	err := s.send(w, rc, &dl, a.First(), stream)
	if err == nil {
		a.Sent()
		if h := s.opts.TestHook; h != nil && stream {
			h("streaming")
		}
		var b []byte
		held := false // written to the client's buffer, not flushed yet
		for {
			if b, err = a.Next(); err != nil {
				break
			}
			tc.beforeEnd(a, b)
			// Events the provider sent back to back go out in one write:
			// the flush waits only while the next event is already read.
			// A client with a token rate is counted (a call to the shared
			// store) before its stream's last event, and no event waits
			// on that: its events are flushed one by one.
			hold := stream && tc == nil && a.Buffered()
			if err = s.send(w, rc, &dl, b, stream && !hold); err != nil {
				break
			}
			held = hold
		}
		if held {
			// The stream ended or broke behind a held event: what the
			// provider sent reaches the client before the outcome does.
			if ferr := rc.Flush(); ferr != nil && (err == nil || err == io.EOF) {
				err = &candidates.ClientWriteError{Err: ferr}
			}
		}
	}
	return a.Finish(err)
}

// commitHeaders sets the client's response headers from the upstream's.
// A body without a Content-Type (upstream.Send let it through as JSON) is
// labelled JSON: net/http would otherwise sniff one from its first bytes.
func commitHeaders(h http.Header, a *candidates.Attempt) {
	upstream.CopyResponseHeaders(h, a.Header())
	if a.Stream() {
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		return
	}
	if _, ok := h["Content-Type"]; !ok {
		h.Set("Content-Type", "application/json")
	}
	if n := a.ContentLength(); n >= 0 {
		h.Set("Content-Length", strconv.FormatInt(n, 10))
	}
}

// writeDeadline bounds a stream's writes by the stream write timeout. It
// moves the connection's deadline only when less than half the timeout is
// left, so a write is bounded by between half the timeout and all of it:
// setting a deadline re-arms a runtime timer under a lock, and doing it for
// every event cost about 3% of a stream's CPU.
type writeDeadline struct {
	rc  *http.ResponseController
	d   time.Duration // 0: no bound
	set time.Time     // the deadline on the connection; zero: none yet
}

func (dl *writeDeadline) extend() {
	if dl.d <= 0 {
		return
	}
	now := time.Now()
	if dl.set.Sub(now) >= dl.d/2 {
		return
	}
	dl.set = now.Add(dl.d)
	_ = dl.rc.SetWriteDeadline(dl.set)
}

// send writes b to the client, within the stream write timeout for a
// stream, and flushes it when flush is set.
func (s *Server) send(w http.ResponseWriter, rc *http.ResponseController, dl *writeDeadline, b []byte, flush bool) error {
	if dl != nil {
		dl.extend()
	}
	if _, err := w.Write(b); err != nil {
		return &candidates.ClientWriteError{Err: err}
	}
	if flush {
		if err := rc.Flush(); err != nil {
			return &candidates.ClientWriteError{Err: err}
		}
	}
	return nil
}
