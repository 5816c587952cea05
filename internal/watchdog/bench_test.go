package watchdog

import (
	"context"
	"errors"
	"testing"
	"time"
)

var errBenchTotal = errors.New("total")

// BenchmarkAttempt is what every attempt pays for its watch, as the attempt
// loop uses it: Start with both deadlines, a total limit, the first event,
// one more, and Stop.
func BenchmarkAttempt(b *testing.B) {
	parent := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, w := Start(parent, SystemClock{}, time.Minute, time.Minute)
		w.Limit(time.Hour, errBenchTotal)
		w.FirstByte()
		w.Activity()
		w.Stop()
	}
}
