package report

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestStatsGrid: the bucket is a sixtieth of the window in whole seconds,
// buckets are aligned, and the last one holds now.
func TestStatsGrid(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 30, 30, 500, time.UTC)
	for _, tc := range []struct {
		window, bucket time.Duration
		until          time.Time
	}{
		{time.Hour, time.Minute, time.Date(2026, 11, 30, 12, 31, 0, 0, time.UTC)},
		{time.Minute, time.Second, time.Date(2026, 11, 30, 12, 30, 31, 0, time.UTC)},
		{24 * time.Hour, 24 * time.Minute, time.Date(2026, 11, 30, 12, 48, 0, 0, time.UTC)},
		{90 * time.Second, time.Second, time.Date(2026, 11, 30, 12, 30, 31, 0, time.UTC)}, // 1.5 s cut to 1 s
	} {
		since, until, bucket := StatsGrid(tc.window, now)
		if bucket != tc.bucket || !until.Equal(tc.until) || !since.Equal(until.Add(-StatsBuckets*bucket)) || !now.Before(until) {
			t.Errorf("window %s: since %s until %s bucket %s; want bucket %s until %s", tc.window, since, until, bucket, tc.bucket, tc.until)
		}
	}
}

// TestProviderStats protects GET /admin/stats/providers: only attempted
// candidates count, failures and the failure rate are per provider, every
// provider has all sixty buckets oldest first (empty ones too), the window's
// edges are [since, until), and the latency percentiles are over the
// attempts that ended.
func TestProviderStats(t *testing.T) {
	dsn := migratedURL(t)
	w := connectedWriter(t, dsn)
	now := time.Date(2026, 11, 30, 12, 30, 30, 0, time.UTC)
	w.now = func() time.Time { return now }
	since := time.Date(2026, 11, 30, 11, 31, 0, 0, time.UTC) // until 12:31:00, bucket 1m

	var recs []record
	cand := func(provider, status string, at time.Time, latency time.Duration) {
		recs = append(recs, record{kind: kindCandidate, cand: Candidate{RequestID: uuid.New(), Provider: provider,
			Status: status, CreatedAt: at, Latency: latency}})
	}
	mid := time.Date(2026, 11, 30, 12, 0, 10, 0, time.UTC) // bucket 29
	cand("a", CandidateSuccess, mid, 100*time.Millisecond)
	cand("a", CandidateSuccess, mid, 200*time.Millisecond)
	cand("a", CandidateFailed, mid, 300*time.Millisecond)
	cand("a", CandidateSkipped, mid, 0)                         // not attempted
	cand("a", CandidateUnused, mid, 0)                          // not attempted
	cand("a", CandidateAvailable, mid, 0)                       // not attempted (yet)
	cand("a", CandidatePending, now.Add(-time.Second), 0)       // bucket 59, still running
	cand("b", CandidateFailed, since, 40*time.Millisecond)      // the first instant of the window
	cand("b", CandidateFailed, since.Add(-time.Microsecond), 0) // just before it
	cand("b", CandidateSuccess, since.Add(time.Hour), 0)        // until: outside
	cand("c", CandidateSkipped, mid, 0)                         // a provider with no attempt: absent
	cand("d", CandidateCancelled, mid.Add(5*time.Minute), 0)    // attempted, not failed
	mustUpsert(t, w, recs)

	st, err := w.ProviderStats(context.Background(), time.Hour)
	if err != nil {
		t.Fatalf("ProviderStats: %v", err)
	}
	if st.Window != "1h0m0s" || st.Bucket != "1m0s" || !st.Since.Equal(since) || !st.Until.Equal(since.Add(time.Hour)) {
		t.Errorf("grid %s %s %s..%s, want 1h0m0s 1m0s %s..%s", st.Window, st.Bucket, st.Since, st.Until, since, since.Add(time.Hour))
	}
	type want struct {
		provider         string
		attempts, failed int64
		rate             float64
		p50, p99         int64 // -1: null
		nonEmpty         map[int][2]int64
	}
	wants := []want{
		// Percentiles are read off 2.5% classes: 200 and 300 ms come back
		// within 1.3%; 40 ms and below exactly.
		{"a", 4, 1, 0.25, 198, 303, map[int][2]int64{29: {3, 1}, 59: {1, 0}}},
		{"b", 1, 1, 1, 40, 40, map[int][2]int64{0: {1, 1}}},
		{"d", 1, 0, 0, -1, -1, map[int][2]int64{34: {1, 0}}},
	}
	if len(st.Providers) != len(wants) {
		t.Fatalf("%d providers %+v, want a, b, d", len(st.Providers), st.Providers)
	}
	ptr := func(p *int64) int64 {
		if p == nil {
			return -1
		}
		return *p
	}
	for i, wt := range wants {
		p := st.Providers[i]
		if p.Provider != wt.provider || p.Attempts != wt.attempts || p.Failed != wt.failed || p.FailureRate != wt.rate ||
			ptr(p.P50MS) != wt.p50 || ptr(p.P99MS) != wt.p99 {
			t.Errorf("provider %d: %s attempts %d failed %d rate %v p50 %d p99 %d; want %+v",
				i, p.Provider, p.Attempts, p.Failed, p.FailureRate, ptr(p.P50MS), ptr(p.P99MS), wt)
		}
		if len(p.Buckets) != StatsBuckets {
			t.Fatalf("%s: %d buckets, want %d", p.Provider, len(p.Buckets), StatsBuckets)
		}
		for j, b := range p.Buckets {
			if !b.Start.Equal(since.Add(time.Duration(j) * time.Minute)) {
				t.Errorf("%s bucket %d starts %s", p.Provider, j, b.Start)
			}
			if got := [2]int64{b.Attempts, b.Failed}; got != wt.nonEmpty[j] {
				t.Errorf("%s bucket %d: attempts, failed %v; want %v", p.Provider, j, got, wt.nonEmpty[j])
			}
		}
	}

	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"window":"1h0m0s"`, `"bucket":"1m0s"`, `"since":"2026-11-30T11:31:00Z"`,
		`"until":"2026-11-30T12:31:00Z"`, `"provider":"b","attempts":1,"failed":1,"failure_rate":1,`,
		`"buckets":[{"start":"2026-11-30T11:31:00Z","attempts":1,"failed":1},{"start":"2026-11-30T11:32:00Z","attempts":0,"failed":0}`,
		`"p50_latency_ms":null`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}

	if _, err := w.ProviderStats(context.Background(), 30*time.Second); err == nil {
		t.Error("window below the minimum: no error")
	}
	// An empty window: no providers, a JSON [] rather than null.
	w.now = func() time.Time { return now.Add(48 * time.Hour) }
	st, err = w.ProviderStats(context.Background(), time.Hour)
	if err != nil || st.Providers == nil || len(st.Providers) != 0 {
		t.Errorf("empty window: %+v, %v; want no providers", st.Providers, err)
	}
}

// TestPercentileClasses: a value read back from its latency class is exact
// below 40 ms and within 1.3% above, and the percentile picks the class
// percentile_disc would.
func TestPercentileClasses(t *testing.T) {
	for v := int64(1); v < 2_000_000; v += 1 + v/50 {
		class := int32(math.Floor(latencyClassesPerE * math.Log(float64(v))))
		got := *percentile([]latencyClass{{class, 1}}, 0.5)
		if v < 40 && got != v || math.Abs(float64(got-v)) > 0.013*float64(v)+0.5 {
			t.Fatalf("%d ms reads back as %d", v, got)
		}
	}
	h := []latencyClass{{200, 98}, {10, 1}, {300, 1}} // unsorted on purpose
	if p := *percentile(h, 0.01); p != int64(math.Round(math.Exp(10.5/40))) {
		t.Errorf("p1 = %d, want the lowest class", p)
	}
	if p := *percentile(h, 0.99); p != int64(math.Round(math.Exp(200.5/40))) {
		t.Errorf("p99 = %d, want class 200 (99 of 100 values at or below it)", p)
	}
	if percentile(nil, 0.5) != nil {
		t.Error("empty histogram: want nil")
	}
}

// TestProviderStatsCache: buckets that ended more than statsSettle ago are
// served from the cache, the recent ones are read every time, and a cached
// bucket is read again once statsCacheTTL has passed, so a late record shows
// up at most that late.
func TestProviderStatsCache(t *testing.T) {
	w := connectedWriter(t, migratedURL(t))
	now := time.Date(2026, 11, 30, 12, 30, 30, 0, time.UTC)
	w.now = func() time.Time { return now }
	settledAt := time.Date(2026, 11, 30, 11, 40, 10, 0, time.UTC) // ended 50 min before now
	liveAt := time.Date(2026, 11, 30, 12, 25, 0, 0, time.UTC)     // 5 min before now
	add := func(at time.Time) {
		mustUpsert(t, w, []record{{kind: kindCandidate, cand: Candidate{RequestID: uuid.New(), Provider: "a",
			Status: CandidateFailed, CreatedAt: at, Latency: 10 * time.Millisecond}}})
	}
	read := func() (total, settled, live int64) {
		t.Helper()
		st, err := w.ProviderStats(context.Background(), time.Hour)
		if err != nil || len(st.Providers) != 1 {
			t.Fatalf("ProviderStats: %+v, %v; want provider a", st.Providers, err)
		}
		p := st.Providers[0]
		for _, b := range p.Buckets {
			switch {
			case b.Start.Equal(settledAt.Truncate(time.Minute)):
				settled = b.Failed
			case b.Start.Equal(liveAt):
				live = b.Failed
			}
		}
		return p.Failed, settled, live
	}

	add(settledAt)
	if total, settled, live := read(); total != 1 || settled != 1 || live != 0 {
		t.Fatalf("first read: total %d, settled bucket %d, live bucket %d; want 1 1 0", total, settled, live)
	}
	add(settledAt) // lands in a cached bucket
	add(liveAt)    // lands in a bucket read every time
	if total, settled, live := read(); total != 2 || settled != 1 || live != 1 {
		t.Errorf("second read: total %d, settled bucket %d, live bucket %d; want 2 1 1 (the settled bucket cached)", total, settled, live)
	}
	now = now.Add(statsCacheTTL)
	if total, settled, live := read(); total != 3 || settled != 2 || live != 1 {
		t.Errorf("after the TTL: total %d, settled bucket %d, live bucket %d; want 3 2 1", total, settled, live)
	}
}
