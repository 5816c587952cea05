package api

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/upstream"
)

// relay writes a committed attempt to the client and returns the request's
// outcome, in the steps of its body: commit (status, headers, the write
// deadline), the held bytes flushed alone, Sent, every next event or chunk
// written as it arrives, endRelay, Finish. This is the frame that lives as
// long as a stream, with the handler's beneath it: everything before the
// commit point has returned by now (candidates.Run), so it stays small by
// design, and every step that flushes is called from here, one frame deep
// (send, endRelay): a step function around them would grow the stack every
// open stream keeps (cmd/gateway's TestStreamStackBudget). Each event of a
// stream is flushed unless the provider's next event is already read
// (Buffered). Every write, of a stream or a body, is bounded by the write
// timeout and never runs past the attempt's end (its total, the request's
// deadline), so a client that stops reading cannot hold the attempt's slots
// longer than the upstream side could.
//
// The relay owns the attempt from its first statement: the handler calls it
// right after Run returned the attempt, and from then on any panic aborts
// the attempt (its slots released, its records settled) before it goes on.
func (s *Server) relay(w http.ResponseWriter, a *candidates.Attempt, tc *tokenCount, costInUsage bool) (out *candidates.Outcome) {
	defer abortOnPanic(a)
	rc := http.NewResponseController(w)
	stream := a.Stream()
	first := a.First()
	if costInUsage && !stream {
		first = bodyWithCost(w.Header(), a)
	}
	dl := s.commit(w, rc, a)
	if tc != nil && !stream {
		return a.Finish(s.sendCounted(w, rc, &dl, a, first, tc))
	}
	tc.beforeEnd(a, first)
	// The first event is flushed alone, whatever follows it: it is the
	// first token the user waits for.
	err := s.send(w, rc, &dl, first, stream)
	if err == nil {
		a.Sent()
		if h := s.opts.TestHook; h != nil && stream {
			h("streaming")
		}
	}
	held := false // written to the client's buffer, not flushed yet
	for err == nil {
		var b []byte
		if b, err = a.Next(); err != nil {
			break
		}
		if a.Resumed() {
			dl.rebase(a) // a cut stream continued: its new attempt's end bounds the writes
		}
		if costInUsage && stream {
			b = eventWithCost(a, b)
		}
		tc.beforeEnd(a, b)
		// Events the provider sent back to back go out in one write: the
		// flush waits only while the next event is already read. A client
		// with a token rate is counted (a call to the shared store) before
		// its stream's last event, and no event waits on that: its events
		// are flushed one by one.
		hold := stream && tc == nil && a.Buffered()
		if err = s.send(w, rc, &dl, b, stream && !hold); err == nil {
			held = hold
		}
	}
	return a.Finish(endRelay(rc, &dl, err, held || (!stream && err == io.EOF)))
}

// abortOnPanic aborts the attempt of a relay that panics, then lets the
// panic go on to the recoverer.
func abortOnPanic(a *candidates.Attempt) {
	if v := recover(); v != nil {
		a.Abort()
		panic(v)
	}
}

// commit starts the client's response at the commit point: the upstream's
// status and headers, and the deadline that bounds every write.
func (s *Server) commit(w http.ResponseWriter, rc *http.ResponseController, a *candidates.Attempt) writeDeadline {
	if h := s.opts.TestHook; h != nil {
		h("committed")
	}
	h := w.Header()
	n := h.Get("Content-Length") // set by bodyWithCost, for the body it changed
	commitHeaders(h, a)
	if n != "" {
		h.Set("Content-Length", n)
	}
	w.WriteHeader(a.Status())
	dl := writeDeadline{rc: rc, d: s.opts.StreamWriteTimeout}
	if left, ok := a.Remaining(); ok {
		dl.end = time.Now().Add(left + endGrace)
	}
	return dl
}

// endGrace is how far past the attempt's end a write may still run. The
// upstream side is cut at the end itself; the writes stop a little later,
// so that an event read just before the cut, written just after it, still
// reaches a client that reads, and the cut is what the relay sees next (to
// resume the stream or end it with its error frame), not a write that
// failed at the same instant, which would leave the connection unusable.
// A client that stops reading still frees the slots by end + endGrace.
const endGrace = 250 * time.Millisecond

// endRelay is how the relay ended, err, once what is written reached the
// client: the stream ended or broke behind a held event (flush), and a whole
// body is flushed too, within the deadline, so that the outcome says
// whether the client took it, not net/http's flush after the handler. A
// complete answer lifts the attempt's end from the writes that follow.
func endRelay(rc *http.ResponseController, dl *writeDeadline, err error, flush bool) error {
	if flush {
		if ferr := rc.Flush(); ferr != nil && (err == nil || err == io.EOF) {
			err = &candidates.ClientWriteError{Err: ferr}
		}
	}
	if err == io.EOF {
		dl.answered()
	}
	return err
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
	if usd, ok := a.Cost(); ok {
		h.Set(HeaderCost, FormatUSD(usd))
	}
}

// HeaderCost carries a non-stream answer's cost in USD (docs/cost.md).
const HeaderCost = "X-Gateway-Cost-Usd"

// FormatUSD writes an amount of USD as a plain decimal, never in exponent
// form (0.000123, not 1.23e-04), with the digits that tell it apart from
// its neighbours: what the record's numeric column holds.
func FormatUSD(usd float64) string { return strconv.FormatFloat(usd, 'f', -1, 64) }

// writeDeadline bounds each write to the client by the write timeout d and
// every write by end, the attempt's end (plus endGrace). It moves the connection's deadline
// only when less than half the timeout is left, so a write is bounded by
// between half the timeout and all of it: setting a deadline re-arms a
// runtime timer under a lock, and doing it for every event cost about 3% of
// a stream's CPU. Once the deadline is end it never moves again.
type writeDeadline struct {
	rc    *http.ResponseController
	d     time.Duration // the write timeout; 0: none
	end   time.Time     // no write goes past it; zero: none
	set   time.Time     // the deadline on the connection; zero: none yet
	final bool          // set is end (or nothing bounds the writes): done moving
}

func (dl *writeDeadline) extend() {
	if dl.final {
		return
	}
	now := time.Now()
	if dl.set.Sub(now) >= dl.d/2 {
		return
	}
	next := now.Add(dl.d)
	if dl.d <= 0 || (!dl.end.IsZero() && !next.Before(dl.end)) {
		next, dl.final = dl.end, true
		if next.IsZero() {
			return
		}
	}
	dl.set = next
	_ = dl.rc.SetWriteDeadline(next)
}

// rebase bounds the writes by a's end afresh: a resumed stream's attempt
// is another, with its own timeouts.total.
func (dl *writeDeadline) rebase(a *candidates.Attempt) {
	dl.end, dl.set, dl.final = time.Time{}, time.Time{}, false
	if left, ok := a.Remaining(); ok {
		dl.end = time.Now().Add(left + endGrace)
	}
}

// answered lifts the attempt's end from the writes that follow a complete
// answer (net/http ends a chunked body after the handler returns): an answer
// that ended just before its attempt's end must not be cut at the last
// bytes. They keep the write timeout.
func (dl *writeDeadline) answered() {
	if !dl.final || dl.end.IsZero() {
		return // the deadline is the write timeout's already, or there is none
	}
	var next time.Time
	if dl.d > 0 {
		next = time.Now().Add(dl.d)
	}
	_ = dl.rc.SetWriteDeadline(next)
}

// send writes b to the client within dl and flushes it when flush is set.
func (s *Server) send(w http.ResponseWriter, rc *http.ResponseController, dl *writeDeadline, b []byte, flush bool) error {
	dl.extend()
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
