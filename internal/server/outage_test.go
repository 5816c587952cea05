package server_test

import (
	"context"
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
	waitFor(t, func() bool { _, b := g.get(t, "/readyz", false); return strings.Contains(string(b), `"report":"ok"`) })

	var (
		mu      sync.Mutex
		ids     []string
		failed  atomic.Int64
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
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	proxy.Down()
	sawSpooling := false
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); {
		code, b := g.get(t, "/readyz", false)
		if code != 200 {
			t.Fatalf("/readyz = %d during the outage, want 200", code)
		}
		sawSpooling = sawSpooling || strings.Contains(string(b), `"report":"spooling"`)
		time.Sleep(50 * time.Millisecond)
	}
	proxy.Up()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	workers.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed during the outage", failed.Load())
	}
	if !sawSpooling {
		t.Error("/readyz never reported spooling during the outage")
	}
	if len(ids) < 50 {
		t.Fatalf("only %d requests sent", len(ids))
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
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
		if reqs == len(ids) && settled == len(ids) && cands == 2*len(ids) && dupes == 0 {
			t.Logf("%d requests, %d candidate rows, all present once (spooled %d, replayed %d)",
				reqs, cands, g.Reports.Stats().Spooled, g.Reports.Stats().Replayed)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the outage: %d/%d requests (%d settled), %d/%d candidate rows, %d requests with a wrong candidate count",
				reqs, len(ids), settled, cands, 2*len(ids), dupes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := g.Reports.Stats(); s.Dropped != 0 {
		t.Fatalf("dropped %d records", s.Dropped)
	}
}
