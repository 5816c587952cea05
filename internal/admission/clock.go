package admission

import "time"

// Clock is injected so aging and budgets are tested without sleeping.
//
// AfterFunc must not call f synchronously: the scheduler arms budget timers
// while holding its lock, and f takes that lock.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer the scheduler uses.
type Timer interface {
	Stop() bool
}

// realClock is the default Clock: the process clock with its monotonic
// reading, so wall-clock jumps do not age or expire queued work.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

var (
	_ Clock = realClock{}
	_ Timer = (*time.Timer)(nil)
)
