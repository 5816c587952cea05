package api

import (
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
// so it stays small by design. Each event of a stream is flushed at once;
// each write is bounded by the stream write timeout so a client that stops
// reading cannot pin the attempt's slots.
func (s *Server) relay(w http.ResponseWriter, a *candidates.Attempt) (out *candidates.Outcome) {
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
	err := s.send(w, rc, a.First(), stream)
	if err == nil {
		a.Sent()
		if h := s.opts.TestHook; h != nil && stream {
			h("streaming")
		}
		var b []byte
		for {
			if b, err = a.Next(); err != nil {
				break
			}
			if err = s.send(w, rc, b, stream); err != nil {
				break
			}
		}
	}
	return a.Finish(err)
}

// commitHeaders sets the client's response headers from the upstream's.
func commitHeaders(h http.Header, a *candidates.Attempt) {
	upstream.CopyResponseHeaders(h, a.Header())
	if a.Stream() {
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	} else if n := a.ContentLength(); n >= 0 {
		h.Set("Content-Length", strconv.FormatInt(n, 10))
	}
}

// send writes b to the client; a stream's event is flushed at once, within
// the stream write timeout.
func (s *Server) send(w http.ResponseWriter, rc *http.ResponseController, b []byte, stream bool) error {
	if stream {
		if d := s.opts.StreamWriteTimeout; d > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(d))
		}
	}
	if _, err := w.Write(b); err != nil {
		return &candidates.ClientWriteError{Err: err}
	}
	if stream {
		if err := rc.Flush(); err != nil {
			return &candidates.ClientWriteError{Err: err}
		}
	}
	return nil
}
