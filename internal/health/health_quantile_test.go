package health

import (
	"context"
	"testing"
	"time"
)

// TestQuantile: percentiles come from the last 64 samples and need at least
// MinQuantileSamples of them.
func TestQuantile(t *testing.T) {
	tr := NewTracker(SystemClock{}, nil)
	tg := tr.Add("p", "t1", "key0", "", Settings{})
	for i := 1; i < MinQuantileSamples; i++ {
		tg.FirstByte(time.Duration(i) * time.Millisecond)
	}
	if _, ok := tg.Quantile(0.95); ok {
		t.Fatal("answered with too few samples")
	}
	for i := MinQuantileSamples; i <= 100; i++ {
		tg.FirstByte(time.Duration(i) * time.Millisecond)
	}
	// The ring holds samples 37..100 ms; p95 of 64 values is the 61st.
	if got, ok := tg.Quantile(0.95); !ok || got != 97*time.Millisecond {
		t.Fatalf("p95 = %s, %v; want 97ms", got, ok)
	}
	if got, _ := tg.Quantile(0.5); got != 69*time.Millisecond {
		t.Fatalf("p50 = %s, want 69ms", got)
	}
}

// TestCooledSignal: the context Cooled hands out ends, with ErrCooling, when
// the target turns cooling; a later Cooled is a fresh one.
func TestCooledSignal(t *testing.T) {
	tr := NewTracker(SystemClock{}, nil)
	tg := tr.Add("p", "t1", "key0", "", Settings{Failures: 2})
	ctx := tg.Cooled()
	tg.Done(Verdict{Counts: true, ErrorType: "x"}, false)
	if ctx.Err() != nil {
		t.Fatal("cancelled before the target cooled")
	}
	tg.Done(Verdict{Counts: true, ErrorType: "x"}, false)
	if ctx.Err() == nil || context.Cause(ctx) != ErrCooling {
		t.Fatalf("after cooling: err %v cause %v", ctx.Err(), context.Cause(ctx))
	}
	if tg.Cooled().Err() != nil {
		t.Fatal("the next signal is already cancelled")
	}
}
