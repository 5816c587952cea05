package candidates

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
)

// ErrHedgeLost is the cause that cancels an attempt once another attempt of
// the same request settled it (committed first, or ended it otherwise).
var ErrHedgeLost = errors.New("another attempt of the request settled it first")

// Hedge results in gateway_hedges_total: a hedge attempt (one started by the
// hedge timer, not by a failure) that committed first, that lost to another
// attempt, or that failed by itself.
const (
	HedgeWon    = "won"
	HedgeLost   = "lost"
	HedgeFailed = "failed"
)

// flight is one attempt of a hedged request, running on its own goroutine
// until it commits or fails. Only the walk's goroutine reads the records.
type flight struct {
	a      *Attempt
	cancel context.CancelCauseFunc
	hedge  bool // started by the hedge timer
}

// landing is how a flight ended before or at its commit point.
type landing struct {
	f        *flight
	queued   time.Time // when it asked for its slots
	admitErr error     // no slots: the admission error
	refused  error     // the request cannot be built for this provider: no attempt
	err      error     // the attempt's error; nil: it committed
	panicked any       // a panic on the flight's goroutine, re-raised by the walk
}

// runHedged is run for a route with hedging: attempts run on goroutines so
// that, when the running one has not committed after the hedge delay, the
// next candidate starts too. The first to commit wins; the others are
// cancelled (their upstream requests end) and recorded cancelled, 499,
// hedge_lost. A failure still fails over to the next candidate. Every record
// is written from this goroutine until the request is settled; after that a
// loser settles its own row and slots on its own goroutine (settled), so the
// winner's first byte never waits for a loser's clean-up.
func (w *walk) runHedged(ctx context.Context) (committed bool) {
	h := &hedging{w: w, ctx: ctx, landed: make(chan landing, len(w.req.Candidates)), fired: make(chan int, 1)}
	w.hedge = h
	defer h.stopTimer()
	for {
		if len(h.flying) == 0 && !h.launch(false) {
			break
		}
		select {
		case l := <-h.landed:
			if done := h.land(l); done {
				return w.winner != nil
			}
		case gen := <-h.fired:
			if gen == h.gen && len(h.flying) <= w.req.Hedge.Max {
				h.launch(true)
			}
		}
	}
	if ctx.Err() != nil {
		// The request ended while nothing was in flight.
		w.stop(h.next, w.clientGone(ctx))
		return false
	}
	// Nothing left to start: the sequential walk's end applies.
	if i := w.coolest(); i >= 0 {
		w.probe = w.req.Candidates[i].Health.Force()
		if w.attempt(ctx, i) {
			if w.att.state.committed() {
				w.commit(&w.att)
			}
			return w.winner != nil
		}
	}
	w.exhausted()
	return false
}

// hedging is the state of one hedged walk.
type hedging struct {
	w       *walk
	ctx     context.Context
	landed  chan landing
	flying  []*flight
	landing *flight // the flight land is handling, for abort
	next    int     // the next candidate to consider

	stop  func() bool
	gen   int // the hedge timer's generation; a stale firing is ignored
	fired chan int

	mu        sync.Mutex
	settled   bool  // the request is settled: a flight that lands settles itself as lost
	lostSpent spent // what the lost flights the providers billed cost, under mu

	// losing counts the flights cancelled when the request was settled
	// until each has settled itself as lost: the request's cost waits for
	// their bills (walk.spentUSD).
	losing sync.WaitGroup
}

// launch starts the next candidate that may be tried, on its own goroutine,
// and arms the hedge timer for it. It reports false when none is left.
func (h *hedging) launch(hedge bool) bool {
	w := h.w
	for ; h.next < len(w.req.Candidates); h.next++ {
		i := h.next
		if w.rows[i].Status != report.CandidateAvailable || h.ctx.Err() != nil {
			if h.ctx.Err() != nil {
				return false
			}
			continue
		}
		if w.cooling(i) || w.overBudget(i) {
			continue
		}
		h.next++
		h.start(i, hedge)
		return true
	}
	return false
}

func (h *hedging) start(i int, hedge bool) {
	w := h.w
	actx, cancel := context.WithCancelCause(h.ctx)
	f := &flight{a: &Attempt{r: w.r, req: w.req, i: i, release: cancel}, cancel: cancel, hedge: hedge}
	if err := w.build(f.a, i); err != nil {
		// Built on this goroutine (the exchange is not shared); a refusal
		// lands at once, without an attempt. It says nothing of the
		// target: a probe Check handed out goes back now, before a hedge
		// started meanwhile could take w.probe for its own candidate.
		w.healthDone(i, health.Verdict{})
		w.current = i
		h.flying = append(h.flying, f)
		h.landed <- landing{f: f, refused: err}
		return
	}
	w.starting(i)
	// No longer available: a request that ends meanwhile must not mark it
	// unused (it did call, or queue for, its provider). The pending record
	// itself is written when the flight lands with its slots.
	w.rows[i].Status = report.CandidatePending
	w.traceQueued(i, w.r.now(), hedge)
	probe := w.probe
	w.probe = false
	h.flying = append(h.flying, f)
	h.w.r.flights.Go(func() { h.fly(actx, f, probe) })
	h.arm(i)
}

// fly runs on the flight's goroutine: admission, then the attempt up to its
// commit point. It touches nothing of the walk but its own attempt.
func (h *hedging) fly(ctx context.Context, f *flight, probe bool) {
	l := landing{f: f, queued: h.w.r.now()}
	defer func() {
		if v := recover(); v != nil {
			l.panicked = v
			f.a.abort() // its slots, if it had them; the walk re-raises the panic
		}
		h.hand(l)
	}()
	var dims [2]admission.Dimension
	lease, err := h.w.r.Admit.Acquire(ctx, h.w.admission(f.a.i, &dims))
	f.a.probe = probe
	if err != nil {
		l.admitErr = err
		return
	}
	release := f.a.release
	f.a.reset(f.a.i, lease, h.w.r.now())
	f.a.probe, f.a.release = probe, release
	l.err = f.a.open(ctx)
}

// hand gives the walk a flight's landing while the walk still races its
// flights. Once the request is settled nobody reads landed any more: the
// flight settles itself as lost, here on its own goroutine.
func (h *hedging) hand(l landing) {
	h.mu.Lock()
	settled := h.settled
	if !settled {
		h.landed <- l // buffered for every candidate: never blocks
	}
	h.mu.Unlock()
	if settled {
		h.settleLost(l)
	}
}

// settleLost runs lost off the walk's goroutine. Nobody is left to re-raise
// a panic there (the request may be over): it is logged with its stack, and
// the flight's slots and context are let go all the same.
func (h *hedging) settleLost(l landing) {
	defer h.losing.Done()
	defer func() {
		if v := recover(); v != nil {
			l.f.a.close()
			l.f.cancel(nil)
			h.w.r.log().Error("panic while settling a lost hedge attempt", "request_id", h.w.req.ID,
				"provider", h.w.req.Candidates[l.f.a.i].Target.Provider.Name, "panic", v, "stack", string(debug.Stack()))
		}
	}()
	h.lost(l)
}

// land handles a flight that committed or failed; it reports whether the
// request is settled (committed, or ended).
func (h *hedging) land(l landing) (done bool) {
	w, f := h.w, l.f
	h.remove(f)
	h.landing = f
	w.current = f.a.i
	if l.panicked != nil {
		panic(l.panicked) // recordPanic releases this flight and the others
	}
	if l.refused != nil {
		f.cancel(nil)
		done = w.apply(f.a.i, Classify(l.refused, false, nil), false)
		h.landing = nil
		if done {
			h.cancelAll()
		}
		return done
	}
	if l.admitErr != nil {
		f.cancel(nil)                         // no attempt to close: release the flight's context here
		w.probe, f.a.probe = f.a.probe, false // admissionFailed gives it back
		// It never got its slots: as in a sequential walk, a request that
		// ends here leaves it unused, else admissionFailed settles it.
		w.rows[f.a.i].Status = report.CandidateAvailable
		if w.r.Observe != nil {
			w.r.Observe.AdmissionWait(&w.req.Candidates[f.a.i], w.r.now().Sub(l.queued), l.admitErr)
		}
		done = w.admissionFailed(h.ctx, f.a.i, l.queued, l.admitErr)
	} else {
		w.begun(f.a, l.queued)
		if l.err == nil {
			w.commit(f.a)
			h.observe(f, HedgeWon)
			done = true
		} else {
			f.a.close()
			h.observe(f, HedgeFailed)
			done = w.end(f.a, l.err, false)
			f.a.to(stClosed)
		}
	}
	h.landing = nil
	if done {
		h.cancelAll()
	}
	return done
}

// abort lets go of every flight after a panic on the walk's goroutine: the
// one being handled (the walk records it as the panic's candidate) and
// those still running, cancelled, each recording itself as lost once its
// goroutine is done.
func (h *hedging) abort() {
	if a := h.w.winner; a != nil {
		a.abort() // the panic came after it won, before Run returned it
	}
	if f := h.landing; f != nil {
		f.a.abort()
		f.cancel(nil)
	}
	h.cancelAll()
}

// settledAfterPanic closes the attempts abort released, once the walk
// settled the request.
func (h *hedging) settledAfterPanic() {
	if a := h.w.winner; a != nil {
		a.settledAfterPanic()
	}
	if f := h.landing; f != nil {
		h.landing = nil
		f.a.settledAfterPanic()
	}
}

// cancelAll ends every flight still running, without waiting for any:
// each records itself as lost to the attempt that settled the request, and
// lets go of its slots, on its own goroutine (Runner.Wait waits for them).
// Flights that landed before the request was settled have no goroutine
// left; each of those is settled on a new one, counted the same way.
func (h *hedging) cancelAll() {
	// Counted before settled is set: from then on a flight that lands
	// settles itself, and its Done must find its Add.
	h.losing.Add(len(h.flying))
	h.mu.Lock()
	h.settled = true
	h.mu.Unlock()
	for _, f := range h.flying {
		f.cancel(ErrHedgeLost)
	}
	h.flying = nil
	for {
		select {
		case l := <-h.landed:
			h.w.r.flights.Go(func() { h.settleLost(l) })
		default:
			return
		}
	}
}

// lost records a flight cancelled because another attempt settled the
// request. A flight that committed all the same lets go of its response.
// It runs on the flight's goroutine while the request goes on (the winner
// relaying on the walk's): it touches its own attempt and a copy of its own
// row, nothing else of the walk.
func (h *hedging) lost(l landing) {
	w, a := h.w, l.f.a
	i := a.i
	a.verdict(health.Verdict{}) // losing says nothing of the target
	rec := w.rows[i]
	row := &rec
	now := w.r.now()
	var bill func() // bills the row once its status is settled
	if l.admitErr == nil && l.refused == nil {
		// A loser the provider had started answering is billed too
		// (docs/cost.md); read before close lets go of the body's buffer.
		if u, has, estimated, billed := a.billedUsage(); billed {
			bill = func() {
				usd, known := w.r.bill(row, &w.req.Candidates[i], w.req.Team, u, has, estimated)
				h.mu.Lock()
				h.lostSpent.add(usd, known, estimated && has)
				h.mu.Unlock()
			}
		}
	}
	if l.admitErr == nil {
		if a.state.live() {
			a.to(stLost)
		}
		a.close()
		row.StartedAt = a.admitted
	} else {
		l.f.cancel(nil)
		row.StartedAt = l.queued
	}
	row.FinishedAt, row.Latency, row.FirstByte = now, now.Sub(row.StartedAt), a.fb
	switch {
	case row.Status != report.CandidateAvailable && row.Status != report.CandidatePending:
	case l.panicked != nil:
		// A bug on the losing flight's goroutine: on record as such, while
		// the request goes on with the attempt that settled it.
		h.record(i, row, report.CandidateFailed, 500, report.ErrorTypeInternal, "gateway panic")
	default:
		if bill != nil {
			bill()
		}
		h.record(i, row, report.CandidateCancelled, 499, report.ErrorTypeHedgeLost, ErrHedgeLost.Error())
	}
	if a.state == stReleased {
		a.to(stClosed)
	}
	h.observe(l.f, HedgeLost)
}

// record settles a lost flight's row as walk.settle does, on the flight's
// own copy: the walk's counts are the request's, settled already.
func (h *hedging) record(i int, row *report.Candidate, status string, code int, errorType, msg string) {
	row.Status, row.StatusCode, row.ErrorType, row.ErrorMessage = status, code, errorType, msg
	h.w.r.Record.RecordCandidate(*row)
	h.w.traceAttempt(row)
	if h.w.r.Observe != nil {
		h.w.r.Observe.CandidateDone(&h.w.req.Candidates[i], status, errorType, row.Latency)
	}
}

func (h *hedging) observe(f *flight, result string) {
	if f.hedge && h.w.r.Observe != nil {
		h.w.r.Observe.HedgeDone(&h.w.req.Candidates[f.a.i], result)
	}
}

func (h *hedging) remove(f *flight) {
	for j, g := range h.flying {
		if g == f {
			// The flight's context lives on with its attempt: the winner
			// relays under it, and Attempt.close releases it.
			h.flying = append(h.flying[:j], h.flying[j+1:]...)
			return
		}
	}
}

// arm starts the hedge timer for the attempt just launched on candidate i:
// the route's delay, or the percentile of the target's first-byte latency,
// floored at the runner's minimum. Without enough samples for a percentile
// there is no hedge.
func (h *hedging) arm(i int) {
	h.stopTimer()
	select {
	case <-h.fired: // a firing of the previous timer nobody acted on
	default:
	}
	h.gen++
	hc := h.w.req.Hedge
	d := hc.After
	if hc.Quantile > 0 {
		q, ok := h.w.req.Candidates[i].Health.Quantile(hc.Quantile)
		if !ok {
			return
		}
		d = max(q, h.w.r.HedgeMinDelay)
	}
	gen := h.gen
	t := h.w.r.clock().AfterFunc(d, func() {
		select {
		case h.fired <- gen:
		default:
		}
	})
	h.stop = t.Stop
}

func (h *hedging) stopTimer() {
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
}
