package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

// exchange relays one request's admitted attempts between providers and the
// client. It implements candidates.Executor; at most one attempt commits.
type exchange struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	header http.Header // the client's request headers
	chat   *upstream.ChatRequest
	s      *Server
}

var _ candidates.Executor = (*exchange)(nil)

func newExchange(w http.ResponseWriter, r *http.Request, chat *upstream.ChatRequest, s *Server) *exchange {
	return &exchange{w: w, rc: http.NewResponseController(w), header: r.Header, chat: chat, s: s}
}

// Execute implements candidates.Executor.
func (x *exchange) Execute(ctx context.Context, a *candidates.Attempt) error {
	c := a.Candidate
	prov := c.Provider()
	client := x.s.opts.Upstreams[prov.Name]
	admitted := time.Now()
	if h := x.s.opts.TestHook; h != nil {
		h("attempt")
	}

	var firstByte, idle time.Duration
	if a.Stream {
		firstByte, idle = prov.FirstByte, prov.Idle
	}
	wctx, watch := watchdog.Start(ctx, firstByte, idle)
	defer watch.Stop()
	tctx, cancel := context.WithTimeoutCause(wctx, prov.Total, upstream.ErrTotalTimeout)
	defer cancel()

	resp, err := client.Send(tctx, &upstream.Call{
		URL: prov.ChatURL, Key: c.Target.Key, Extra: prov.Headers, ClientHeader: x.header,
		Body: x.chat.WithModel(c.Model), Stream: a.Stream,
	})
	if err != nil {
		return cause(tctx, err)
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	if !a.Stream {
		a.FirstByte = time.Since(admitted)
		return x.relayBody(tctx, a, resp)
	}
	hold := watchdog.NewHold(x.s.opts.HoldMode, a.Lease.ReleaseGlobal)
	defer hold.End()
	hold.Headers()
	return x.relayStream(tctx, a, resp, watch, &hold, admitted)
}

// cause replaces a bare cancellation error with why the context ended: a
// watchdog, the total timeout, or the client (the loop checks the latter).
func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if c := context.Cause(ctx); c != nil {
			return c
		}
	}
	return err
}

func (x *exchange) relayStream(ctx context.Context, a *candidates.Attempt, resp *http.Response,
	watch *watchdog.Watch, hold *watchdog.Hold, admitted time.Time) error {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return &upstream.ProtocolError{Err: errors.New("stream answered with Content-Type " + strconv.Quote(ct))}
	}
	er := upstream.NewEventReader(resp.Body)
	defer er.Close()
	for {
		ev, comment, err := er.Next()
		if err != nil {
			if err == io.EOF {
				if !a.Committed {
					return &upstream.ProtocolError{Err: errors.New("stream ended before its first event")}
				}
				return nil
			}
			err = cause(ctx, err)
			var pe *upstream.ProtocolError
			if !errors.As(err, &pe) && ctx.Err() == nil {
				err = &upstream.ProtocolError{Err: err}
			}
			if a.Committed {
				x.streamError()
			}
			return err
		}
		if !a.Committed {
			if comment {
				continue // the client sees nothing until a candidate really starts
			}
			if !watch.FirstByte() {
				return watchdog.ErrFirstByteTimeout
			}
			a.FirstByte = time.Since(admitted)
			h := x.w.Header()
			upstream.CopyResponseHeaders(h, resp.Header)
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
			a.Committed = true
			x.w.WriteHeader(resp.StatusCode)
			if err := x.send(ev); err != nil {
				return err
			}
			a.OnStreaming()
			hold.FirstBody()
			if h := x.s.opts.TestHook; h != nil {
				h("streaming")
			}
			continue
		}
		watch.Activity()
		if u, ok := upstream.EventUsage(ev); ok {
			a.Usage, a.HasUsage = u, true
		}
		if err := x.send(ev); err != nil {
			return err
		}
	}
}

// send writes one event and flushes it, bounded by the stream write timeout
// so a client that stops reading cannot pin the attempt's slots.
func (x *exchange) send(ev []byte) error {
	if d := x.s.opts.StreamWriteTimeout; d > 0 {
		_ = x.rc.SetWriteDeadline(time.Now().Add(d))
	}
	if _, err := x.w.Write(ev); err != nil {
		return &candidates.ClientWriteError{Err: err}
	}
	if err := x.rc.Flush(); err != nil {
		return &candidates.ClientWriteError{Err: err}
	}
	return nil
}

// streamError ends a started stream with the error event; no [DONE] follows.
func (x *exchange) streamError() {
	_, _ = x.w.Write(streamErrorEvent("the upstream stream was interrupted"))
	_ = x.rc.Flush()
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// usageTail is how much of a non-streaming body is kept to find its usage.
const usageTail = 4 << 10

// relayBody copies a non-streaming 2xx body to the client without buffering
// it whole. Headers are written only once the first bytes arrived, so a body
// that fails at once can still fail over.
func (x *exchange) relayBody(ctx context.Context, a *candidates.Attempt, resp *http.Response) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var tail []byte
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if !a.Committed {
				x.commitBody(a, resp)
			}
			if _, err := x.w.Write(buf[:n]); err != nil {
				return &candidates.ClientWriteError{Err: err}
			}
			tail = keepTail(tail, buf[:n])
		}
		if rerr == io.EOF {
			if !a.Committed {
				x.commitBody(a, resp) // an empty body
			}
			a.Usage, a.HasUsage = upstream.TailUsage(tail)
			return nil
		}
		if rerr != nil {
			err := cause(ctx, rerr)
			if ctx.Err() == nil || !errors.Is(err, upstream.ErrTotalTimeout) {
				err = &upstream.ProtocolError{Err: err}
			}
			return err
		}
	}
}

// commitBody sends the status and headers of a non-streaming answer.
func (x *exchange) commitBody(a *candidates.Attempt, resp *http.Response) {
	h := x.w.Header()
	upstream.CopyResponseHeaders(h, resp.Header)
	if resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	a.Committed = true
	x.w.WriteHeader(resp.StatusCode)
}

func keepTail(tail, b []byte) []byte {
	if len(b) >= usageTail {
		return append(tail[:0], b[len(b)-usageTail:]...)
	}
	tail = append(tail, b...)
	if len(tail) > 2*usageTail {
		n := copy(tail, tail[len(tail)-usageTail:])
		tail = tail[:n]
	}
	return tail
}
