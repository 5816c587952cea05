package candidates

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

// Sender sends one attempt's request to its provider (implemented by
// upstream.Client, one per provider).
type Sender interface {
	Send(ctx context.Context, call *upstream.Call) (*http.Response, error)
}

// Attempt is one candidate's try, from admission to its end: its slots, its
// watchdog, the upstream response and the bytes held back before the commit
// point. Its life is one state (state.go). Before the commit point the loop
// owns it and fails over on any failure; Run hands out the one attempt that
// committed, with the settler that settles its records, and the caller
// relays it (First, Sent, Next) and ends it with Finish (committed.go). Its
// buffers are reused by the next attempt of the same request.
type Attempt struct {
	r       *Runner
	req     *Request
	i       int      // candidate index
	state   state    // where it is in its life; moved only by to
	s       settler  // the committed attempt's records, handed over at commit
	outcome *Outcome // Finish's answer, once it settled

	lease    *admission.Lease
	ctx      context.Context // the upstream request's: the watchdog's child of the request's
	watch    *watchdog.Watch
	hold     watchdog.Hold
	resp     *http.Response
	call     upstream.Call         // built by the request's exchange before admission
	rd       upstream.Reader       // reads the answer for the client
	pass     upstream.PassReader   // rd when nothing is translated
	out      []byte                // a translating reader's output, reused per event
	later    error                 // an error that came with bytes still to relay
	clen     int64                 // a translated body's length; -1: the provider's
	events   *upstream.EventReader // streams
	buf      *[]byte               // non-stream: pooled read buffer
	first    []byte                // the held bytes: the first event(s), or the first body bytes
	held     []byte                // streams committing after several events: their bytes, back to back
	reads    chan eventRead        // a read started while holding that the relay must collect
	pending  bool                  // a goroutine's read is outstanding on reads
	tail     []byte                // non-stream: the body's last bytes, for its usage
	admitted time.Time
	fb       time.Duration // admission to the first event (stream) or response headers
	usage    upstream.Usage
	hasUsage bool
	usageErr error                   // why a usage the provider sent is not counted (*upstream.UsageError)
	probe    bool                    // holds its target's health probe
	unwatch  func() bool             // stops watching the target for turning cooling
	release  context.CancelCauseFunc // a hedged attempt's own context, released at close
	st       *upstream.Stitch        // a resumable stream's watch over what its client got; nil: resume off
	moved    bool                    // resumed on another candidate since the relay last asked (Resumed)
	// outEvents counts the stream's events that made client bytes: the
	// estimate of the output tokens of a stream cut before its usage
	// (cost.go).
	outEvents   int
	promptBytes int      // the request body's size, for the prompt estimate of the same
	tailRead    bool     // usage holds the usage of a body read whole (UsageSoFar)
	reasons     []string // why the answer ended, for a traced attempt's span (Finish)
}

// open sends the attempt's request and reads up to the commit point: the
// first event of a stream that is not a comment, or the first bytes of a
// body. nil means the attempt committed; nothing was written to the client
// either way. It moves the attempt from admitted through sending and
// holding to committed (or drained); on an error the caller releases it.
func (a *Attempt) open(parent context.Context) error {
	r, req, c := a.r, a.req, &a.req.Candidates[a.i]
	prov := c.Target.Provider
	if h := r.TestHook; h != nil {
		h("attempt")
	}
	a.to(stSending)
	a.promptBytes = len(a.call.Body)
	var firstByte, idle time.Duration
	if req.Stream {
		firstByte, idle = prov.FirstByte, prov.Idle
	}
	a.ctx, a.watch = watchdog.Start(parent, r.clock(), firstByte, idle)
	a.watch.Limit(prov.Total, upstream.ErrTotalTimeout)
	if h := c.Health; h != nil && req.Stream {
		// Others may find the target failing while this attempt waits for
		// its first event: it then fails over at once rather than wait
		// out its own timeout.
		watch := a.watch
		a.unwatch = context.AfterFunc(h.Cooled(), func() { watch.Abandon(health.ErrCooling) })
	}
	ep := prov.Endpoint
	a.call.Key, a.call.Auth, a.call.Extra, a.call.Defaults = c.Target.Key, ep.Auth, ep.Extra, ep.Defaults
	a.call.ClientHeader, a.call.Forward, a.call.Stream, a.call.Clock = req.Header, &ep.Forward, req.Stream, r.clock()
	a.propagate(parent, prov)
	send := prov.Sender
	if send == nil {
		send = r.Upstreams[prov.Name]
	}
	resp, err := send.Send(a.ctx, &a.call)
	if err != nil {
		var se *upstream.StatusError
		if errors.As(err, &se) && se.ClientFault() {
			req.Exchange.Relayed(ep, se) // relayed in the client's format
		}
		return cause(a.ctx, err)
	}
	a.to(stHolding)
	a.resp = resp
	a.rd = req.Exchange.Reader(ep, &a.pass)
	if !req.Stream {
		a.fb = r.now().Sub(a.admitted)
		return a.openBody()
	}
	a.hold = watchdog.NewHold(r.HoldMode, a.lease.ReleaseGlobal)
	a.hold.Headers()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return &upstream.ProtocolError{Err: errors.New("stream answered with Content-Type " + strconv.Quote(ct))}
	}
	a.events = upstream.NewEventReader(resp.Body)
	var space []byte // a continuation's whitespace, held until its first words are checked
	for {
		ev, comment, err := a.events.Next()
		if err == io.EOF {
			return &upstream.ProtocolError{Err: errors.New("stream ended before its first event")}
		}
		if err != nil {
			return a.readError(err)
		}
		if comment {
			continue // the client sees nothing until a candidate really starts
		}
		out, err := a.event(ev, false)
		if err != nil {
			return eventError(err)
		}
		if len(out) == 0 {
			// A translated event with nothing for the client (Anthropic's
			// message_start, ping): not a first byte.
			continue
		}
		if a.st != nil && a.st.Undecided() {
			// Only whitespace so far: were the words after it a repeat,
			// not a byte of this continuation may reach the client.
			space = append(space, out...)
			continue
		}
		if len(space) > 0 {
			out = append(space, out...)
		}
		if !a.watch.FirstByte() {
			if a.ctx.Err() != nil {
				return context.Cause(a.ctx) // abandoned: the target turned cooling
			}
			return watchdog.ErrFirstByteTimeout
		}
		a.stopWatching()
		a.fb = r.now().Sub(a.admitted)
		if prov.CommitEvents <= 1 || a.rd.Done() {
			a.first = out
			a.to(stCommitted)
			return nil
		}
		return a.holdEvents(out, prov)
	}
}

// event has the reader turn one provider event into client bytes. A
// pass-through reader returns ev itself; a translating one appends to the
// attempt's own buffer, which it keeps.
func (a *Attempt) event(ev []byte, committed bool) ([]byte, error) {
	out, err := a.rd.Event(a.out[:0], ev, committed)
	if a.rd != upstream.Reader(&a.pass) {
		a.out = out
	}
	if a.st != nil && err == nil {
		out, err = a.st.Event(out)
	}
	if len(out) > 0 {
		a.outEvents++
	}
	return out, err
}

// eventError is the error of an event read before the commit point: an
// error event fails over as an error object, anything else is the
// provider's protocol error.
func eventError(err error) error {
	var ee *upstream.EventError
	if errors.As(err, &ee) {
		return &StreamErrorObject{Data: ee.Data}
	}
	var pe *upstream.ProtocolError
	if errors.As(err, &pe) {
		return pe
	}
	return &upstream.ProtocolError{Err: err}
}

// eventRead is one event read by a goroutine while the attempt held events.
type eventRead struct {
	ev      []byte
	comment bool
	err     error
}

// holdEvents keeps reading a stream past its first event up to the
// provider's commit point: CommitEvents events (comments kept in place but
// not counted), [DONE], or CommitWithin after the first event. A stream that
// breaks or carries an error object before then fails over; nothing has
// been written to the client.
func (a *Attempt) holdEvents(first []byte, prov *Provider) error {
	a.held = append(a.held[:0], first...)
	var expired chan struct{}
	if prov.CommitWithin > 0 {
		// The read blocks, so the events are read on a goroutine and the
		// hold ends when the time is up, whatever is in flight: the relay
		// collects that read first (Next).
		expired = make(chan struct{})
		t := a.r.clock().AfterFunc(prov.CommitWithin, func() { close(expired) })
		defer t.Stop()
		a.reads = make(chan eventRead, 1)
	}
	for n := 1; n < prov.CommitEvents; {
		var r eventRead
		if expired == nil {
			r.ev, r.comment, r.err = a.events.Next()
		} else {
			a.pending = true
			go a.readEvent()
			select {
			case r = <-a.reads:
				a.pending = false
			case <-expired:
				a.first = a.held
				a.to(stCommitted)
				return nil
			}
		}
		if r.err == io.EOF {
			// An answer whole without its last event commits as it is;
			// any other stream that ended here was cut.
			out, err := a.rd.End(a.out[:0])
			if err != nil {
				return a.cutBeforeCommit(r.err)
			}
			a.held = append(a.held, out...)
			a.first = a.held
			a.to(stDrained) // End was asked for its bytes: Next only says io.EOF
			return nil
		}
		if r.err != nil {
			return a.cutBeforeCommit(r.err)
		}
		a.watch.Activity()
		out := r.ev
		if !r.comment {
			var err error
			if out, err = a.event(r.ev, false); err != nil {
				return eventError(err)
			}
			if len(out) > 0 {
				n++
			}
		} else if a.rd != upstream.Reader(&a.pass) {
			continue // a translated stream has no place for the provider's comments
		}
		a.held = append(a.held, out...)
		if a.rd.Done() {
			break
		}
	}
	a.first = a.held
	a.to(stCommitted)
	return nil
}

// readEvent reads one event for holdEvents; the attempt's owner collects it
// from a.reads.
func (a *Attempt) readEvent() {
	var r eventRead
	r.ev, r.comment, r.err = a.events.Next()
	a.reads <- r
}

// cutBeforeCommit is the error of a stream that ended or broke after its
// first event but before its commit point. The request's own end (client
// gone, deadline, shutdown) keeps its cause.
func (a *Attempt) cutBeforeCommit(err error) error {
	if err == io.EOF {
		return &StreamCutError{Err: errors.New("stream ended before its commit point")}
	}
	err = a.readError(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrShutdown) || errors.Is(err, ErrDeadline) ||
		errors.Is(err, upstream.ErrTotalTimeout) {
		return err
	}
	return &StreamCutError{Err: err}
}

var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// openBody reads a non-streaming answer before the commit point: whole
// when it ends within maxHeldBody, so that a body that breaks half-way
// still fails over and the answer's cost (its usage, at the end) is known
// before the headers go out (x-gateway-cost-usd). A larger body commits
// with its first maxHeldBody bytes and relays the rest as it comes.
func (a *Attempt) openBody() error {
	if a.rd.Whole() {
		return a.openWhole()
	}
	a.buf = bodyBufs.Get().(*[]byte)
	buf, n, empty := *a.buf, 0, 0
	for {
		if n == len(buf) {
			if n >= maxHeldBody {
				break
			}
			grown := make([]byte, 2*n)
			copy(grown, buf[:n])
			buf = grown
		}
		m, err := a.resp.Body.Read(buf[n:])
		n += m
		switch {
		case err == io.EOF:
			a.first = buf[:n]
			a.tail = keepTail(a.tail, a.first)
			a.to(stDrained)
			return nil
		case err != nil:
			return a.readError(err)
		case m == 0:
			// A read may return (0, nil); it gives up as bufio does
			// after maxEmptyReads reads without progress (a broken
			// body: fail over).
			if empty++; empty >= maxEmptyReads {
				return a.readError(io.ErrNoProgress)
			}
		default:
			empty = 0
		}
	}
	a.first = buf[:n]
	a.tail = keepTail(a.tail, a.first)
	a.to(stCommitted)
	return nil
}

// maxHeldBody bounds the bytes of a non-streaming answer held before the
// commit point (openBody).
const maxHeldBody = 1 << 20

// maxEmptyReads bounds the (0, nil) reads before a body's first bytes, as
// bufio's maxConsecutiveEmptyReads does.
const maxEmptyReads = 100

// openWhole reads a body to be translated: whole, bounded, before
// anything reaches the client, so a body that cannot be translated still
// fails over.
func (a *Attempt) openWhole() error {
	b, err := io.ReadAll(io.LimitReader(a.resp.Body, upstream.MaxWholeBody+1))
	if err != nil {
		return a.readError(err)
	}
	if len(b) > upstream.MaxWholeBody {
		return &upstream.ProtocolError{Err: errors.New("answer larger than 16 MiB to translate")}
	}
	out, err := a.rd.Body(b)
	if err != nil {
		return eventError(err)
	}
	a.first, a.clen = out, int64(len(out))
	a.to(stDrained)
	return nil
}

// readError turns a failed read of the upstream body into the attempt's
// error: a watchdog or total timeout, the request's own end (Classify tells
// them apart), or else a protocol error.
func (a *Attempt) readError(err error) error {
	if a.ctx.Err() != nil {
		return cause(a.ctx, err)
	}
	var pe *upstream.ProtocolError
	if !errors.As(err, &pe) {
		err = &upstream.ProtocolError{Err: err}
	}
	return err
}

// verdict tells the attempt's target how it went, giving back the health
// probe the attempt holds, if any. Each attempt owns its probe: attempts of
// a hedged request hold theirs side by side.
func (a *Attempt) verdict(v health.Verdict) {
	probe := a.probe
	a.probe = false
	if h := a.req.Candidates[a.i].Health; h != nil {
		h.Done(v, probe)
	}
}

// abort lets go of an attempt a panic ended and gives back its probe; the
// panic's handler settles its row (walk.panicked).
func (a *Attempt) abort() {
	if a.state.live() {
		a.to(stAborted)
	}
	a.close()
	a.verdict(health.Verdict{})
}

// settledAfterPanic closes an attempt abort released once the panic's
// handler settled the request.
func (a *Attempt) settledAfterPanic() {
	if a.state == stReleased {
		a.to(stClosed)
	}
}

// close lets go of everything the attempt holds and moves it to released;
// its owner settles its records next. An attempt that holds nothing (idle,
// released or closed) is left as it is.
func (a *Attempt) close() {
	switch a.state {
	case stIdle, stReleased, stClosed:
		return
	}
	a.to(stReleased)
	a.stopWatching()
	if a.events != nil {
		a.hold.End()
	}
	if a.watch != nil {
		a.watch.Stop()
	}
	if a.resp != nil {
		_ = a.resp.Body.Close()
	}
	if a.pending {
		// A read holdEvents left in flight ends now that the body is
		// closed; its goroutine must be done before the reader's buffer
		// goes back to the pool.
		<-a.reads
		a.pending = false
	}
	if a.events != nil {
		a.events.Close()
	}
	if a.release != nil {
		a.release(nil)
	}
	if a.buf != nil {
		bodyBufs.Put(a.buf)
	}
	a.r.release(a.lease)
}

func (a *Attempt) stopWatching() {
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch = nil
	}
}

// reset readies the attempt, holding candidate i's slots, for its try: idle
// or closed to admitted.
func (a *Attempt) reset(i int, lease *admission.Lease, admitted time.Time) {
	a.to(stAdmitted)
	r, req, tail, held, out := a.r, a.req, a.tail[:0], a.held[:0], a.out[:0]
	// The call was built before admission (walk.build): it stays.
	*a = Attempt{r: r, req: req, i: i, state: stAdmitted, lease: lease, admitted: admitted,
		tail: tail, held: held, out: out, call: a.call, clen: -1}
}

// cause replaces a bare cancellation error with why the context ended: a
// watchdog, the total timeout, or the request's end (the loop checks the
// latter).
func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if c := context.Cause(ctx); c != nil {
			return c
		}
	}
	return err
}

// usageTail is how much of a non-streaming body is kept to find its usage.
const usageTail = 4 << 10

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
