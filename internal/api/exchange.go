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

	// The attempt in flight. Attempts run one after another, so one set of
	// fields serves them all; kept here rather than in locals, the frames
	// that stay on the stack while a stream is relayed are smaller (see
	// Server.ServeHTTP for why that matters).
	resp     *http.Response
	watch    *watchdog.Watch
	hold     watchdog.Hold
	admitted time.Time
}

var _ candidates.Executor = (*exchange)(nil)

func newExchange(w http.ResponseWriter, r *http.Request, chat *upstream.ChatRequest, s *Server) *exchange {
	return &exchange{w: w, rc: http.NewResponseController(w), header: r.Header, chat: chat, s: s}
}

// Execute implements candidates.Executor.
func (x *exchange) Execute(ctx context.Context, a *candidates.Attempt) error {
	x.admitted = time.Now()
	if h := x.s.opts.TestHook; h != nil {
		h("attempt")
	}
	ctx = x.arm(ctx, a)
	defer x.disarm()
	resp, err := x.call(ctx, a)
	if err != nil {
		return cause(ctx, err)
	}
	defer resp.Body.Close()
	x.resp = resp
	a.Status = resp.StatusCode
	if !a.Stream {
		a.FirstByte = time.Since(x.admitted)
		return x.relayBody(ctx, a, resp)
	}
	x.hold = watchdog.NewHold(x.s.opts.HoldMode, a.Lease.ReleaseGlobal)
	defer x.hold.End()
	x.hold.Headers()
	return x.relayStream(ctx, a)
}

// arm starts the attempt's watchdog: first-byte and idle deadlines (streams
// only) and the total timeout.
func (x *exchange) arm(ctx context.Context, a *candidates.Attempt) context.Context {
	prov := a.Candidate.Provider()
	var firstByte, idle time.Duration
	if a.Stream {
		firstByte, idle = prov.FirstByte, prov.Idle
	}
	ctx, x.watch = watchdog.Start(ctx, watchdog.SystemClock{}, firstByte, idle)
	x.watch.Limit(prov.Total, upstream.ErrTotalTimeout)
	return ctx
}

// disarm stops what arm started and lets go of the attempt's response, whose
// request holds the upstream body, before a failover.
func (x *exchange) disarm() {
	x.watch.Stop()
	x.resp = nil
}

// call sends the attempt's request to its provider. Not inlined: the Call
// it builds would otherwise stay in Execute's frame for the whole stream.
//
//go:noinline
func (x *exchange) call(ctx context.Context, a *candidates.Attempt) (*http.Response, error) {
	c := a.Candidate
	prov := c.Provider()
	return x.s.opts.Upstreams[prov.Name].Send(ctx, &upstream.Call{
		URL: prov.ChatURL, Key: c.Target.Key, Extra: prov.Headers, ClientHeader: x.header,
		Body: x.chat.WithModel(c.Model), Stream: a.Stream,
	})
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

func (x *exchange) relayStream(ctx context.Context, a *candidates.Attempt) error {
	if err := checkStreamType(x.resp); err != nil {
		return err
	}
	er := upstream.NewEventReader(x.resp.Body)
	defer er.Close()
	for {
		ev, comment, err := er.Next()
		if err != nil {
			return x.streamEnded(ctx, a, err)
		}
		first := !a.Committed
		if first {
			if comment {
				continue // the client sees nothing until a candidate really starts
			}
			if err := x.commitStream(a); err != nil {
				return err
			}
		} else {
			x.watch.Activity()
			x.noteUsage(a, ev)
		}
		// The first send flushes the headers too, the deepest the handler's
		// stack goes; it is made here rather than in a helper for that reason.
		if err := x.send(ev); err != nil {
			return err
		}
		if first {
			x.streamStarted(a)
		}
	}
}

// The helpers below hold what relayStream does once or at the end, so that
// its own frame, on the stack for the stream's whole life, stays small.

func checkStreamType(resp *http.Response) error {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return &upstream.ProtocolError{Err: errors.New("stream answered with Content-Type " + strconv.Quote(ct))}
	}
	return nil
}

// streamEnded turns the end of the upstream body into the attempt's result.
// It writes nothing: a stream cut after commit gets its error event from the
// handler once the loop has recorded the outcome, so a client that hangs up
// on that event cannot change what is on record.
func (x *exchange) streamEnded(ctx context.Context, a *candidates.Attempt, err error) error {
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
	return err
}

// commitStream sets the status and headers of a stream: from here on the
// attempt owns the response. The first event's send writes them.
func (x *exchange) commitStream(a *candidates.Attempt) error {
	if !x.watch.FirstByte() {
		return watchdog.ErrFirstByteTimeout
	}
	a.FirstByte = time.Since(x.admitted)
	h := x.w.Header()
	upstream.CopyResponseHeaders(h, x.resp.Header)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	a.Committed = true
	x.w.WriteHeader(x.resp.StatusCode)
	return nil
}

// streamStarted runs once the first event reached the client.
func (x *exchange) streamStarted(a *candidates.Attempt) {
	a.Sent()
	x.hold.FirstBody()
	if h := x.s.opts.TestHook; h != nil {
		h("streaming")
	}
}

// noteUsage keeps the usage a chunk carries (the last one, with
// stream_options.include_usage).
func (x *exchange) noteUsage(a *candidates.Attempt, ev []byte) {
	if u, ok := upstream.EventUsage(ev); ok {
		a.Usage, a.HasUsage = u, true
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
	a.Sent()
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
