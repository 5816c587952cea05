package watchdog

import "time"

// Clock arms the watch's deadlines. It is injected so the deadlines are
// tested without sleeping; production passes SystemClock.
type Clock interface {
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer the watch uses: Reset pushes the idle
// deadline back on every event.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// SystemClock is the process clock. Its zero size keeps passing it as a Clock
// free of allocations on every attempt.
type SystemClock struct{}

// AfterFunc implements Clock with time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

var (
	_ Clock = SystemClock{}
	_ Timer = (*time.Timer)(nil)
)
