package report

import (
	"context"
	"sync"
	"time"
)

// The provider statistics cache. A console polls GET /admin/stats/providers
// every few seconds, and over an hour the window holds tens of thousands of
// candidate rows (54,000 at a million requests a day) whose aggregation is
// nearly all of the endpoint's time. But a bucket stops changing once the
// requests received in it have ended, so buckets that ended more than
// statsSettle ago are kept and only the recent ones are read each time.
// Records that reach Postgres later than that (a spool replayed after an
// outage, a request running longer than statsSettle) show up when the bucket
// is read again, statsCacheTTL after it was cached.
const (
	statsSettle   = 10 * time.Minute
	statsCacheTTL = 5 * time.Minute
	// statsRefreshBuckets bounds the expired buckets read again per call
	// (the others are served a little longer), so that the buckets cached
	// together by a first read do not all cost one read together again.
	statsRefreshBuckets = 10
	// statsCacheMax bounds the entries, whatever windows are asked for.
	statsCacheMax = 20000
)

// statsCache holds settled buckets by bucket size and start. The zero value
// is ready; it is safe for concurrent use. Cached aggregates are never
// modified once stored.
type statsCache struct {
	mu      sync.Mutex
	entries map[statsKey]cachedBucket
}

type statsKey struct {
	bucket  time.Duration
	startUS int64 // bucket start, Unix microseconds
}

type cachedBucket struct {
	agg     *bucketAgg // nil: no attempts in the bucket
	fetched time.Time
}

// window returns the StatsBuckets buckets from since (nil for an empty
// one), from the cache where it may and from fetch otherwise; fetch reads
// every bucket of [from, to) and returns those with attempts, by start.
func (c *statsCache) window(ctx context.Context, now, since time.Time, bucket time.Duration,
	fetch func(ctx context.Context, from, to time.Time) (map[time.Time]*bucketAgg, error)) ([]*bucketAgg, error) {
	aggs := make([]*bucketAgg, StatsBuckets)
	need := make([]bool, StatsBuckets)
	settled := now.Add(-statsSettle)
	key := func(i int) statsKey {
		return statsKey{bucket: bucket, startUS: since.Add(time.Duration(i) * bucket).UnixMicro()}
	}
	c.mu.Lock()
	refresh := 0
	for i := range StatsBuckets {
		if since.Add(time.Duration(i+1) * bucket).After(settled) {
			need[i] = true
			continue
		}
		e, ok := c.entries[key(i)]
		switch {
		case !ok:
			need[i] = true
		case now.Sub(e.fetched) >= statsCacheTTL && refresh < statsRefreshBuckets:
			need[i] = true
			refresh++
		default:
			aggs[i] = e.agg
		}
	}
	c.mu.Unlock()

	for i := 0; i < StatsBuckets; {
		if !need[i] {
			i++
			continue
		}
		j := i
		for j < StatsBuckets && need[j] {
			j++
		}
		got, err := fetch(ctx, since.Add(time.Duration(i)*bucket), since.Add(time.Duration(j)*bucket))
		if err != nil {
			return nil, err
		}
		byUS := make(map[int64]*bucketAgg, len(got))
		for start, a := range got {
			byUS[start.UnixMicro()] = a
		}
		c.mu.Lock()
		for k := i; k < j; k++ {
			aggs[k] = byUS[key(k).startUS]
			if !since.Add(time.Duration(k+1) * bucket).After(settled) {
				c.put(key(k), cachedBucket{agg: aggs[k], fetched: now})
			}
		}
		c.mu.Unlock()
		i = j
	}
	return aggs, nil
}

// put stores an entry; c.mu is held. Past statsCacheMax it first drops what
// no window can reach any more, and everything if that is not enough.
func (c *statsCache) put(k statsKey, e cachedBucket) {
	if c.entries == nil {
		c.entries = map[statsKey]cachedBucket{}
	}
	if len(c.entries) >= statsCacheMax {
		oldest := e.fetched.Add(-MaxStatsWindow - statsSettle).UnixMicro()
		for k := range c.entries {
			if k.startUS < oldest {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= statsCacheMax {
			clear(c.entries)
		}
	}
	c.entries[k] = e
}
