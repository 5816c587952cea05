package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	ledgerpkg "github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/secret"
)

// The ledger phase: the operator console's reads (GET /admin/requests and GET
// /admin/stats/providers) against a day of records. It fills a scratch
// database with ledgerSpec.rows requests (about 1.3 candidates each, spread
// over the last 24 hours, with several models, clients, providers and
// statuses) by INSERT ... SELECT over generate_series, entirely inside
// Postgres, starts a second gateway process on it, and times each query shape
// over HTTP, one request at a time, as a console would send them. The
// scratch database is dropped at the end.
const (
	ledgerDatabase = "gateway_bench_ledger"
	ledgerTarget   = 50 * time.Millisecond // p99 of every list and the 1 h statistics
)

// ledgerSpec sizes the phase.
type ledgerSpec struct {
	rows    int // requests generated
	samples int // timed requests per query shape
	warmup  int // untimed requests per query shape before those
}

// ledgerCase is one query shape.
type ledgerCase struct {
	name   string
	path   string // with its query; "" for a list page before a random cursor
	deep   string // with path "": more of that page's query, from "&"
	target bool   // held to ledgerTarget
	n      int    // samples, when not spec.samples
}

// ledgerResult is one query shape's latencies.
type ledgerResult struct {
	c        ledgerCase
	lat      []time.Duration // sorted
	first    time.Duration   // the first, untimed request: cold caches
	errs     int
	lastRows int // rows or providers in the last answer, to show it was not empty
}

// ledgerCases are the shapes timed. The generated data has four models, five
// clients (one of them, batch-rare, 2% of the requests), five providers (one,
// rare-provider, on 1%), 90% successes, 7% failures, 2.5% cancellations and
// 0.5% pending.
var ledgerCases = []ledgerCase{
	{name: "list, unfiltered", path: "/admin/requests", target: true},
	{name: "list, limit=200", path: "/admin/requests?limit=200", target: true},
	{name: "list, status=failed", path: "/admin/requests?status=failed", target: true},
	{name: "list, status=pending (0.5%)", path: "/admin/requests?status=pending", target: true},
	{name: "list, status=success", path: "/admin/requests?status=success", target: true},
	{name: "list, model=gpt-4o", path: "/admin/requests?model=gpt-4o", target: true},
	{name: "list, client=backend", path: "/admin/requests?client=backend", target: true},
	{name: "list, client=batch-rare (2%)", path: "/admin/requests?client=batch-rare", target: true},
	{name: "list, provider=azure", path: "/admin/requests?provider=azure", target: true},
	{name: "list, provider=rare-provider (1%)", path: "/admin/requests?provider=rare-provider", target: true},
	{name: "list, all filters", path: "/admin/requests?status=failed&model=gpt-4o&client=web&provider=openai", target: true},
	{name: "list, deep page (before= anywhere in the 24 h)", deep: "", target: true},
	{name: "list, deep page, status=cancelled", deep: "&status=cancelled", target: true},
	{name: "list, deep page, provider=rare-provider", deep: "&provider=rare-provider", target: true},
	{name: "stats, window=1h", path: "/admin/stats/providers?window=1h", target: true},
	{name: "stats, window=15m", path: "/admin/stats/providers?window=15m", target: true},
	{name: "stats, window=24h (not a target)", path: "/admin/stats/providers?window=24h", n: 10},
}

// ledgerRequestsSQL generates the requests: row i is created i/rows of a day
// ago, one row in ten sharing its neighbour's millisecond so that paging meets
// ties. The multiplicative hashes spread statuses over time.
const ledgerRequestsSQL = `
INSERT INTO requests (id, created_at, model, route, replica, stream, client, priority, status,
    status_code, error_type, latency_ms, first_byte_ms, candidate_count,
    prompt_tokens, completion_tokens, total_tokens, finished_at)
SELECT id, created_at, model, 'chat', replica, stream, client, 'interactive', status,
    CASE status WHEN 'success' THEN 200 WHEN 'failed' THEN 502 WHEN 'cancelled' THEN 499 END,
    CASE status WHEN 'failed' THEN 'upstream_http_error' WHEN 'cancelled' THEN 'client_cancelled' END,
    CASE WHEN status <> 'pending' THEN lat END,
    CASE WHEN status <> 'pending' THEN lat / 4 END,
    cands,
    CASE WHEN status = 'success' THEN 40 END, CASE WHEN status = 'success' THEN 60 END,
    CASE WHEN status = 'success' THEN 100 END,
    CASE WHEN status <> 'pending' THEN created_at + lat * interval '1 millisecond' END
FROM (
    SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid AS id,
        date_trunc('milliseconds', now() - interval '24 hours' * ((i - (i % 10 = 1)::int) / $1::float8)) AS created_at,
        (ARRAY['gpt-4o-mini', 'gpt-4o', 'claude-sonnet', 'embed-small'])[1 + (i % 4)::int] AS model,
        'gw-' || (i % 3) AS replica,
        i % 2 = 0 AS stream,
        CASE WHEN i % 50 = 0 THEN 'batch-rare' ELSE (ARRAY['web', 'mobile', 'backend', 'ops'])[1 + ((i / 7) % 4)::int] END AS client,
        CASE WHEN h < 900 THEN 'success' WHEN h < 970 THEN 'failed' WHEN h < 995 THEN 'cancelled' ELSE 'pending' END AS status,
        50 + (i * 7919) % 2000 AS lat,
        CASE WHEN h2 < 300 THEN 2 ELSE 1 END AS cands
    FROM (SELECT i, (i * 2654435761) % 1000 AS h, (i * 40503) % 1000 AS h2
          FROM generate_series(1::bigint, $1::bigint) AS i) g
) s`

// ledgerCandidatesSQL generates the candidates of the same rows: one each,
// plus a second for 30% of them (20% after a failed first attempt, 10% an
// unused backup).
const ledgerCandidatesSQL = `
INSERT INTO request_candidates (request_id, candidate_index, retry_index, provider, endpoint, key_id, model,
    status, status_code, error_type, latency_ms, first_byte_ms, started_at, finished_at, created_at)
SELECT id, idx, 0, provider, 'https://' || provider || '.example', 'key-' || (i % 2), model, status,
    CASE status WHEN 'success' THEN 200 WHEN 'failed' THEN 502 WHEN 'cancelled' THEN 499 END,
    CASE status WHEN 'failed' THEN 'upstream_http_error' WHEN 'cancelled' THEN 'client_cancelled' END,
    CASE WHEN status IN ('success', 'failed', 'cancelled') THEN lat END,
    CASE WHEN status IN ('success', 'failed', 'cancelled') THEN lat / 4 END,
    CASE WHEN status <> 'unused' THEN created_at END,
    CASE WHEN status IN ('success', 'failed', 'cancelled') THEN created_at + lat * interval '1 millisecond' END,
    created_at
FROM (
    SELECT i, ('00000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid AS id, c.idx,
        date_trunc('milliseconds', now() - interval '24 hours' * ((i - (i % 10 = 1)::int) / $1::float8)) AS created_at,
        (ARRAY['gpt-4o-mini', 'gpt-4o', 'claude-sonnet', 'embed-small'])[1 + (i % 4)::int] AS model,
        CASE WHEN i % 100 = 0 AND c.idx = 0 THEN 'rare-provider'
             ELSE (ARRAY['openai', 'azure', 'anthropic', 'bedrock'])[1 + ((i / 3 + c.idx) % 4)::int] END AS provider,
        CASE
            WHEN c.idx = 0 AND h2 < 200 THEN 'failed'
            WHEN c.idx = 1 AND h2 >= 200 THEN 'unused'
            WHEN h < 900 THEN 'success' WHEN h < 970 THEN 'failed' WHEN h < 995 THEN 'cancelled' ELSE 'pending'
        END AS status,
        CASE WHEN c.idx = 0 AND h2 < 200 THEN 20 + (i * 31) % 300 ELSE 50 + (i * 7919) % 2000 END AS lat
    FROM (SELECT i, (i * 2654435761) % 1000 AS h, (i * 40503) % 1000 AS h2
          FROM generate_series(1::bigint, $1::bigint) AS i) g
    CROSS JOIN LATERAL (SELECT 0 AS idx UNION ALL SELECT 1 WHERE g.h2 < 300) c
) s`

// ledger runs the phase and adds its table to the report's notes.
func (b *bencher) ledger(ctx context.Context, rep *report) {
	if b.s.recordsOff {
		rep.notes = append(rep.notes, "ledger phase skipped: records are off (BENCH_RECORDS=off)")
		return
	}
	results, gen, err := b.runLedger(ctx)
	if err != nil {
		logf("ledger: %v", err)
		rep.notes = append(rep.notes, "**ledger phase failed**: "+err.Error())
		return
	}
	rep.notes = append(rep.notes, ledgerTable(b.s.ledger, gen, results))
}

// runLedger creates, fills, serves, times and drops the scratch ledger.
func (b *bencher) runLedger(ctx context.Context) ([]ledgerResult, string, error) {
	spec := b.s.ledger
	adminDSN := b.st.pg.dsn
	dsn, err := ledgerDB(ctx, adminDSN, true)
	if err != nil {
		return nil, "", err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := ledgerDB(dctx, adminDSN, false); err != nil {
			logf("ledger: drop %s: %v", ledgerDatabase, err)
		}
	}()
	if err := ledgerpkg.Migrate(ctx, secret.New(dsn), "up", io.Discard); err != nil {
		return nil, "", err
	}
	gen, err := fillLedger(ctx, dsn, spec.rows)
	if err != nil {
		return nil, "", err
	}
	logf("ledger: %s", gen)
	cursors, err := sampleCursors(ctx, dsn)
	if err != nil {
		return nil, "", err
	}

	env := slices.Concat(cleanEnv(), []string{
		"GATEWAY_LISTEN_ADDR=" + loopbackAny,
		"GATEWAY_CONFIG=" + filepath.Join(b.st.tmp, "config", "routes.yaml"),
		"GATEWAY_DATABASE_URL=" + dsn,
		"GATEWAY_SPOOL_DIR=" + filepath.Join(b.st.tmp, "spool-ledger"),
		"GATEWAY_LOG_FORMAT=json",
		"GATEWAY_ADMIN_TOKEN=" + b.st.adminToken,
		"GATEWAY_REPLICA_ID=bench-ledger",
		"BENCH_UPSTREAM_KEY=unused",
	})
	gw, base, err := b.st.startPhaseGateway(ctx, "gateway-ledger", env)
	if err != nil {
		return nil, "", err
	}
	defer gw.stop(10 * time.Second)
	client := newClient()
	defer client.CloseIdleConnections()
	// The writer's pool is up once the list answers 200 (503 before).
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := b.adminGet(ctx, client, base+"/admin/requests?limit=1"); err == nil {
			break
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, "", fmt.Errorf("ledger gateway never answered the list: %w", err)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	var results []ledgerResult
	for _, c := range ledgerCases {
		if ctx.Err() != nil {
			break
		}
		n := spec.samples
		if c.n > 0 {
			n = min(c.n, spec.samples)
		}
		r := ledgerResult{c: c}
		for i := range spec.warmup + n {
			path := c.path
			if path == "" {
				path = "/admin/requests?before=" + url.QueryEscape(cursors[rng.IntN(len(cursors))]) + c.deep
			}
			start := time.Now()
			rows, err := b.adminGet(ctx, client, base+path)
			d := time.Since(start)
			if i == 0 {
				r.first = d
			}
			if i < spec.warmup {
				continue
			}
			if err != nil {
				r.errs++
				continue
			}
			r.lat = append(r.lat, d)
			r.lastRows = rows
		}
		slices.Sort(r.lat)
		logf("ledger %-48s first %7s  p50 %6s  p99 %6s ms  %d errors", c.name, ms(r.first), ms(pct(r.lat, 0.5)), ms(pct(r.lat, 0.99)), r.errs)
		results = append(results, r)
	}
	return results, gen, nil
}

// adminGet sends one authenticated GET and returns how many requests or
// providers the answer holds.
func (b *bencher) adminGet(ctx context.Context, c *http.Client, u string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+b.st.adminToken)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %d %s", u, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var v struct {
		Requests  []json.RawMessage `json:"requests"`
		Providers []json.RawMessage `json:"providers"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, fmt.Errorf("%s: %w", u, err)
	}
	return len(v.Requests) + len(v.Providers), nil
}

// ledgerDB creates (fresh) or drops the scratch database on the server of
// adminDSN and returns its DSN.
func ledgerDB(ctx context.Context, adminDSN string, create bool) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, adminDSN)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	stmts := []string{"DROP DATABASE IF EXISTS " + ledgerDatabase + " WITH (FORCE)"}
	if create {
		stmts = append(stmts, "CREATE DATABASE "+ledgerDatabase)
	}
	for _, q := range stmts {
		if _, err := conn.Exec(cctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	u, err := url.Parse(adminDSN)
	if err != nil {
		return "", err
	}
	u.Path = "/" + ledgerDatabase
	return u.String(), nil
}

// fillLedger generates the rows and vacuums, and says how long it took.
func fillLedger(ctx context.Context, dsn string, rows int) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(cctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	t0 := time.Now()
	if _, err := conn.Exec(cctx, ledgerRequestsSQL, rows); err != nil {
		return "", fmt.Errorf("generate requests: %w", err)
	}
	t1 := time.Now()
	if _, err := conn.Exec(cctx, ledgerCandidatesSQL, rows); err != nil {
		return "", fmt.Errorf("generate candidates: %w", err)
	}
	t2 := time.Now()
	// What autovacuum would do by itself soon after: statistics for the
	// planner and the visibility map for index-only scans.
	if _, err := conn.Exec(cctx, "VACUUM ANALYZE requests, request_candidates"); err != nil {
		return "", fmt.Errorf("vacuum: %w", err)
	}
	var nreq, ncand int64
	if err := conn.QueryRow(cctx, "SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM request_candidates)").Scan(&nreq, &ncand); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d requests and %d candidate rows over the last 24 h, generated in %.1f s (requests %.1f s, candidates %.1f s, VACUUM ANALYZE %.1f s) with every index of the migrations in place",
		nreq, ncand, time.Since(t0).Seconds(), t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), time.Since(t2).Seconds()), nil
}

// sampleCursors picks about a thousand rows anywhere in the ledger and
// returns them as list cursors, for the deep-paging shapes.
func sampleCursors(ctx context.Context, dsn string) ([]string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT created_at, id FROM requests TABLESAMPLE SYSTEM (0.1) REPEATABLE (7)")
	if err != nil {
		return nil, err
	}
	var out []string
	var c ledgerpkg.Cursor
	_, err = pgx.ForEachRow(rows, []any{&c.CreatedAt, &c.ID}, func() error {
		out = append(out, c.String())
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("no rows sampled")
	}
	return out, err
}

// ledgerTable renders the phase's results as a markdown table.
func ledgerTable(spec ledgerSpec, gen string, results []ledgerResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ledger phase: %s; each shape timed over %d sequential requests after %d untimed (the first of which is shown alone: for the statistics, the read before any bucket is cached), through the gateway's HTTP endpoints on loopback (target p99 ≤ %v).\n\n",
		gen, spec.samples, spec.warmup, ledgerTarget)
	b.WriteString("| query | rows in answer | first request ms | p50 ms | p99 ms | errors | target |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range results {
		verdict := "-"
		if r.c.target {
			verdict = "met"
			if len(r.lat) == 0 || pct(r.lat, 0.99) > ledgerTarget || r.errs > 0 {
				verdict = "**missed**"
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %d | %s |\n", r.c.name, r.lastRows, ms(r.first), ms(pct(r.lat, 0.5)), ms(pct(r.lat, 0.99)), r.errs, verdict)
	}
	return b.String()
}
