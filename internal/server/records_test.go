package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/report"
)

// candRow is one request_candidates row as a test compares it.
type candRow struct {
	Status, ErrorType, Message, Provider, Endpoint, KeyID, SkipReason string
	Code                                                              int
}

func (r candRow) String() string {
	return fmt.Sprintf("%s/%d/%s(%s)", r.Status, r.Code, r.ErrorType, r.Provider)
}

// ledger reads the rows of one request once its final record has landed.
// rowsText is request id's row and its candidate rows as JSON text, once it
// settled: everything the ledger holds of it, for tests that look for a
// string in any column.
func (g *gateway) rowsText(t *testing.T, id string) string {
	t.Helper()
	g.ledger(t, id)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, g.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows string
	if err := conn.QueryRow(ctx, `SELECT (SELECT row_to_json(r)::text FROM requests r WHERE r.id = $1) ||
		coalesce((SELECT json_agg(c)::text FROM request_candidates c WHERE c.request_id = $1), '')`, id).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

func (g *gateway) ledger(t *testing.T, id string) (report.TimelineRequest, []candRow) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, g.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var req report.TimelineRequest
	eventually(t, 10*time.Second, "request "+id+" settled in Postgres", func() (bool, string) {
		err := conn.QueryRow(ctx, `SELECT status, status_code, error_type, candidate_count, client, priority,
			prompt_tokens, total_tokens, latency_ms, client_request_id, trace_id FROM requests WHERE id = $1`, id).
			Scan(&req.Status, &req.StatusCode, &req.ErrorType, &req.CandidateCount, &req.Client, &req.Priority,
				&req.PromptTokens, &req.TotalTokens, &req.LatencyMS, &req.ClientRequestID, &req.TraceID)
		return err == nil && req.Status != "pending", fmt.Sprintf("err %v, status %q", err, req.Status)
	})
	// Candidate rows of a settled request may land in the same or the next batch.
	var rows []candRow
	eventually(t, 10*time.Second, "candidates of "+id+" settled", func() (bool, string) {
		rows = rows[:0]
		rs, err := conn.Query(ctx, `SELECT status, coalesce(status_code,0), coalesce(error_type,''), coalesce(error_message,''),
			provider, endpoint, key_id, coalesce(skip_reason,'') FROM request_candidates
			WHERE request_id = $1 ORDER BY candidate_index, retry_index`, id)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var r candRow
			if err := rs.Scan(&r.Status, &r.Code, &r.ErrorType, &r.Message, &r.Provider, &r.Endpoint, &r.KeyID, &r.SkipReason); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
		rs.Close()
		settled := len(rows) == int(req.CandidateCount)
		for _, r := range rows {
			if r.Status == "available" || r.Status == "pending" || r.Status == "streaming" {
				settled = false
			}
		}
		return settled, fmt.Sprint(rows)
	})
	return req, rows
}

func wantRows(t *testing.T, got []candRow, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("candidate %d = %s, want %s (all: %v)", i, got[i], want[i], got)
		}
	}
}

// TestRecords: the ledger reads exactly as DESIGN section 7 says after each
// kind of outcome.
func TestRecords(t *testing.T) {
	g := start(t, setup{db: true, routes: watchRoutes + "\n", primary: mockupstream.Behavior{Usage: true}})

	// Plain success, with usage from a stream.
	resp, _ := g.post(t, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}`,
		"X-Request-Id", "client-abc.1")
	req, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "success/200/(primary)", "unused/0/(backup)")
	if req.Status != "success" || *req.StatusCode != 200 || req.TotalTokens == nil || *req.TotalTokens == 0 ||
		req.ClientRequestID == nil || *req.ClientRequestID != "client-abc.1" || *req.Priority != "interactive" {
		t.Fatalf("request row %+v", req)
	}
	if rows[0].Endpoint != strings.TrimSuffix(g.PrimaryURL, "/") || strings.Contains(rows[0].KeyID, "SENTINEL") {
		t.Fatalf("endpoint %q key_id %q", rows[0].Endpoint, rows[0].KeyID)
	}

	// Failover after a 503.
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Status: 503})
	resp, _ = g.post(t, chatBody(false))
	req, rows = g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/503/upstream_http_error(primary)", "success/200/(backup)")
	if req.Status != "success" {
		t.Fatalf("request %+v", req)
	}

	// First-byte watchdog.
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", FirstByteDelay: 2 * time.Second})
	resp, _ = g.post(t, chatBody(true))
	_, rows = g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/504/stream_first_byte_timeout(primary)", "success/200/(backup)")
	if rows[0].Message != "Stream first byte timeout" {
		t.Fatalf("message %q", rows[0].Message)
	}

	// Client-fault answer relayed.
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Status: 400})
	resp, _ = g.post(t, chatBody(false))
	req, rows = g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/400/upstream_http_error(primary)", "unused/0/(backup)")
	if req.Status != "failed" || *req.StatusCode != 400 {
		t.Fatalf("request %+v", req)
	}

	// Everything failing.
	g.Backup.SetBehavior(mockupstream.Behavior{Identity: "backup", Status: 500})
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Status: 502})
	resp, _ = g.post(t, chatBody(false))
	req, rows = g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/502/upstream_http_error(primary)", "failed/500/upstream_http_error(backup)")
	if req.Status != "failed" || *req.StatusCode != 502 {
		t.Fatalf("request %+v", req)
	}

	// The admin read returns the same timeline, in order.
	code, body := g.get(t, "/admin/requests/"+resp.Header.Get("X-Request-Id"), true)
	var tl report.Timeline
	if code != 200 || json.Unmarshal(body, &tl) != nil || len(tl.Candidates) != 2 || tl.Candidates[1].Provider != "backup" {
		t.Fatalf("admin timeline %d %s", code, body)
	}
	if code, _ := g.get(t, "/admin/requests/"+uuid.NewString(), true); code != 404 {
		t.Fatalf("unknown id: %d", code)
	}
	if strings.Contains(string(body), "SENTINEL") {
		t.Fatal("a key leaked into the ledger")
	}
}

// TestRecordsAdmissionAndCancel: admission timeouts and client cancellations
// are on record too.
func TestRecordsAdmissionAndCancel(t *testing.T) {
	g := start(t, setup{db: true, routes: oneSlotRoutes, primary: mockupstream.Behavior{Latency: 700 * time.Millisecond}})
	var wg sync.WaitGroup
	var firstID string
	wg.Add(1)
	go func() {
		defer wg.Done()
		r, _ := g.post(t, chatBody(false))
		firstID = r.Header.Get("X-Request-Id")
	}()
	eventually(t, 5*time.Second, "the primary busy with one request", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1, fmt.Sprintf("%+v", g.Primary.Stats())
	})
	resp, _ := g.post(t, chatBody(false))
	_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/429/gateway_admission_timeout(primary)", "success/200/(backup)")
	if rows[0].Message != "gateway admission gate gateway_upstream_target timed out after 100ms" {
		t.Fatalf("message %q", rows[0].Message)
	}
	wg.Wait()
	g.ledger(t, firstID) // settled, so the pending row found below is the next request's

	// A client that leaves mid-request.
	ctx, cancel := context.WithCancel(context.Background())
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(false)))
	var id string
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, err := g.client.Do(hreq)
		if err == nil {
			r.Body.Close()
		}
	}()
	eventually(t, 5*time.Second, "the primary busy with one request", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1, fmt.Sprintf("%+v", g.Primary.Stats())
	})
	// The request id is only on the response; find the pending request row instead.
	conn, err := pgx.Connect(context.Background(), g.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	eventually(t, 5*time.Second, "the pending request row in Postgres", func() (bool, string) {
		err := conn.QueryRow(context.Background(), `SELECT id::text FROM requests WHERE status='pending' ORDER BY created_at DESC LIMIT 1`).Scan(&id)
		return err == nil, fmt.Sprint(err)
	})
	cancel()
	<-done
	req, rows := g.ledger(t, id)
	wantRows(t, rows, "cancelled/499/client_cancelled(primary)", "unused/0/(backup)")
	if req.Status != "cancelled" || *req.StatusCode != 499 {
		t.Fatalf("request %+v", req)
	}
}

// TestRecordsClientAndPriority: the client's name and effective priority
// (capped by its configured ceiling) are on the request row.
func TestRecordsClientAndPriority(t *testing.T) {
	g := start(t, setup{db: true, routes: clientRoutes})
	resp, _ := g.post(t, chatBody(false), "Authorization", "Bearer batch-SENTINEL-token", "X-Gateway-Priority", "interactive")
	req, _ := g.ledger(t, resp.Header.Get("X-Request-Id"))
	if req.Client == nil || *req.Client != "batch" || *req.Priority != "background" {
		t.Fatalf("client %v priority %v, want batch at background", req.Client, req.Priority)
	}
	resp, _ = g.post(t, chatBody(false), "Authorization", "Bearer app-1-SENTINEL-token", "X-Gateway-Priority", "maintenance")
	req, _ = g.ledger(t, resp.Header.Get("X-Request-Id"))
	if *req.Client != "app-1" || *req.Priority != "maintenance" {
		t.Fatalf("client %v priority %v, want app-1 lowered to maintenance", *req.Client, *req.Priority)
	}
}
