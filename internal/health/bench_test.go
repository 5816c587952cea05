package health

import (
	"testing"
	"time"
)

// The request path calls Check before and Done after every attempt; on a
// healthy target both must stay an atomic load without allocation.

func BenchmarkCheckHealthy(b *testing.B) {
	tg := NewTracker(SystemClock{}, nil).Add("p", "t", "k", "", Settings{})
	b.ReportAllocs()
	for b.Loop() {
		if ok, _, _ := tg.Check(); !ok {
			b.Fatal("healthy target skipped")
		}
	}
}

func BenchmarkDoneSuccess(b *testing.B) {
	tg := NewTracker(SystemClock{}, nil).Add("p", "t", "k", "", Settings{})
	b.ReportAllocs()
	for b.Loop() {
		tg.Done(success, false)
	}
}

// BenchmarkDoneSuccessAfterFailure is the slow path of a success: the
// target has a failure to forget, so Done takes the target's lock.
func BenchmarkDoneSuccessAfterFailure(b *testing.B) {
	tg := NewTracker(SystemClock{}, nil).Add("p", "t", "k", "", Settings{Failures: 1 << 30})
	b.ReportAllocs()
	for b.Loop() {
		tg.Done(http429, false)
		tg.Done(success, false)
	}
}

// BenchmarkCheckCooling is a skipped candidate: the target's lock and a
// clock read.
func BenchmarkCheckCooling(b *testing.B) {
	tg := NewTracker(SystemClock{}, nil).Add("p", "t", "k", "", Settings{})
	tg.Done(http429After(time.Minute), false)
	b.ReportAllocs()
	for b.Loop() {
		if ok, _, _ := tg.Check(); ok {
			b.Fatal("cooling target tried")
		}
	}
}

func BenchmarkFirstByte(b *testing.B) {
	tg := NewTracker(SystemClock{}, nil).Add("p", "t", "k", "", Settings{})
	b.ReportAllocs()
	for b.Loop() {
		tg.FirstByte(123 * time.Millisecond)
	}
}

// BenchmarkParallelCheckDone is many requests on one healthy target at once:
// nothing shared may serialise them.
func BenchmarkParallelCheckDone(b *testing.B) {
	tg := NewTracker(SystemClock{}, nil).Add("p", "t", "k", "", Settings{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, probe, _ := tg.Check()
			tg.Done(success, probe)
		}
	})
}
