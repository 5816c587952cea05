package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/internal/pgtest"
)

// TestPostgresOutageUnderLoad: while the gateway serves steady load,
// Postgres becomes unreachable and returns. No request fails, /readyz stays
// 200 and says it is spooling, and afterwards every request and candidate row
// is present exactly once.
func TestPostgresOutageUnderLoad(t *testing.T) {
	dsn := pgtest.DatabaseURL(t)
	proxy := pgtest.NewProxy(t, pgtest.TargetOf(t, dsn))
	proxy.Up()
	g := start(t, setup{env: map[string]string{"GATEWAY_DATABASE_URL": pgtest.ViaProxy(t, dsn, proxy)}})
	g.DatabaseURL = dsn

	// Let migrations run through the proxy before the outage.
	eventually(t, 10*time.Second, "/readyz reports the store ok", func() (bool, string) {
		_, b := g.get(t, "/readyz", false)
		return strings.Contains(string(b), `"report":"ok"`), string(b)
	})

	var (
		mu      sync.Mutex
		ids     []string
		failed  atomic.Int64
		sent    atomic.Int64
		stop    = make(chan struct{})
		workers sync.WaitGroup
	)
	for w := 0; w < 4; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, _ := g.post(t, chatBody(w%2 == 0))
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
				mu.Lock()
				ids = append(ids, resp.Header.Get("X-Request-Id"))
				mu.Unlock()
				sent.Add(1)
				// Pace of the steady load, part of the scenario: no
				// assertion depends on how many requests fit in a phase,
				// each phase waits for its own count.
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	// A failed wait ends the test early; the load must stop before the
	// gateway it targets does (cleanups run last first).
	halt := sync.OnceFunc(func() { close(stop); workers.Wait() })
	t.Cleanup(halt)
	// Each phase lasts until the store has shown the state it is about and
	// at least perPhase requests were answered in it, so that all three
	// (direct writes, spooling, replay) happen under load.
	const perPhase = 20
	load := func() string { return fmt.Sprintf("%d requests, writer %+v", sent.Load(), g.Reports.Stats()) }
	eventually(t, 10*time.Second, "records written to Postgres under load before the outage", func() (bool, string) {
		return g.Reports.Stats().Written > 0 && sent.Load() >= perPhase, load()
	})

	proxy.Down()
	// /readyz must answer 200 on every poll while records spool.
	var spoolingFrom int64 = -1
	eventually(t, 10*time.Second, "/readyz reports spooling while requests keep succeeding", func() (bool, string) {
		code, b := g.get(t, "/readyz", false)
		if code != 200 {
			t.Fatalf("/readyz = %d during the outage, want 200", code)
		}
		if spoolingFrom < 0 && strings.Contains(string(b), `"report":"spooling"`) {
			spoolingFrom = sent.Load()
		}
		return spoolingFrom >= 0 && sent.Load()-spoolingFrom >= perPhase, string(b) + ", " + load()
	})

	proxy.Up()
	returnedAt := sent.Load()
	eventually(t, 20*time.Second, "the spool replayed (/readyz report ok) under load after Postgres returned", func() (bool, string) {
		code, b := g.get(t, "/readyz", false)
		if code != 200 {
			t.Fatalf("/readyz = %d after Postgres returned, want 200", code)
		}
		ok := strings.Contains(string(b), `"report":"ok"`) && g.Reports.Stats().Replayed > 0
		return ok && sent.Load()-returnedAt >= perPhase, string(b) + ", " + load()
	})
	halt()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed during the outage", failed.Load())
	}
	if len(ids) < 3*perPhase {
		t.Fatalf("only %d requests sent", len(ids))
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	eventually(t, 20*time.Second, "every request and candidate row present exactly once after the outage", func() (bool, string) {
		var reqs, settled, cands, dupes int
		err := conn.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM requests WHERE id::text = ANY($1)),
			(SELECT count(*) FROM requests WHERE id::text = ANY($1) AND status = 'success'),
			(SELECT count(*) FROM request_candidates WHERE request_id::text = ANY($1)),
			(SELECT count(*) FROM (SELECT request_id FROM request_candidates WHERE request_id::text = ANY($1)
				GROUP BY request_id HAVING count(*) <> 2) d)`, ids).Scan(&reqs, &settled, &cands, &dupes)
		if err != nil {
			t.Fatal(err)
		}
		return reqs == len(ids) && settled == len(ids) && cands == 2*len(ids) && dupes == 0,
			fmt.Sprintf("%d/%d requests (%d settled), %d/%d candidate rows, %d requests with a wrong candidate count",
				reqs, len(ids), settled, cands, 2*len(ids), dupes)
	})
	t.Logf("%d requests, all rows present once (spooled %d, replayed %d)",
		len(ids), g.Reports.Stats().Spooled, g.Reports.Stats().Replayed)
	if s := g.Reports.Stats(); s.Dropped != 0 {
		t.Fatalf("dropped %d records", s.Dropped)
	}
}
