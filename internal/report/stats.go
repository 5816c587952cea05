package report

import (
	"context"
	"fmt"
	"slices"
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

// A candidate counts in the bucket of its created_at: when its request was
// planned, within the request's timeout of the attempt itself, and the
// column retention and the attempted-candidates index key on.
const statsBucketsSQL = `SELECT provider, date_bin($3::interval, created_at, $1::timestamptz) AS start,
    count(*), count(*) FILTER (WHERE status = 'failed')
FROM request_candidates
WHERE created_at >= $1 AND created_at < $2 AND status IN ` + attemptedStatuses + `
GROUP BY 1, 2`

// The percentiles sort the window's latencies, a separate pass: run beside
// the buckets' hash aggregate on a second connection.
const statsLatencySQL = `SELECT provider,
    percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_ms),
    percentile_disc(0.99) WITHIN GROUP (ORDER BY latency_ms)
FROM request_candidates
WHERE created_at >= $1 AND created_at < $2 AND status IN ` + attemptedStatuses + `
    AND latency_ms IS NOT NULL
GROUP BY 1`

// ProviderStats reads the attempts per provider over the window ending now
// (see StatsGrid). Providers with no attempt in the window are absent;
// every listed provider has all StatsBuckets buckets, empty ones included.
// It returns ErrUnavailable before Postgres was ever reached.
func (w *Writer) ProviderStats(ctx context.Context, window time.Duration) (ProviderStats, error) {
	if window < MinStatsWindow || window > MaxStatsWindow {
		return ProviderStats{}, fmt.Errorf("report: stats window %s outside [%s, %s]", window, MinStatsWindow, MaxStatsWindow)
	}
	pool := w.pool.Load()
	if pool == nil {
		return ProviderStats{}, ErrUnavailable
	}
	return providerStats(ctx, pool, window, w.now())
}

type latencyPair struct{ p50, p99 *int64 }

func providerStats(ctx context.Context, pool *pgxpool.Pool, window time.Duration, now time.Time) (ProviderStats, error) {
	since, until, bucket := StatsGrid(window, now)
	out := ProviderStats{
		Window: (StatsBuckets * bucket).String(), Bucket: bucket.String(),
		Since: since, Until: until, Providers: []ProviderTotal{},
	}

	type latencies struct {
		byProvider map[string]latencyPair
		err        error
	}
	latCh := make(chan latencies, 1)
	go func() {
		m := map[string]latencyPair{}
		rows, err := pool.Query(ctx, statsLatencySQL, since, until)
		if err == nil {
			var name string
			var p latencyPair
			_, err = pgx.ForEachRow(rows, []any{&name, &p.p50, &p.p99}, func() error {
				m[name] = p
				p = latencyPair{}
				return nil
			})
		}
		latCh <- latencies{m, err}
	}()

	byProvider := map[string]*ProviderTotal{}
	rows, err := pool.Query(ctx, statsBucketsSQL, since, until, bucket)
	if err == nil {
		var name string
		var start time.Time
		var attempts, failed int64
		_, err = pgx.ForEachRow(rows, []any{&name, &start, &attempts, &failed}, func() error {
			p := byProvider[name]
			if p == nil {
				p = &ProviderTotal{Provider: name, Buckets: make([]StatsBucket, StatsBuckets)}
				for i := range p.Buckets {
					p.Buckets[i].Start = since.Add(time.Duration(i) * bucket)
				}
				byProvider[name] = p
			}
			i := int(start.Sub(since) / bucket)
			if i < 0 || i >= StatsBuckets {
				return fmt.Errorf("bucket %s outside the window %s..%s", start, since, until)
			}
			p.Buckets[i].Attempts += attempts
			p.Buckets[i].Failed += failed
			p.Attempts += attempts
			p.Failed += failed
			return nil
		})
	}
	lat := <-latCh // always, so the goroutine never outlives the call
	if err != nil {
		return ProviderStats{}, fmt.Errorf("report: provider stats: %w", err)
	}
	if lat.err != nil {
		return ProviderStats{}, fmt.Errorf("report: provider latency: %w", lat.err)
	}
	for _, p := range byProvider {
		if p.Attempts > 0 {
			p.FailureRate = float64(p.Failed) / float64(p.Attempts)
		}
		l := lat.byProvider[p.Provider]
		p.P50MS, p.P99MS = l.p50, l.p99
		out.Providers = append(out.Providers, *p)
	}
	slices.SortFunc(out.Providers, func(a, b ProviderTotal) int { return strings.Compare(a.Provider, b.Provider) })
	return out, nil
}
