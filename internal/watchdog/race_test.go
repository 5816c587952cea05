package watchdog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// lateClock is a Clock whose timers, once due, do not run their callback
// at once: as with time.AfterFunc, the callback is handed to a goroutine
// of its own that may not have run yet when the attempt carries on. The
// test decides when the callbacks run (Release), so the interleaving the
// synchronous fakeClock cannot express, a timer that expired but whose
// callback is still to come, is written down. Stop and Reset answer as
// *time.Timer does: false once the timer expired.
type lateClock struct {
	mu     sync.Mutex
	now    time.Duration
	timers []*lateTimer
	due    []func() // expired timers' callbacks, not run yet
}

type lateTimer struct {
	c     *lateClock
	at    time.Duration
	f     func()
	armed bool
}

func (c *lateClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &lateTimer{c: c, at: c.now + d, f: f, armed: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *lateTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

func (t *lateTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.at, t.armed = t.c.now+d, true
	return was
}

// Advance moves time forward by d; every timer falling due expires, its
// callback queued for Release.
func (c *lateClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now += d
	for _, t := range c.timers {
		if t.armed && t.at <= c.now {
			t.armed = false
			c.due = append(c.due, t.f)
		}
	}
}

// Release runs the queued callbacks, each on a goroutine of its own as the
// runtime does, and returns a wait for them.
func (c *lateClock) Release() (wait func()) {
	c.mu.Lock()
	due := c.due
	c.due = nil
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, f := range due {
		wg.Go(f)
	}
	return wg.Wait
}

// TestFirstEventAtTheDeadline protects a stream whose first event is
// accepted at the very moment its first-byte deadline expires: the
// first-byte timer's callback, still to run, must not cut the stream as
// idle (with the idle deadline off or on). Each of the 20,000 attempts
// lets the expired timer's callback race FirstByte on another goroutine;
// whichever wins, the attempt ends one of two honest ways: the event was
// too late (FirstByte false, ErrFirstByteTimeout), or it was in time and
// the stream lives until its idle deadline, if any, and not a moment less.
func TestFirstEventAtTheDeadline(t *testing.T) {
	const attempts = 20_000
	for _, idle := range []time.Duration{0, time.Minute} {
		spurious, late := 0, 0
		for range attempts {
			clock := &lateClock{}
			ctx, w := Start(context.Background(), clock, 10*time.Second, idle)
			clock.Advance(10 * time.Second) // the first-byte timer expired; its callback is yet to run
			wait := clock.Release()         // ... and runs now, racing the first event
			inTime := w.FirstByte()
			wait()
			if !inTime {
				late++
				if got := context.Cause(ctx); !errors.Is(got, ErrFirstByteTimeout) {
					t.Fatalf("idle %s: a late first event left cause %v, want %v", idle, got, ErrFirstByteTimeout)
				}
				w.Stop()
				continue
			}
			if ctx.Err() != nil {
				spurious++
				w.Stop()
				continue
			}
			if idle > 0 {
				clock.Advance(idle - time.Nanosecond)
				clock.Release()()
				if ctx.Err() != nil {
					spurious++
					w.Stop()
					continue
				}
				clock.Advance(time.Nanosecond)
				clock.Release()()
				endedWith(t, ctx, ErrIdleTimeout, "a full idle period after a first event at the deadline")
			} else {
				clock.Advance(time.Hour)
				clock.Release()()
				alive(t, ctx, "an hour after a first event at the deadline, idle off")
			}
			w.Stop()
		}
		if spurious > 0 {
			t.Errorf("idle %s: %d of %d attempts whose first event was accepted at the deadline were cancelled early (%d late)",
				idle, spurious, attempts, late)
		}
	}
}

// TestIdleTimerOfItsOwn protects the idle deadline from a first-byte
// timer that expired just as the first event came: that timer's callback
// runs after the event was accepted and must change nothing, while the
// idle deadline still fires on time and events still push it back.
func TestIdleTimerOfItsOwn(t *testing.T) {
	clock := &lateClock{}
	ctx, w := Start(context.Background(), clock, 10*time.Second, 30*time.Second)
	defer w.Stop()
	clock.Advance(10 * time.Second) // expired, callback pending
	if !w.FirstByte() {
		t.Fatal("FirstByte before the expired timer's callback ran reported late")
	}
	clock.Release()()
	alive(t, ctx, "after the first-byte timer's late callback")
	clock.Advance(20 * time.Second)
	w.Activity()
	clock.Advance(30*time.Second - time.Nanosecond)
	clock.Release()()
	alive(t, ctx, "an event within the idle period")
	clock.Advance(time.Nanosecond)
	clock.Release()()
	endedWith(t, ctx, ErrIdleTimeout, "a full idle period without an event")
}
