package candidates

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/upstream"
)

// The committed attempt, the relay's from Run's return on: what it tells
// the client (Status, Header, First, Next), what it tells the records (Sent,
// Finish, Abort, through its settler) and how long it may go on (Remaining).

// settler settles a committed attempt's records and its request's. The walk
// that committed the attempt hands itself over as one at the commit point
// (walk.commit), so that after Run returns the attempt reaches nothing of
// the loop but these.
type settler interface {
	// sent records that the attempt's first bytes reached the client.
	sent(a *Attempt)
	// ended settles the released attempt's row and the request's, with
	// how the relay ended (nil: a complete answer), and returns the outcome.
	ended(a *Attempt, err error) *Outcome
	// panicked settles a request whose relay panicked.
	panicked()
	// spentUSD is what the request's attempts settled so far cost; ok
	// false when one's cost is unknown (cost.go).
	spentUSD() (usd float64, ok bool)
	// resume continues the attempt's stream, cut by err after its commit
	// point, on the next candidate, or declines (resume.go).
	resume(a *Attempt, err error) ([]byte, resumeResult)
}

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
	if a.state == stCommitted {
		a.to(stRelaying) // a body read whole at once stays drained
	}
	a.s.sent(a)
	// The target answered: that is the success health counts, even if a
	// long stream breaks later (failures after commit never count).
	if h := a.req.Candidates[a.i].Health; h != nil {
		h.FirstByte(a.fb)
	}
	a.verdict(health.Verdict{Success: true})
	if a.Stream() {
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
	if a.state == stDrained {
		return nil, io.EOF
	}
	n, err := a.resp.Body.Read(*a.buf)
	if err == io.EOF {
		a.to(stDrained)
	}
	if n > 0 {
		b := (*a.buf)[:n]
		a.tail = keepTail(a.tail, b)
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
				if a.state == stDrained {
					return nil, io.EOF
				}
				a.to(stDrained)
				if !a.rd.Done() {
					// Ended before its last event: a cut (the reader's
					// error) unless the answer is whole without it.
					b, err := a.rd.End(a.out[:0])
					if err != nil {
						if a.st != nil {
							if b, r := a.resumed(err); r != resumeDeclined {
								return b, resultErr(r, err)
							}
						}
						return nil, err
					}
					if len(b) > 0 {
						a.out = b
						return b, nil
					}
				}
				return nil, io.EOF
			}
			if a.rd.Done() {
				// The answer's last event went out already: a read that
				// breaks after it (the client hanging up on the whole
				// answer cancels it, or the provider drops the
				// connection) ends a complete answer, not a cut one.
				a.to(stDrained)
				return nil, io.EOF
			}
			err = a.readError(err)
			if a.st != nil {
				if b, r := a.resumed(err); r != resumeDeclined {
					return b, resultErr(r, err)
				}
			}
			return nil, err
		}
		a.watch.Activity()
		out, err := a.event(ev, true)
		if err != nil && a.st != nil {
			// The cut's own error event is not relayed to a stream that
			// goes on.
			if b, r := a.resumed(err); r != resumeDeclined {
				return b, resultErr(r, &upstream.ProtocolError{Err: err})
			}
		}
		if err != nil {
			// After the commit point an error event ends a translated
			// stream; what came before it in ev goes out first. A
			// pass-through stream relays the event itself, provider text
			// that may echo the key.
			if len(out) == 0 {
				return nil, &upstream.ProtocolError{Err: err}
			}
			out = a.r.Redact.RedactBytes(out)
			a.later = &upstream.ProtocolError{Err: err}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
}

// resultErr is what Next returns with a resumed stream's bytes: nothing
// when it goes on, the cut's error when the resume failed (Finish then
// returns the outcome it settled).
func resultErr(r resumeResult, err error) error {
	if r == resumeOK {
		return nil
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
	case a.events != nil && a.st != nil:
		u, ok := a.rd.Usage()
		return a.st.Sum(u, ok) // a resumed stream's parts, for the client's token rate too
	case a.events != nil || a.clen >= 0:
		return a.rd.Usage()
	case a.tailRead:
		return a.usage, a.hasUsage
	case a.state == stDrained:
		// The whole body was read before the commit point: its usage is
		// final, read once for the cost header and kept for Finish.
		a.usage, a.hasUsage = a.rd.TailUsage(a.tail)
		a.tailRead = true
		return a.usage, a.hasUsage
	default:
		return a.rd.TailUsage(a.tail)
	}
}

// Resumed reports, once, that the stream went on on another candidate
// since the last call (resume.go): the relay then bounds its writes by the
// new attempt's Remaining.
func (a *Attempt) Resumed() bool {
	r := a.moved
	a.moved = false
	return r
}

// Remaining is what is left of the committed attempt's time: of its
// provider's timeouts.total, counted from admission as the watchdog counts
// it, and of the request's deadline, whichever ends first; ok is false when
// neither bounds the attempt. The relay bounds its writes to the client by
// it, so that a client that stops reading cannot hold the attempt's slots
// past the moment the upstream side would have ended it anyway.
func (a *Attempt) Remaining() (d time.Duration, ok bool) {
	if total := a.req.Candidates[a.i].Target.Provider.Total; total > 0 {
		d, ok = a.admitted.Add(total).Sub(a.r.now()), true
	}
	if dl := a.req.Deadline; !dl.IsZero() {
		// The deadline was stamped on the loop's clock (the handler's
		// receipt): measure what is left on the same clock.
		if left := dl.Sub(a.r.now()); !ok || left < d {
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
// returns the same outcome. It moves the attempt to released, then closed.
func (a *Attempt) Finish(err error) *Outcome {
	if a.state == stClosed {
		return a.outcome
	}
	if err == io.EOF {
		err = nil
	}
	switch {
	case a.rd == nil:
	case a.events != nil || a.clen >= 0:
		a.usage, a.hasUsage = a.rd.Usage()
	case a.tailRead: // read whole before the commit point (UsageSoFar)
	case err == nil:
		a.usage, a.hasUsage = a.rd.TailUsage(a.tail)
	}
	if a.rd != nil && !a.hasUsage {
		a.usageErr = a.rd.UsageError()
	}
	if a.rd != nil && a.r.Trace != nil {
		// Before close, which gives the head's buffer back.
		a.reasons = a.rd.FinishReasons(a.first, a.tail)
	}
	a.close()
	a.outcome = a.s.ended(a, err)
	a.to(stClosed)
	return a.outcome
}

// relayedError reports whether err is the provider's own error event,
// relayed to the client as it came.
func relayedError(err error) bool {
	ee := (*upstream.EventError)(nil)
	return errors.As(err, &ee) && ee.Relayed
}

// Abort ends a committed attempt whose relay (or Finish) panicked: the
// slots are released and, unless the outcome was already recorded, the
// candidate fails with gateway_internal_error and the request with 500. The
// caller re-panics.
func (a *Attempt) Abort() {
	if a.state == stClosed {
		if a.outcome == nil {
			// Between a cut attempt settled and its continuation
			// admitted (resume.go): nothing is held, the request is not
			// settled yet.
			a.s.panicked()
		}
		return // else Finish settled it before the panic
	}
	a.abort()
	a.s.panicked()
	a.to(stClosed)
}
