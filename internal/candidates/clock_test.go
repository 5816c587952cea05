package candidates

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/watchdog"
)

// stepClock is a Clock whose time moves only when the test advances it: its
// timers (the hedge timer, the attempts' watchdog deadlines, commit holds)
// fire on the test's goroutine, in deadline order, inside advance. A test
// on it asserts what happens before and after a delay by moving the clock,
// never by measuring wall time.
type stepClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*stepTimer
	changed chan struct{} // closed and replaced whenever a timer is armed
}

type stepTimer struct {
	c     *stepClock
	d     time.Duration // as asked for, to tell the timers apart
	at    time.Time
	f     func()
	armed bool
}

func newStepClock() *stepClock {
	return &stepClock{now: time.Unix(1_700_000_000, 0), changed: make(chan struct{})}
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) AfterFunc(d time.Duration, f func()) watchdog.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &stepTimer{c: c, d: d, at: c.now.Add(d), f: f, armed: true}
	c.timers = append(c.timers, t)
	c.signal()
	return t
}

// signal wakes the waiters of waitArmed; c.mu is held.
func (c *stepClock) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (t *stepTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

func (t *stepTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.d, t.at, t.armed = d, t.c.now.Add(d), true
	t.c.signal()
	return was
}

// advance moves the time forward by d, firing every timer that falls due.
func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		var next *stepTimer
		for _, t := range c.timers {
			if t.armed && !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		c.now, next.armed = next.at, false
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// armed counts the timers of duration d that would still fire.
func (c *stepClock) armed(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if t.armed && t.d == d {
			n++
		}
	}
	return n
}

// durations lists the durations of every timer ever armed, in order.
func (c *stepClock) durations() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Duration, 0, len(c.timers))
	for _, t := range c.timers {
		out = append(out, t.d)
	}
	return out
}

// waitArmed waits until a timer of duration d is armed: the code under test
// arms it on its own goroutine. The bound only ends a wait that never ends.
func (c *stepClock) waitArmed(t *testing.T, d time.Duration) {
	t.Helper()
	bound := time.NewTimer(5 * time.Second)
	defer bound.Stop()
	for {
		c.mu.Lock()
		ch := c.changed
		c.mu.Unlock()
		if c.armed(d) > 0 {
			return
		}
		select {
		case <-ch:
		case <-bound.C:
			t.Fatalf("no %v timer armed; timers armed so far: %s", d, fmt.Sprint(c.durations()))
		}
	}
}

// await waits for ch to close or deliver, failing the test with what once
// the bound has passed: the bound only ends a wait that never ends.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: did not happen", what)
	}
}
