package watchdog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a Clock whose time moves only when the test advances it;
// due timers fire on the test's goroutine, in deadline order.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Duration
	timers []*fakeTimer
}

type fakeTimer struct {
	c     *fakeClock
	at    time.Duration
	f     func()
	armed bool
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now + d, f: f, armed: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.at, t.armed = t.c.now+d, true
	return was
}

// Advance moves time forward by d, firing every timer that falls due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now + d
	for {
		var next *fakeTimer
		for _, t := range c.timers {
			if t.armed && t.at <= end && (next == nil || t.at < next.at) {
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

// armed counts the timers that would still fire.
func (c *fakeClock) armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if t.armed {
			n++
		}
	}
	return n
}

// alive fails the test when ctx has ended.
func alive(t *testing.T, ctx context.Context, when string) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("%s: cancelled with %v, want still running", when, context.Cause(ctx))
	}
}

// endedWith fails the test unless ctx has ended with cause want.
func endedWith(t *testing.T, ctx context.Context, want error, when string) {
	t.Helper()
	if ctx.Err() == nil {
		t.Fatalf("%s: still running, want cancelled with %v", when, want)
	}
	if got := context.Cause(ctx); !errors.Is(got, want) {
		t.Fatalf("%s: cause = %v, want %v", when, got, want)
	}
}

// TestFirstByteFires: a silent attempt is cancelled with ErrFirstByteTimeout
// exactly at its deadline, however busy it looked before its first event, and
// an event arriving after that is too late to forward.
func TestFirstByteFires(t *testing.T) {
	clock := &fakeClock{}
	ctx, w := Start(context.Background(), clock, 10*time.Second, time.Minute)
	defer w.Stop()
	clock.Advance(5 * time.Second)
	w.Activity() // not a first event: must not turn the deadline into an idle one
	clock.Advance(5*time.Second - time.Nanosecond)
	alive(t, ctx, "just before the first-byte deadline")
	clock.Advance(time.Nanosecond)
	endedWith(t, ctx, ErrFirstByteTimeout, "at the first-byte deadline")
	if w.FirstByte() {
		t.Fatal("FirstByte after the deadline reported in time")
	}
	if got, want := ErrFirstByteTimeout.Error(), "Stream first byte timeout"; got != want {
		t.Fatalf("message = %q, want %q (the record's error_message)", got, want)
	}
}

// TestFirstByteInTimeThenIdle: once started, the first-byte deadline no
// longer applies; only the idle deadline does, and every event pushes it back.
func TestFirstByteInTimeThenIdle(t *testing.T) {
	clock := &fakeClock{}
	ctx, w := Start(context.Background(), clock, 50*time.Second, 40*time.Second)
	defer w.Stop()
	clock.Advance(30 * time.Second)
	if !w.FirstByte() {
		t.Fatal("FirstByte in time reported late")
	}
	clock.Advance(30 * time.Second) // past the first-byte deadline, inside idle
	alive(t, ctx, "past the first-byte deadline after the first event")
	for i := 0; i < 5; i++ {
		w.Activity()
		clock.Advance(40*time.Second - time.Nanosecond)
		alive(t, ctx, "an event within every idle period")
	}
	clock.Advance(time.Nanosecond)
	endedWith(t, ctx, ErrIdleTimeout, "a full idle period without an event")
}

// TestFirstByteWithoutIdle: a stream without an idle deadline is never cut
// once it has started, and its first-byte timer is not left running.
func TestFirstByteWithoutIdle(t *testing.T) {
	clock := &fakeClock{}
	ctx, w := Start(context.Background(), clock, 10*time.Second, 0)
	defer w.Stop()
	if !w.FirstByte() {
		t.Fatal("FirstByte in time reported late")
	}
	if n := clock.armed(); n != 0 {
		t.Fatalf("%d timers armed after the first event, want 0", n)
	}
	clock.Advance(time.Hour)
	alive(t, ctx, "an hour into a stream without idle deadline")
}

// TestNoDeadlines: non-streaming attempts have neither deadline and arm no
// timer at all.
func TestNoDeadlines(t *testing.T) {
	clock := &fakeClock{}
	ctx, w := Start(context.Background(), clock, 0, 0)
	defer w.Stop()
	if n := len(clock.timers); n != 0 {
		t.Fatalf("%d timers armed without deadlines, want 0", n)
	}
	if !w.FirstByte() {
		t.Fatal("FirstByte without deadline reported late")
	}
	w.Activity()
	clock.Advance(time.Hour)
	alive(t, ctx, "an hour without deadlines")
}

// TestLimit: the total limit cancels with its cause in any phase, even while
// events keep the idle deadline away.
func TestLimit(t *testing.T) {
	errTotal := errors.New("total")
	for _, tt := range []struct {
		name            string
		firstByte, idle time.Duration
		started         bool
	}{
		{"waiting for the first event", time.Hour, time.Hour, false},
		{"streaming with events", time.Hour, 2 * time.Second, true},
		{"no other deadline", 0, 0, false},
		{"started without idle deadline", time.Hour, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{}
			ctx, w := Start(context.Background(), clock, tt.firstByte, tt.idle)
			defer w.Stop()
			w.Limit(10*time.Second, errTotal)
			if tt.started && !w.FirstByte() {
				t.Fatal("FirstByte in time reported late")
			}
			for i := 0; i < 9; i++ {
				clock.Advance(time.Second)
				w.Activity()
			}
			clock.Advance(time.Second - time.Nanosecond)
			alive(t, ctx, "just before the limit")
			clock.Advance(time.Nanosecond)
			endedWith(t, ctx, errTotal, "at the limit")
		})
	}
}

// TestStop: a stopped watch releases its context as an ordinary
// cancellation, and nothing armed before Stop (first-byte, idle or limit)
// can fire afterwards or be revived by a late event. Stop may be called
// twice: the attempt loop's deferred Stop can follow an early one.
func TestStop(t *testing.T) {
	errTotal := errors.New("total")
	for _, tt := range []struct {
		name    string
		started bool
	}{
		{"while waiting for the first event", false},
		{"while streaming", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{}
			ctx, w := Start(context.Background(), clock, 10*time.Second, 10*time.Second)
			w.Limit(20*time.Second, errTotal)
			if tt.started && !w.FirstByte() {
				t.Fatal("FirstByte in time reported late")
			}
			w.Stop()
			if n := clock.armed(); n != 0 {
				t.Fatalf("%d timers still armed after Stop, want 0", n)
			}
			if w.FirstByte() {
				t.Fatal("FirstByte after Stop reported in time")
			}
			w.Activity()
			if n := clock.armed(); n != 0 {
				t.Fatalf("%d timers armed by an event after Stop, want 0", n)
			}
			clock.Advance(time.Hour)
			w.Stop()
			if got := context.Cause(ctx); got != context.Canceled {
				t.Fatalf("cause after Stop = %v, want context.Canceled", got)
			}
		})
	}
}

// TestParentCancelKeepsCause: a client that leaves ends the attempt with the
// client's cause, which the attempt loop tells apart from a watchdog firing.
func TestParentCancelKeepsCause(t *testing.T) {
	errClientGone := errors.New("client gone")
	parent, cancel := context.WithCancelCause(context.Background())
	clock := &fakeClock{}
	ctx, w := Start(parent, clock, 10*time.Second, 0)
	defer w.Stop()
	cancel(errClientGone)
	endedWith(t, ctx, errClientGone, "after the client left")
}

func TestHoldModes(t *testing.T) {
	for _, tt := range []struct {
		mode HoldMode
		want string // the step at which release happens
	}{{HoldHeaders, "headers"}, {HoldFirstBody, "first_body"}, {HoldResponse, "end"}} {
		released, at := 0, ""
		step := ""
		h := NewHold(tt.mode, func() { released++; at = step })
		step = "headers"
		h.Headers()
		step = "first_body"
		h.FirstBody()
		step = "end"
		h.End()
		h.End()
		if released != 1 || at != tt.want {
			t.Errorf("%s: released %d times at %q, want once at %q", tt.mode, released, at, tt.want)
		}
	}
}

func FuzzParseHoldMode(f *testing.F) {
	for _, s := range []string{"headers", " FULL ", "0", "1", "first_body", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, ok := ParseHoldMode(s)
		if !ok && m != HoldFirstBody {
			t.Fatalf("unknown %q did not fall back to first_body", s)
		}
		if m2, ok2 := ParseHoldMode(m.String()); !ok2 || m2 != m {
			t.Fatalf("canonical spelling %q does not round-trip", m)
		}
	})
}

// TestAbandon: an attempt still waiting for its first event can be given up
// with a cause; once its first event came, Abandon changes nothing.
func TestAbandon(t *testing.T) {
	errGone := errors.New("target turned cooling")
	ctx, w := Start(context.Background(), SystemClock{}, time.Hour, 0)
	w.Abandon(errGone)
	if !errors.Is(context.Cause(ctx), errGone) || w.FirstByte() {
		t.Fatalf("waiting: cause %v", context.Cause(ctx))
	}
	w.Stop()

	ctx, w = Start(context.Background(), SystemClock{}, time.Hour, 0)
	defer w.Stop()
	if !w.FirstByte() {
		t.Fatal("FirstByte in time reported late")
	}
	w.Abandon(errGone)
	if ctx.Err() != nil {
		t.Fatalf("abandoned after its first event: %v", context.Cause(ctx))
	}
}
