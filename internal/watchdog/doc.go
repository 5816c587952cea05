// Package watchdog puts deadlines around an upstream body and releases the
// global execution slot according to the operator's hold mode.
//
// A Watch derives a context from the attempt's context that is cancelled with
// ErrFirstByteTimeout when the first real event has not arrived in time, and
// with ErrIdleTimeout when a started stream goes silent for longer than its
// idle timeout. Cancelling the context is what stops the upstream request, so
// the provider sees the cancellation. The package persists nothing; the
// attempt loop records what the watch reports.
package watchdog
