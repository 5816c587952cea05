package report

import (
	"sync/atomic"
	"time"
)

// logLimiter lets one log line through per interval and counts the ones it held
// back. A Postgres outage or a full disk would otherwise log once per record.
type logLimiter struct {
	every      time.Duration
	last       atomic.Int64 // unix nanos of the last allowed line
	suppressed atomic.Int64
}

// allow reports whether to log now and how many lines were suppressed since the
// last one allowed.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed int64) {
	n := now.UnixNano()
	last := l.last.Load()
	if last != 0 && n-last < int64(l.every) || !l.last.CompareAndSwap(last, n) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}

// reset makes the next call log immediately (after a recovery, the next failure
// is news).
func (l *logLimiter) reset() {
	l.last.Store(0)
	l.suppressed.Store(0)
}
