package candidates

import (
	"sync/atomic"
	"time"
)

// retryWindow is the span over which the retry budget compares attempts
// beyond a request's first with first attempts.
const retryWindow = 10 * time.Second

// RetryBudget keeps failover (and, later, hedge) attempts from multiplying
// an outage, as Envoy's retry budget does: an attempt beyond a request's
// first is allowed while such attempts over the last 10 s stay under Percent
// of the first attempts in that window, plus MinPerSecond per second of the
// window. It counts in ten one-second buckets of atomics, so the hot path
// (First) is one atomic add and takes no lock. The budget has no clock of
// its own: the loop passes the time from its clock, the one that stamps the
// request's records, so a test's fake clock moves the window too.
type RetryBudget struct {
	percent   int64
	minPerSec int64
	buckets   [retryWindow / time.Second]retryBucket // one per second of the window
}

type retryBucket struct {
	sec     atomic.Int64 // the Unix second the counts belong to
	firsts  atomic.Int64
	retries atomic.Int64
}

// NewRetryBudget builds a budget; percent and minPerSecond of 0 and 0 allow
// no attempt beyond a request's first.
func NewRetryBudget(percent, minPerSecond int) *RetryBudget {
	return &RetryBudget{percent: int64(percent), minPerSec: int64(minPerSecond)}
}

// bucket returns the current second's bucket, emptied when it last held an
// older second. Two goroutines rotating at once may lose a count or two: the
// budget is a rate guard, not a ledger.
func (b *RetryBudget) bucket(sec int64) *retryBucket {
	k := &b.buckets[sec%int64(len(b.buckets))]
	if old := k.sec.Load(); old != sec && k.sec.CompareAndSwap(old, sec) {
		k.firsts.Store(0)
		k.retries.Store(0)
	}
	return k
}

// First counts a request's first attempt, made at now.
func (b *RetryBudget) First(now time.Time) {
	if b == nil {
		return
	}
	b.bucket(now.Unix()).firsts.Add(1)
}

// Allow reports whether one more attempt beyond a request's first fits the
// budget at now, and counts it when it does.
func (b *RetryBudget) Allow(now time.Time) bool {
	if b == nil {
		return true
	}
	sec := now.Unix()
	var firsts, retries int64
	for i := range b.buckets {
		k := &b.buckets[i]
		if s := k.sec.Load(); s > sec-int64(len(b.buckets)) && s <= sec {
			firsts += k.firsts.Load()
			retries += k.retries.Load()
		}
	}
	if retries >= b.percent*firsts/100+b.minPerSec*int64(retryWindow/time.Second) {
		return false
	}
	b.bucket(sec).retries.Add(1)
	return true
}
