package admission

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrQueueFull is returned at once when an attempt would have to queue
	// while MaxPending attempts are already queued.
	ErrQueueFull = errors.New("gateway admission queue full")
	// ErrClosed is returned by Acquire after Close, and to attempts still
	// queued when Close runs.
	ErrClosed = errors.New("gateway admission scheduler closed")
	// ErrInvalidRequest is wrapped by every error about a malformed Request
	// (bad priority, too many or duplicate dimensions, non-positive limit):
	// those are caller bugs, not capacity problems.
	ErrInvalidRequest = errors.New("gateway admission invalid request")
)

// TimeoutError reports that an attempt's queue budget ran out. Gate names
// the gate that had no room at that moment; when both the global gate and a
// dimension were full it names the dimension's gate, because that is the
// constraint operators can act on per provider.
type TimeoutError struct {
	Gate   string
	Budget time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("gateway admission gate %s timed out after %s", e.Gate, e.Budget)
}
