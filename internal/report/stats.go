package report

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Provider statistics limits (GET /admin/stats/providers).
const (
	DefaultStatsWindow = time.Hour
	MinStatsWindow     = time.Minute
	MaxStatsWindow     = 24 * time.Hour
	// StatsBuckets is how many time buckets a window is cut into: one a minute
	// over the default hour, enough points for a chart.
	StatsBuckets = 60
)

// ProviderStats is the attempts of every provider over a window, in
// StatsBuckets equal time buckets, oldest first.
type ProviderStats struct {
	Window    string          `json:"window"` // Go duration, StatsBuckets × Bucket
	Bucket    string          `json:"bucket"` // Go duration
	Since     time.Time       `json:"since"`
	Until     time.Time       `json:"until"`
	Providers []ProviderTotal `json:"providers"`
}

// ProviderTotal is one provider's attempts over the window. Attempts are
// candidates that were tried (pending, streaming, success, failed,
// cancelled: not available, unused or skipped); Failed are those with
// status failed. The latency percentiles are over the attempts that ended
// (latency_ms set), nil when none did.
type ProviderTotal struct {
	Provider    string        `json:"provider"`
	Attempts    int64         `json:"attempts"`
	Failed      int64         `json:"failed"`
	FailureRate float64       `json:"failure_rate"`
	P50MS       *int64        `json:"p50_latency_ms"`
	P99MS       *int64        `json:"p99_latency_ms"`
	Buckets     []StatsBucket `json:"buckets"`
}

// StatsBucket is one time bucket, [Start, Start+Bucket).
type StatsBucket struct {
	Start    time.Time `json:"start"`
	Attempts int64     `json:"attempts"`
	Failed   int64     `json:"failed"`
}

// StatsGrid is the time grid of a window ending at now: the bucket is
// window/StatsBuckets cut to whole seconds, buckets are aligned to multiples
// of it (so successive reads share their buckets) and the last one holds now,
// still filling.
func StatsGrid(window time.Duration, now time.Time) (since, until time.Time, bucket time.Duration) {
	bucket = max((window / StatsBuckets).Truncate(time.Second), time.Second)
	until = now.UTC().Truncate(bucket).Add(bucket)
	return until.Add(-StatsBuckets * bucket), until, bucket
}

// statsSQL reads [$1, $2) in one pass over the attempted-candidates index:
// per (provider, time bucket, latency class) the attempts and failures, so
// that each bucket carries its latency histogram (the class is NULL for
// attempts still running). Percentiles are read off the histograms, which
// add up across buckets, so cached buckets combine with fresh ones; sorting
// the latencies for exact percentiles cost as much again as everything else
// (BENCHMARKS.md, "Admin reads"). A candidate counts in the bucket of its
// created_at: when its request was received, which the attempt loop stamps
// on every candidate, and what retention and the index key on.
var statsSQL = `SELECT provider, date_bin($3::interval, created_at, $4::timestamptz),
    CASE WHEN latency_ms IS NOT NULL THEN floor(` + strconv.Itoa(latencyClassesPerE) + ` * ln(greatest(latency_ms, 1)))::int END,
    count(*), count(*) FILTER (WHERE status = 'failed')
FROM request_candidates
WHERE created_at >= $1 AND created_at < $2 AND status IN ` + attemptedStatuses + `
GROUP BY 1, 2, 3`

// latencyClassesPerE sets the latency histogram's resolution: class k holds
// [e^(k/40), e^((k+1)/40)) ms, 2.5% wide, so a percentile read at a class's
// geometric middle is within 1.3% of the exact one (and exact below 40 ms,
// where the classes are narrower than a millisecond).
const latencyClassesPerE = 40

// ProviderStats reads the attempts per provider over the window ending now
// (see StatsGrid). Providers with no attempt in the window are absent;
// every listed provider has all StatsBuckets buckets, empty ones included.
// Buckets that ended more than statsSettle ago may come from a cache up to
// statsCacheTTL old (see statsCache). It returns ErrUnavailable before
// Postgres was ever reached.
func (w *Writer) ProviderStats(ctx context.Context, window time.Duration) (ProviderStats, error) {
	if window < MinStatsWindow || window > MaxStatsWindow {
		return ProviderStats{}, fmt.Errorf("report: stats window %s outside [%s, %s]", window, MinStatsWindow, MaxStatsWindow)
	}
	pool, err := w.readPool()
	if err != nil {
		return ProviderStats{}, err
	}
	now := w.now()
	since, until, bucket := StatsGrid(window, now)
	aggs, err := w.stats.window(ctx, now, since, bucket, func(ctx context.Context, from, to time.Time) (map[time.Time]*bucketAgg, error) {
		return queryStats(ctx, pool, from, to, since, bucket)
	})
	if err != nil {
		return ProviderStats{}, err
	}
	return assembleStats(since, until, bucket, aggs), nil
}

// queryStats reads the buckets of [from, to) on the grid that starts at
// origin; buckets without attempts are absent from the map.
func queryStats(ctx context.Context, pool *pgxpool.Pool, from, to, origin time.Time, bucket time.Duration) (map[time.Time]*bucketAgg, error) {
	rows, err := pool.Query(ctx, statsSQL, from, to, bucket, origin)
	if err != nil {
		return nil, fmt.Errorf("report: provider stats: %w", err)
	}
	out := map[time.Time]*bucketAgg{}
	var (
		name             string
		start            time.Time
		class            *int32
		attempts, failed int64
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &start, &class, &attempts, &failed}, func() error {
		a := out[start]
		if a == nil {
			a = &bucketAgg{providers: map[string]*providerAgg{}}
			out[start] = a
		}
		a.add(name, class, attempts, failed)
		class = nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("report: provider stats: %w", err)
	}
	return out, nil
}

// bucketAgg is one time bucket's counts per provider.
type bucketAgg struct {
	providers map[string]*providerAgg
}

// providerAgg is one provider's attempts, failures and latency histogram
// (class -> attempts) in one bucket.
type providerAgg struct {
	attempts, failed int64
	hist             map[int32]int64
}

func (a *bucketAgg) add(provider string, class *int32, attempts, failed int64) {
	p := a.providers[provider]
	if p == nil {
		p = &providerAgg{hist: map[int32]int64{}}
		a.providers[provider] = p
	}
	p.attempts += attempts
	p.failed += failed
	if class != nil {
		p.hist[*class] += attempts
	}
}

// assembleStats turns the window's buckets (aggs[i] is bucket i, nil when
// empty) into the answer: totals, failure rates and percentiles per
// provider, sorted by name.
func assembleStats(since, until time.Time, bucket time.Duration, aggs []*bucketAgg) ProviderStats {
	out := ProviderStats{
		Window: (StatsBuckets * bucket).String(), Bucket: bucket.String(),
		Since: since, Until: until, Providers: []ProviderTotal{},
	}
	byProvider := map[string]*ProviderTotal{}
	hist := map[string]map[int32]int64{}
	for i, a := range aggs {
		if a == nil {
			continue
		}
		for name, pa := range a.providers {
			p := byProvider[name]
			if p == nil {
				p = &ProviderTotal{Provider: name, Buckets: make([]StatsBucket, StatsBuckets)}
				for j := range p.Buckets {
					p.Buckets[j].Start = since.Add(time.Duration(j) * bucket)
				}
				byProvider[name] = p
				hist[name] = map[int32]int64{}
			}
			p.Buckets[i].Attempts += pa.attempts
			p.Buckets[i].Failed += pa.failed
			p.Attempts += pa.attempts
			p.Failed += pa.failed
			for c, n := range pa.hist {
				hist[name][c] += n
			}
		}
	}
	for name, p := range byProvider {
		if p.Attempts > 0 {
			p.FailureRate = float64(p.Failed) / float64(p.Attempts)
		}
		h := make([]latencyClass, 0, len(hist[name]))
		for c, n := range hist[name] {
			h = append(h, latencyClass{c, n})
		}
		p.P50MS, p.P99MS = percentile(h, 0.5), percentile(h, 0.99)
		out.Providers = append(out.Providers, *p)
	}
	slices.SortFunc(out.Providers, func(a, b ProviderTotal) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// latencyClass is one bar of a latency histogram (see statsSQL).
type latencyClass struct {
	class int32
	n     int64
}

// percentile reads percentile p off a histogram the way percentile_disc
// picks a value (the first whose cumulative share reaches p), as the
// geometric middle of its class rounded to a millisecond; nil when empty.
func percentile(h []latencyClass, p float64) *int64 {
	var total int64
	for _, c := range h {
		total += c.n
	}
	if total == 0 {
		return nil
	}
	slices.SortFunc(h, func(a, b latencyClass) int { return int(a.class - b.class) })
	rank := int64(math.Ceil(p * float64(total)))
	var seen int64
	for _, c := range h {
		seen += c.n
		if seen >= rank {
			v := int64(math.Round(math.Exp((float64(c.class) + 0.5) / latencyClassesPerE)))
			return &v
		}
	}
	return nil // not reached: seen ends at total >= rank
}
