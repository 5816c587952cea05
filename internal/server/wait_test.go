package server_test

import (
	"testing"
	"time"
)

// eventually polls cond until it reports done, and fails the test once within
// has passed, naming what was awaited and the last state cond described. It
// is how a test waits for something the gateway shows only from outside
// (/readyz, /metrics, Postgres rows, a mock's counters): the deadline bounds
// a wait that never ends, it is not what makes an assertion hold, so it is
// generous for a loaded machine. The first polls come quickly, later ones
// back off so that a slow condition does not keep the CPU busy.
func eventually(t *testing.T, within time.Duration, what string, cond func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v (last: %s)", what, within, state)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// await waits for ch to deliver or close, and fails the test naming what was
// awaited when that takes longer than within.
func await[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: did not happen within %v", what, within)
		var zero T
		return zero
	}
}
