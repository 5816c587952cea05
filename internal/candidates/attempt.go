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
	"github.com/llmgw/gateway/internal/report"
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
// point. Before the commit point the loop owns it and fails over on any
// failure; Run hands out the one attempt that committed, and the caller
// relays it (First, Sent, Next) and ends it with Finish, which settles the
// records. Its buffers are reused by the next attempt of the same request.
type Attempt struct {
	w *walk
	i int // candidate index

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
	ended    bool                  // the body ended; End was asked for its bytes
	clen     int64                 // a translated body's length; -1: the provider's
	events   *upstream.EventReader // streams
	buf      *[]byte               // non-stream: pooled read buffer
	first    []byte                // the held bytes: the first event(s), or the first body bytes
	held     []byte                // streams committing after several events: their bytes, back to back
	reads    chan eventRead        // a read started while holding that the relay must collect
	pending  bool                  // a read is outstanding on reads
	eof      bool                  // non-stream: the body ended with the first read
	tail     []byte                // non-stream: the body's last bytes, for its usage
	admitted time.Time
	fb       time.Duration // admission to the first event (stream) or response headers
	usage    upstream.Usage
	hasUsage bool
	usageErr error                   // why a usage the provider sent is not counted (*upstream.UsageError)
	probe    bool                    // holds its target's health probe
	unwatch  func() bool             // stops watching the target for turning cooling
	release  context.CancelCauseFunc // a hedged attempt's own context, released at close
	finished bool                    // closed: slots released
	settled  bool                    // the request's outcome is recorded
}

// open sends the attempt's request and reads up to the commit point: the
// first event of a stream that is not a comment, or the first bytes of a
// body. nil means the attempt committed; nothing was written to the client
// either way.
func (a *Attempt) open(parent context.Context) error {
	w, c := a.w, &a.w.req.Candidates[a.i]
	prov := c.Target.Provider
	if h := w.r.TestHook; h != nil {
		h("attempt")
	}
	var firstByte, idle time.Duration
	if w.req.Stream {
		firstByte, idle = prov.FirstByte, prov.Idle
	}
	a.ctx, a.watch = watchdog.Start(parent, w.r.clock(), firstByte, idle)
	a.watch.Limit(prov.Total, upstream.ErrTotalTimeout)
	if h := c.Target.Health; h != nil && w.req.Stream {
		// Others may find the target failing while this attempt waits for
		// its first event: it then fails over at once rather than wait
		// out its own timeout.
		watch := a.watch
		a.unwatch = context.AfterFunc(h.Cooled(), func() { watch.Abandon(health.ErrCooling) })
	}
	ep := prov.Endpoint
	a.call.Key, a.call.Auth, a.call.Extra, a.call.Defaults = c.Target.Key, ep.Auth, ep.Extra, ep.Defaults
	a.call.ClientHeader, a.call.Forward, a.call.Stream, a.call.Clock = w.req.Header, &ep.Forward, w.req.Stream, w.r.clock()
	send := prov.Sender
	if send == nil {
		send = w.r.Upstreams[prov.Name]
	}
	resp, err := send.Send(a.ctx, &a.call)
	if err != nil {
		var se *upstream.StatusError
		if errors.As(err, &se) && se.ClientFault() {
			w.req.Exchange.Relayed(ep, se) // relayed in the client's format
		}
		return cause(a.ctx, err)
	}
	a.resp = resp
	a.rd = w.req.Exchange.Reader(ep, &a.pass)
	if !w.req.Stream {
		a.fb = w.r.now().Sub(a.admitted)
		return a.openBody()
	}
	a.hold = watchdog.NewHold(w.r.HoldMode, a.lease.ReleaseGlobal)
	a.hold.Headers()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return &upstream.ProtocolError{Err: errors.New("stream answered with Content-Type " + strconv.Quote(ct))}
	}
	a.events = upstream.NewEventReader(resp.Body)
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
		if !a.watch.FirstByte() {
			if a.ctx.Err() != nil {
				return context.Cause(a.ctx) // abandoned: the target turned cooling
			}
			return watchdog.ErrFirstByteTimeout
		}
		a.stopWatching()
		a.fb = w.r.now().Sub(a.admitted)
		if prov.CommitEvents <= 1 || a.rd.Done() {
			a.first = out
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
		t := a.w.r.clock().AfterFunc(prov.CommitWithin, func() { close(expired) })
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
			a.ended = true
			a.held = append(a.held, out...)
			break
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

// openBody reads a non-streaming answer's first bytes, so that a body that
// fails at once can still fail over.
func (a *Attempt) openBody() error {
	if a.rd.Whole() {
		return a.openWhole()
	}
	a.buf = bodyBufs.Get().(*[]byte)
	// A read may return (0, nil); the attempt has not committed until bytes
	// or the end came, so it reads on, giving up as bufio does after
	// maxEmptyReads reads without progress (a broken body: fail over).
	for range maxEmptyReads {
		n, err := a.resp.Body.Read(*a.buf)
		switch {
		case n > 0:
			a.first = (*a.buf)[:n]
			a.tail = keepTail(a.tail, a.first)
			a.eof = err == io.EOF
			return nil
		case err == io.EOF:
			a.first, a.eof = (*a.buf)[:0], true
			return nil
		case err != nil:
			return a.readError(err)
		}
	}
	return a.readError(io.ErrNoProgress)
}

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
	a.first, a.eof, a.clen = out, true, int64(len(out))
	return nil
}

// committed reports whether the attempt passed its commit point.
func (a *Attempt) committed() bool { return a.first != nil || a.eof }

// Status is the upstream's status code of the committed answer.
func (a *Attempt) Status() int { return a.resp.StatusCode }

// Header is the upstream's response header of the committed answer.
func (a *Attempt) Header() http.Header { return a.resp.Header }

// ContentLength is the answer's Content-Length, -1 when unknown: a
// translated body's own, else the upstream's.
func (a *Attempt) ContentLength() int64 {
	if a.clen >= 0 {
		return a.clen
	}
	return a.resp.ContentLength
}

// Stream reports whether the answer is an event stream.
func (a *Attempt) Stream() bool { return a.events != nil }

// First returns the bytes held at the commit point: the first event of a
// stream (a complete SSE event), or the first bytes of a body. Valid until
// the next call to Next.
func (a *Attempt) First() []byte { return a.first }

// Buffered reports whether the next call to Next returns without waiting
// for the provider: a pass-through stream's next event is already read. The
// relay then writes that event behind the one before it and flushes both
// at once. A translated event may turn into nothing (a ping) and send Next
// to read again, so a translated stream reports false: each of its outputs
// is flushed as before.
func (a *Attempt) Buffered() bool {
	return a.events != nil && !a.pending && a.rd == upstream.Reader(&a.pass) && a.events.Buffered()
}

// Sent tells the attempt its first bytes reached the client: the stream is
// recorded streaming, health learns of the success and the first-byte
// time, and the hold mode may release the execution slot.
func (a *Attempt) Sent() {
	w, i := a.w, a.i
	w.sent = w.r.now()
	// The target answered: that is the success health counts, even if a
	// long stream breaks later (failures after commit never count).
	if h := w.req.Candidates[i].Target.Health; h != nil {
		h.FirstByte(a.fb)
	}
	a.verdict(health.Verdict{Success: true})
	if a.Stream() {
		row := &w.rows[i]
		row.Status, row.FirstByte = report.CandidateStreaming, a.fb
		w.r.Record.RecordCandidate(*row)
		a.hold.FirstBody()
	}
}

// Next returns the next bytes to relay: the next event of a stream
// (comments included), or the next chunk of a body. io.EOF is a complete
// answer; any other error ends it (pass it to Finish). The bytes are valid
// until the next call.
func (a *Attempt) Next() ([]byte, error) {
	if a.events != nil {
		return a.nextEvent()
	}
	if a.eof {
		return nil, io.EOF
	}
	n, err := a.resp.Body.Read(*a.buf)
	if n > 0 {
		b := (*a.buf)[:n]
		a.tail = keepTail(a.tail, b)
		a.eof = err == io.EOF
		return b, nil
	}
	if err == io.EOF {
		return nil, io.EOF
	}
	if err == nil {
		return (*a.buf)[:0], nil
	}
	return nil, a.readError(err)
}

// nextEvent returns the next bytes of a stream for the client: a
// pass-through event as read, or what a translated one makes (events that
// make nothing are skipped).
func (a *Attempt) nextEvent() ([]byte, error) {
	for {
		if err := a.later; err != nil {
			a.later = nil
			return nil, err
		}
		var ev []byte
		var err error
		if a.pending {
			// The read holdEvents had in flight when its time was up.
			r := <-a.reads
			a.pending = false
			ev, err = r.ev, r.err
		} else {
			ev, _, err = a.events.Next()
		}
		if err != nil {
			if err == io.EOF {
				if !a.ended && !a.rd.Done() {
					// Ended before its last event: a cut (the reader's
					// error) unless the answer is whole without it.
					a.ended = true
					b, err := a.rd.End(a.out[:0])
					if err != nil {
						return nil, err
					}
					if len(b) > 0 {
						a.out = b
						return b, nil
					}
				}
				return nil, io.EOF
			}
			return nil, a.readError(err)
		}
		a.watch.Activity()
		out, err := a.event(ev, true)
		if err != nil {
			// After the commit point an error event ends a translated
			// stream; what came before it in ev goes out first. A
			// pass-through stream relays the event itself, provider text
			// that may echo the key.
			if len(out) == 0 {
				return nil, &upstream.ProtocolError{Err: err}
			}
			out = a.w.r.Redact.RedactBytes(out)
			a.later = &upstream.ProtocolError{Err: err}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
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

// UsageSoFar is the usage read so far: a stream's once its usage event
// went by, a body's once it was read whole. The caller may count it before
// the client sees the end of the answer (a client's token rate).
func (a *Attempt) UsageSoFar() (upstream.Usage, bool) {
	switch {
	case a.rd == nil:
		return upstream.Usage{}, false
	case a.events != nil || a.clen >= 0:
		return a.rd.Usage()
	default:
		return a.rd.TailUsage(a.tail)
	}
}

// Remaining is what is left of the committed attempt's time: of its
// provider's timeouts.total, counted from admission as the watchdog counts
// it, and of the request's deadline, whichever ends first; ok is false when
// neither bounds the attempt. The relay bounds its writes to the client by
// it, so that a client that stops reading cannot hold the attempt's slots
// past the moment the upstream side would have ended it anyway.
func (a *Attempt) Remaining() (d time.Duration, ok bool) {
	w := a.w
	if total := w.req.Candidates[a.i].Target.Provider.Total; total > 0 {
		d, ok = a.admitted.Add(total).Sub(w.r.now()), true
	}
	if dl := w.req.Deadline; !dl.IsZero() {
		// The deadline was stamped on the loop's clock (the handler's
		// receipt): measure what is left on the same clock.
		if left := dl.Sub(w.r.now()); !ok || left < d {
			d, ok = left, true
		}
	}
	return d, ok
}

// Finish ends the committed attempt with how its relay ended: nil or io.EOF
// for a complete answer, else the error (a *ClientWriteError when the client
// could not be written to). It releases the attempt's slots, settles the
// records and returns the request's outcome. The caller answers the client
// only after Finish: the outcome is decided from what happened, before
// anything the client does in reaction can change it. Calling it again
// returns the same outcome.
func (a *Attempt) Finish(err error) *Outcome {
	w := a.w
	if a.settled {
		return &w.out
	}
	if err == io.EOF {
		err = nil
	}
	switch {
	case a.rd == nil:
	case a.events != nil || a.clen >= 0:
		a.usage, a.hasUsage = a.rd.Usage()
	case err == nil:
		a.usage, a.hasUsage = a.rd.TailUsage(a.tail)
	}
	if a.rd != nil && !a.hasUsage {
		a.usageErr = a.rd.UsageError()
	}
	a.close()
	w.end(a, err)
	if ee := (*upstream.EventError)(nil); errors.As(err, &ee) && ee.Relayed {
		w.out.ErrorSent = true
	}
	w.finishRequest()
	a.settled = true
	return &w.out
}

// verdict tells the attempt's target how it went, giving back the health
// probe the attempt holds, if any. Each attempt owns its probe: attempts of
// a hedged request hold theirs side by side.
func (a *Attempt) verdict(v health.Verdict) {
	probe := a.probe
	a.probe = false
	if h := a.w.req.Candidates[a.i].Target.Health; h != nil {
		h.Done(v, probe)
	}
}

// Abort ends a committed attempt whose relay (or Finish) panicked: the
// slots are released and, unless the outcome was already recorded, the
// candidate fails with gateway_internal_error and the request with 500. The
// caller re-panics.
func (a *Attempt) Abort() {
	a.close()
	a.verdict(health.Verdict{})
	if !a.settled {
		a.settled = true
		a.w.panicked()
	}
}

// close lets go of everything the attempt holds. Safe to call again.
func (a *Attempt) close() {
	if a.finished || a.lease == nil {
		return
	}
	a.finished = true
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
	a.w.release(a.lease)
}

func (a *Attempt) stopWatching() {
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch = nil
	}
}

// reset readies the attempt for candidate i's try.
func (a *Attempt) reset(i int, lease *admission.Lease, admitted time.Time) {
	w, tail, held, out := a.w, a.tail[:0], a.held[:0], a.out[:0]
	// The call was built before admission (Runner.build): it stays.
	*a = Attempt{w: w, i: i, lease: lease, admitted: admitted, tail: tail, held: held, out: out, call: a.call, clen: -1}
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
