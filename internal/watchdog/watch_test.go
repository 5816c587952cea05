package watchdog

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFirstByteFires: a silent attempt is cancelled with ErrFirstByteTimeout.
func TestFirstByteFires(t *testing.T) {
	ctx, w := Start(context.Background(), 10*time.Millisecond, 0)
	defer w.Stop()
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrFirstByteTimeout) {
		t.Fatalf("cause = %v", context.Cause(ctx))
	}
	if w.FirstByte() {
		t.Fatal("FirstByte after the deadline must report false")
	}
	if ErrFirstByteTimeout.Error() != "Stream first byte timeout" {
		t.Fatal("message is a contract")
	}
}

// TestFirstByteInTimeThenIdle: once started, only the idle deadline applies,
// and activity pushes it back.
func TestFirstByteInTimeThenIdle(t *testing.T) {
	ctx, w := Start(context.Background(), 50*time.Millisecond, 40*time.Millisecond)
	defer w.Stop()
	if !w.FirstByte() {
		t.Fatal("FirstByte in time reported late")
	}
	for i := 0; i < 5; i++ {
		time.Sleep(15 * time.Millisecond)
		w.Activity()
	}
	if ctx.Err() != nil {
		t.Fatalf("cancelled despite activity: %v", context.Cause(ctx))
	}
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrIdleTimeout) {
		t.Fatalf("cause = %v, want idle timeout", context.Cause(ctx))
	}
}

// TestNoDeadlines: non-streaming attempts have neither deadline.
func TestNoDeadlines(t *testing.T) {
	ctx, w := Start(context.Background(), 0, 0)
	if !w.FirstByte() {
		t.Fatal("FirstByte without deadline must succeed")
	}
	time.Sleep(20 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("cancelled without a deadline")
	}
	w.Stop()
	if ctx.Err() == nil {
		t.Fatal("Stop must release the context")
	}
}

// TestLimit: the total limit cancels with its cause in any phase, even while
// events keep the idle deadline away, and Stop disarms it.
func TestLimit(t *testing.T) {
	errTotal := errors.New("total")
	ctx, w := Start(context.Background(), time.Hour, time.Hour)
	w.Limit(60*time.Millisecond, errTotal)
	defer w.Stop()
	if !w.FirstByte() {
		t.Fatal("FirstByte in time reported late")
	}
	for ctx.Err() == nil {
		w.Activity()
		time.Sleep(5 * time.Millisecond)
	}
	if !errors.Is(context.Cause(ctx), errTotal) {
		t.Fatalf("cause = %v, want the limit's", context.Cause(ctx))
	}

	ctx, w = Start(context.Background(), 0, 0)
	w.Limit(20*time.Millisecond, errTotal)
	w.Stop()
	time.Sleep(40 * time.Millisecond)
	if errors.Is(context.Cause(ctx), errTotal) {
		t.Fatal("a stopped watch's limit fired")
	}
}

// TestParentCancelKeepsCause: a client that leaves is not a watchdog firing.
func TestParentCancelKeepsCause(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	ctx, w := Start(parent, time.Hour, 0)
	defer w.Stop()
	cancel()
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), ErrFirstByteTimeout) {
		t.Fatal("client cancel reported as a watchdog timeout")
	}
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
