package watchdog

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// ErrFirstByteTimeout is the cause of a cancelled attempt whose first event
// did not arrive in time. Its text is the record's error message.
//
//lint:ignore ST1005 the message is a contract (DESIGN section 6), stored as the record's error_message
var ErrFirstByteTimeout = errors.New("Stream first byte timeout")

// ErrIdleTimeout is the cause of a cancelled stream that went silent.
var ErrIdleTimeout = errors.New("stream idle timeout")

const (
	phaseWaiting int32 = iota // before the first event
	phaseStarted              // first event seen
	phaseFired                // a deadline fired
	phaseStopped
)

// Watch guards one attempt. Its methods are safe to call from the goroutine
// reading the upstream body while its timer fires on another.
type Watch struct {
	cancel context.CancelCauseFunc
	clock  Clock
	timer  Timer // first-byte, then idle; nil when neither is set
	limit  Timer // Limit's; nil when unset
	idle   time.Duration
	phase  atomic.Int32
	// idling says timer's callback now guards the idle deadline. It is
	// set only once the first-byte arming was stopped before it fired, so
	// a first-byte callback still to run can never count as an idle one.
	idling atomic.Bool
}

// Start begins watching, with deadlines armed on clock. firstByte <= 0
// disables the first-byte deadline (non-streaming requests); idle <= 0
// disables the idle deadline. The returned context must be used for the
// upstream request; Stop must be called when the attempt ends.
func Start(parent context.Context, clock Clock, firstByte, idle time.Duration) (context.Context, *Watch) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &Watch{cancel: cancel, clock: clock, idle: idle}
	if firstByte > 0 {
		w.timer = clock.AfterFunc(firstByte, w.fire)
	}
	return ctx, w
}

// fire is the callback of timer, the first-byte deadline's and, once
// FirstByte handed it over, the idle deadline's. Each deadline acts only in
// its own phase: a first-byte timer that expired as the first event was
// accepted runs its callback late, in phaseStarted, and must do nothing.
func (w *Watch) fire() {
	if w.idling.Load() {
		w.fireIdle()
		return
	}
	if w.phase.CompareAndSwap(phaseWaiting, phaseFired) {
		w.cancel(ErrFirstByteTimeout)
	}
}

// fireIdle is the idle deadline's callback.
func (w *Watch) fireIdle() {
	if w.phase.CompareAndSwap(phaseStarted, phaseFired) {
		w.cancel(ErrIdleTimeout)
	}
}

// FirstByte marks the first real event. It returns false when the first-byte
// deadline has already fired: the event arrived too late to be forwarded.
func (w *Watch) FirstByte() bool {
	if !w.phase.CompareAndSwap(phaseWaiting, phaseStarted) {
		return false
	}
	stopped := w.timer != nil && w.timer.Stop()
	if w.idle > 0 {
		if stopped {
			// No first-byte callback is pending: the timer is reused for
			// the idle deadline, which costs no allocation.
			w.idling.Store(true)
			w.timer.Reset(w.idle)
		} else {
			// No first-byte deadline, or it expired as this event came
			// and its callback is still to run: the idle deadline gets a
			// timer of its own.
			w.timer = w.clock.AfterFunc(w.idle, w.fireIdle)
		}
	}
	return true
}

// Abandon cancels an attempt still waiting for its first event, with
// cause; once the first event came it does nothing.
func (w *Watch) Abandon(cause error) {
	if w.phase.CompareAndSwap(phaseWaiting, phaseFired) {
		w.cancel(cause)
	}
}

// Activity marks an event after the first; it pushes the idle deadline back.
func (w *Watch) Activity() {
	if w.idle > 0 && w.timer != nil && w.phase.Load() == phaseStarted {
		w.timer.Reset(w.idle)
	}
}

// Limit bounds the whole attempt: after d the watch's context is cancelled
// with cause, whatever the phase. Call it once, right after Start. It saves a
// context.WithTimeoutCause layer (a context, its timer and its parent's
// bookkeeping) on every attempt; d <= 0 sets no limit.
func (w *Watch) Limit(d time.Duration, cause error) {
	if d > 0 {
		w.limit = w.clock.AfterFunc(d, func() { w.cancel(cause) })
	}
}

// Stop ends the watch and releases its context.
func (w *Watch) Stop() {
	w.phase.Store(phaseStopped)
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.limit != nil {
		w.limit.Stop()
	}
	w.cancel(context.Canceled)
}

// Hold releases the global execution slot at the moment the hold mode names.
// Release is called at most once.
type Hold struct {
	mode    HoldMode
	release func()
	done    bool
}

// NewHold binds a mode to the release of the global slot.
func NewHold(mode HoldMode, release func()) Hold { return Hold{mode: mode, release: release} }

func (h *Hold) fire() {
	if !h.done {
		h.done = true
		h.release()
	}
}

// Headers is called when upstream response headers arrive.
func (h *Hold) Headers() {
	if h.mode == HoldHeaders {
		h.fire()
	}
}

// FirstBody is called once the first body event reached the client.
func (h *Hold) FirstBody() {
	if h.mode == HoldFirstBody {
		h.fire()
	}
}

// End is called when the response ends, however it ends.
func (h *Hold) End() { h.fire() }
