package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/report"
)

// The race before the commit point (DESIGN section 10.2), end to end: the
// real gateway between two mocks over loopback, records in Postgres.

// timedStream is one streaming request read to its end, with the moment its
// first data event reached the client.
type timedStream struct {
	Status     int
	By         string // X-Mock-Identity
	ID         string // X-Request-Id
	Body       []byte
	FirstChunk time.Duration // from sending to the first "data: " line; 0 if none
	Elapsed    time.Duration
	ReadErr    error // the body's read error: an aborted stream ends with one
}

// streamTimed sends a streaming chat request for model and reads the answer
// line by line, so that the first chunk is timed as the client sees it.
func (g *gateway) streamTimed(t *testing.T, model string, hdr ...string) timedStream {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(streamBody(model)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	begin := time.Now()
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := timedStream{Status: resp.StatusCode, By: resp.Header.Get("X-Mock-Identity"), ID: resp.Header.Get("X-Request-Id")}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if s.FirstChunk == 0 && bytes.HasPrefix(line, []byte("data: ")) {
			s.FirstChunk = time.Since(begin)
		}
		s.Body = append(s.Body, line...)
		if err != nil {
			if err != io.EOF {
				s.ReadErr = err
			}
			break
		}
	}
	s.Elapsed = time.Since(begin)
	return s
}

// mockVolatile matches what differs between two answers of the same mock to
// the same request: the completion id and the creation second.
var mockVolatile = regexp.MustCompile(`"id":"chatcmpl-mock-\d+","object":"chat.completion.chunk","created":\d+`)

// referenceStream is what a mock with identity answers to a plain streaming
// request for upstreamModel, with its volatile fields blanked: the bytes a
// client must get when that mock serves it through the gateway.
func referenceStream(t *testing.T, identity, upstreamModel string) []byte {
	t.Helper()
	ts := httptest.NewServer(mockupstream.New(mockupstream.Behavior{Identity: identity}))
	defer ts.Close()
	resp, err := ts.Client().Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody(upstreamModel)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("reference stream: %d %v", resp.StatusCode, err)
	}
	ts.Client().CloseIdleConnections()
	return blankVolatile(b)
}

func blankVolatile(b []byte) []byte {
	return mockVolatile.ReplaceAll(b, []byte(`"id":"-","object":"chat.completion.chunk","created":0`))
}

// TestRaceCommitPoint: with stream_commit {events: 3}, a primary whose stream
// carries an error object, or is cut, before its third event fails over
// invisibly. The client gets the backup's stream byte for byte with a 200,
// none of the primary's held events, and the rows say why the primary lost.
func TestRaceCommitPoint(t *testing.T) {
	// The primary fails twice in a row here, under the three failures that
	// would cool it: each case meets a healthy primary.
	g := start(t, setup{db: true, primaryExtra: "    stream_commit: { events: 3 }"})
	want := referenceStream(t, "backup", "up-backup-mini")
	tests := []struct {
		name     string
		primary  mockupstream.Behavior
		wantRow  string
		wantMsg  string // in the primary's error_message
		wantMock func(mockupstream.Stats) bool
	}{
		{
			// Role chunk, one content chunk, then the error object as the
			// third event: the very event that would have committed.
			name:     "error object",
			primary:  mockupstream.Behavior{Identity: "primary", ErrorAfterChunks: 1},
			wantRow:  "failed/502/upstream_stream_error(primary)",
			wantMsg:  "mock stream error",
			wantMock: func(s mockupstream.Stats) bool { return s.Failed == 1 },
		},
		{
			name:     "cut",
			primary:  mockupstream.Behavior{Identity: "primary", ResetAfterChunks: 1},
			wantRow:  "failed/502/stream_interrupted(primary)",
			wantMsg:  "commit point",
			wantMock: func(s mockupstream.Stats) bool { return s.Resets == 1 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g.Primary.SetBehavior(tt.primary)
			primBefore, backBefore := g.Primary.Stats(), g.Backup.Stats()
			s := g.streamTimed(t, "gpt-4o-mini")
			if s.Status != http.StatusOK || s.By != "backup" || s.ReadErr != nil {
				t.Fatalf("status %d by %q (read error %v), want 200 by backup:\n%s", s.Status, s.By, s.ReadErr, s.Body)
			}
			if got := blankVolatile(s.Body); !bytes.Equal(got, want) {
				t.Fatalf("client got\n%s\nwant the backup's stream\n%s", got, want)
			}
			if bytes.Contains(s.Body, []byte("primary")) || bytes.Contains(s.Body, []byte("up-primary-mini")) {
				t.Fatalf("the primary's held events reached the client:\n%s", s.Body)
			}
			req, rows := g.ledger(t, s.ID)
			wantRows(t, rows, tt.wantRow, "success/200/(backup)")
			if !strings.Contains(rows[0].Message, tt.wantMsg) {
				t.Errorf("primary error_message %q, want it to mention %q", rows[0].Message, tt.wantMsg)
			}
			if req.Status != "success" || *req.StatusCode != http.StatusOK {
				t.Errorf("request row %s %d, want success 200", req.Status, *req.StatusCode)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := g.Primary.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			prim, back := g.Primary.Stats(), g.Backup.Stats()
			prim.Failed -= primBefore.Failed
			prim.Resets -= primBefore.Resets
			if !tt.wantMock(prim) || back.Completed-backBefore.Completed != 1 {
				t.Errorf("primary stats %+v, backup completed %d more; want the primary's failure counted and one backup answer",
					prim, back.Completed-backBefore.Completed)
			}
		})
	}
	g.assertIdle(t)
}

// hedgeRoutes: the primary, slow to its first byte but under its watchdog,
// and a backup; gpt-4o-mini hedges after 200ms, unhedged never does.
const hedgeRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
    timeouts: { first_byte: 10s }
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gpt-4o-mini
    hedge: { after: 200ms }
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
  - name: unhedged
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
`

// TestRaceHedge: a primary whose first byte comes at 3s is hedged after
// 200ms; the backup's first chunk reaches the client at once, the primary's
// upstream request is cancelled, and the records, metrics and admin
// timeline show the hedge. Without a hedge block the gateway waits for the
// primary as before.
func TestRaceHedge(t *testing.T) {
	const (
		backWon    = "gateway_hedges_total{provider=backup,result=won}"
		backLost   = "gateway_hedges_total{provider=backup,result=lost}"
		backFailed = "gateway_hedges_total{provider=backup,result=failed}"
		primWon    = "gateway_hedges_total{provider=primary,result=won}"
		primLost   = "gateway_hedges_total{provider=primary,result=lost}"
	)
	g := start(t, setup{db: true, routes: hedgeRoutes,
		primary: mockupstream.Behavior{FirstByteDelay: 3 * time.Second}})

	t.Run("hedged", func(t *testing.T) {
		before := g.scrape(t)
		s := g.streamTimed(t, "gpt-4o-mini")
		if s.Status != http.StatusOK || s.By != "backup" {
			t.Fatalf("status %d by %q, want 200 by backup:\n%s", s.Status, s.By, s.Body)
		}
		if data := sseData(s.Body); len(data) == 0 || !strings.Contains(data[0], `"model":"up-backup-mini"`) ||
			bytes.Contains(s.Body, []byte("primary")) {
			t.Fatalf("stream %s, want the backup's events and none of the primary's", s.Body)
		}
		if s.ReadErr != nil || !bytes.HasSuffix(s.Body, []byte("data: [DONE]\n\n")) {
			t.Fatalf("the winner's stream did not end whole (read error %v):\n%s", s.ReadErr, s.Body)
		}
		// The hedge starts at 200ms; the backup answers at once. A second
		// is generous for the backup's own time on a loaded machine and
		// still far below the primary's 3s.
		if s.FirstChunk < 200*time.Millisecond || s.FirstChunk >= time.Second {
			t.Errorf("first chunk after %v, want within [200ms, 1s): the hedge delay plus the backup's time", s.FirstChunk)
		}
		// The primary's request must end now, not when its first byte
		// would have come at 3s.
		eventually(t, 1500*time.Millisecond, "the primary's upstream request cancelled", func() (bool, string) {
			st := g.Primary.Stats()
			return st.Cancelled == 1 && st.InFlight == 0, fmt.Sprintf("%+v", st)
		})
		if st := g.Primary.Stats(); st.Completed != 0 {
			t.Errorf("primary stats %+v: the losing request ran to its end", st)
		}
		g.assertIdle(t)

		req, rows := g.ledger(t, s.ID)
		wantRows(t, rows, "cancelled/499/hedge_lost(primary)", "success/200/(backup)")
		if req.Status != "success" || *req.StatusCode != http.StatusOK {
			t.Errorf("request row %s/%d, want success/200", req.Status, *req.StatusCode)
		}
		delta(t, before, g.scrape(t), map[string]float64{backWon: 1, backLost: 0, backFailed: 0, primWon: 0, primLost: 0})

		code, body := g.get(t, "/admin/requests/"+s.ID, true)
		var tl report.Timeline
		if code != http.StatusOK || json.Unmarshal(body, &tl) != nil || len(tl.Candidates) != 2 {
			t.Fatalf("admin timeline %d %s", code, body)
		}
		if c := tl.Candidates[0]; c.Provider != "primary" || c.Status != "cancelled" || c.ErrorType == nil ||
			*c.ErrorType != "hedge_lost" || c.StatusCode == nil || *c.StatusCode != 499 {
			t.Errorf("admin timeline's primary %+v, want cancelled 499 hedge_lost", c)
		}
		if c := tl.Candidates[1]; c.Provider != "backup" || c.Status != "success" {
			t.Errorf("admin timeline's backup %+v, want success", c)
		}
	})

	t.Run("off", func(t *testing.T) {
		g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", FirstByteDelay: 600 * time.Millisecond})
		before, backBefore := g.scrape(t), g.Backup.Stats().Requests
		s := g.streamTimed(t, "unhedged")
		if s.Status != http.StatusOK || s.By != "primary" || s.ReadErr != nil {
			t.Fatalf("status %d by %q (read error %v), want 200 by primary:\n%s", s.Status, s.By, s.ReadErr, s.Body)
		}
		if s.FirstChunk < 600*time.Millisecond {
			t.Errorf("first chunk after %v, want the primary's 600ms: nothing may start the backup", s.FirstChunk)
		}
		if n := g.Backup.Stats().Requests - backBefore; n != 0 {
			t.Errorf("the backup got %d requests without a hedge block, want 0", n)
		}
		_, rows := g.ledger(t, s.ID)
		wantRows(t, rows, "success/200/(primary)", "unused/0/(backup)")
		delta(t, before, g.scrape(t), map[string]float64{backWon: 0, backLost: 0, backFailed: 0, primWon: 0, primLost: 0})
	})

	// A hedged route whose primary answers at once relays its whole stream:
	// the attempt that commits keeps its context until the relay ends.
	t.Run("fast primary on a hedged route", func(t *testing.T) {
		g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Chunks: 50})
		s := g.streamTimed(t, "gpt-4o-mini")
		if s.Status != http.StatusOK || s.By != "primary" || s.ReadErr != nil ||
			!bytes.HasSuffix(s.Body, []byte("data: [DONE]\n\n")) {
			t.Fatalf("status %d by %q (read error %v), want the primary's whole stream:\n%s", s.Status, s.By, s.ReadErr, s.Body)
		}
		_, rows := g.ledger(t, s.ID)
		wantRows(t, rows, "success/200/(primary)", "unused/0/(backup)")
	})
}

// deadlineRoutes: a primary with one slot, a long queue budget and a
// first-byte watchdog far beyond any deadline here, so that only the
// deadline can end a wait; short carries a 300ms route deadline.
const deadlineRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 1
    queue_budget: 5s
    timeouts: { first_byte: 10s }
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
  - name: primary-only
    candidates:
      - { provider: primary, model: up-primary-mini }
  - name: short
    deadline: 300ms
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
`

// TestRaceDeadline: a request's deadline bounds every wait. Before commit
// the client gets 504 deadline_exceeded, whether the time went on a silent
// primary or in the queue for its slot; a malformed header is refused
// naming it; after commit the stream ends with the in-stream error frame.
func TestRaceDeadline(t *testing.T) {
	g := start(t, setup{db: true, routes: deadlineRoutes,
		primary: mockupstream.Behavior{StallAfterHeaders: true}})

	wantDeadline504 := func(t *testing.T, s timedStream, least time.Duration) {
		t.Helper()
		if s.Status != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504: %s", s.Status, s.Body)
		}
		e := decodeError(t, s.Body)
		if e.Error.Type != "upstream_error" || e.Error.Code != "deadline_exceeded" {
			t.Errorf("error %s, want upstream_error / deadline_exceeded", s.Body)
		}
		if s.Elapsed < least || s.Elapsed >= time.Second {
			t.Errorf("answered after %v, want within [%v, 1s)", s.Elapsed, least)
		}
		req, rows := g.ledger(t, s.ID)
		wantRows(t, rows, "failed/504/deadline_exceeded(primary)", "unused/0/(backup)")
		if req.Status != "failed" || *req.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("request row %s %d, want failed 504", req.Status, *req.StatusCode)
		}
	}

	t.Run("header on a silent primary", func(t *testing.T) {
		before := g.Primary.Stats()
		s := g.streamTimed(t, "gpt-4o-mini", "X-Gateway-Deadline", "500ms")
		wantDeadline504(t, s, 500*time.Millisecond)
		// The silent upstream request ends with the request.
		eventually(t, 2*time.Second, "the primary's request cancelled", func() (bool, string) {
			st := g.Primary.Stats()
			return st.InFlight == 0 && st.Cancelled == before.Cancelled+1, fmt.Sprintf("%+v", st)
		})
	})

	t.Run("malformed header", func(t *testing.T) {
		before := g.Primary.Stats().Requests
		for _, v := range []string{"soon", "-1s", "0", "500"} {
			resp, body := g.post(t, chatBody(true), "X-Gateway-Deadline", v)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("X-Gateway-Deadline %q: status %d, want 400: %s", v, resp.StatusCode, body)
			}
			if e := decodeError(t, body); e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "X-Gateway-Deadline") {
				t.Errorf("X-Gateway-Deadline %q: error %s, want invalid_request_error naming the header", v, body)
			}
		}
		if n := g.Primary.Stats().Requests - before; n != 0 {
			t.Errorf("a refused request reached the primary %d times", n)
		}
	})

	t.Run("route deadline caps the queue wait", func(t *testing.T) {
		// One request holds the primary's only slot; the next waits in the
		// queue, whose 5s budget the route's 300ms deadline must cut short.
		ctx, cancel := context.WithCancel(context.Background())
		held := make(chan chatResult, 1)
		go func() { held <- g.chat(ctx, "primary-only") }()
		defer func() {
			cancel()
			await(t, held, 5*time.Second, "the slot-holding request to end")
		}()
		eventually(t, 3*time.Second, "the primary's slot taken", func() (bool, string) {
			st := g.Primary.Stats()
			return st.InFlight == 1, fmt.Sprintf("%+v", st)
		})
		requestsBefore := g.Primary.Stats().Requests
		s := g.streamTimed(t, "short")
		wantDeadline504(t, s, 300*time.Millisecond)
		if n := g.Primary.Stats().Requests - requestsBefore; n != 0 {
			t.Errorf("the queued request reached the primary %d times, want 0: it never had a slot", n)
		}
	})

	t.Run("after commit", func(t *testing.T) {
		// A stream that keeps coming, slower than the deadline allows.
		g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Chunks: 20, ChunkInterval: 50 * time.Millisecond})
		s := g.streamTimed(t, "gpt-4o-mini", "X-Gateway-Deadline", "400ms")
		if s.Status != http.StatusOK || s.By != "primary" {
			t.Fatalf("status %d by %q, want the primary's 200: %s", s.Status, s.By, s.Body)
		}
		data := sseData(s.Body)
		if len(data) < 2 {
			t.Fatalf("stream %q, want chunks and then the error frame", s.Body)
		}
		var last apiError
		if err := json.Unmarshal([]byte(data[len(data)-1]), &last); err != nil || last.Error.Code != "stream_interrupted" ||
			last.Error.Type != "upstream_error" {
			t.Errorf("last event %s, want the stream_interrupted error frame", data[len(data)-1])
		}
		if !strings.Contains(data[0], "Hello from primary") && !strings.Contains(data[1], "Hello from primary") {
			t.Errorf("stream %q: the primary's chunks did not come before the frame", s.Body)
		}
		if bytes.Contains(s.Body, []byte("[DONE]")) || strings.Contains(string(s.Body), "chunk 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20") {
			t.Errorf("stream ran to its end despite the deadline: %s", s.Body)
		}
		if s.Elapsed < 400*time.Millisecond || s.Elapsed >= time.Second {
			t.Errorf("stream ended after %v, want within [400ms, 1s): the primary alone takes 1s", s.Elapsed)
		}
		req, rows := g.ledger(t, s.ID)
		wantRows(t, rows, "failed/504/deadline_exceeded(primary)", "unused/0/(backup)")
		if req.Status != "failed" {
			t.Errorf("request row %s, want failed", req.Status)
		}
	})
}

// budgetRoutes: a primary that health never cools (every request must meet
// it, and fail) and a backup; both with room for the whole load, so that
// admission refuses nothing and only the retry budget decides.
const budgetRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 256
    health: { failures: 1000000 }
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 256
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
`

// TestRaceRetryBudget: with the primary down and a steady 200 requests/s,
// failover attempts stay within the retry budget (20% of first attempts
// over 10s plus 10/s), counted at the mocks and in the ledger, and every
// refused failover is a skipped/retry_budget row and a metric increment.
func TestRaceRetryBudget(t *testing.T) {
	const (
		rate     = 200
		duration = 3 * time.Second
		n        = int(rate * duration / time.Second) // all inside one 10s window
		percent  = 20
		minPerS  = 10
		window   = 10 // seconds, the budget's
		exhaust  = "gateway_retry_budget_exhausted_total{provider=backup}"
		exhaustP = "gateway_retry_budget_exhausted_total{provider=primary}"
	)
	g := start(t, setup{db: true, routes: budgetRoutes,
		env: map[string]string{
			"GATEWAY_RETRY_BUDGET_PERCENT":        fmt.Sprint(percent),
			"GATEWAY_RETRY_BUDGET_MIN_PER_SECOND": fmt.Sprint(minPerS),
		},
		primary: mockupstream.Behavior{Status: http.StatusServiceUnavailable}})
	before := g.scrape(t)

	// Open loop: one request every 5ms whatever the gateway's pace, so a
	// slow answer does not lower the offered load.
	codes := make(chan int, n)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / rate)
	for range n {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(false)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := g.client.Do(req)
			if err != nil {
				codes <- -1
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	tick.Stop()
	wg.Wait()
	close(codes)
	byCode := map[int]int{}
	for c := range codes {
		byCode[c]++
	}

	// The ledger, once every request of the run has settled.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, g.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows := map[string]int{}
	eventually(t, 20*time.Second, "every request of the run settled in Postgres", func() (bool, string) {
		var settled, open int
		if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status <> 'pending') FROM requests`).Scan(&settled); err != nil {
			return false, err.Error()
		}
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM request_candidates
			WHERE status IN ('available', 'pending', 'streaming')`).Scan(&open); err != nil {
			return false, err.Error()
		}
		return settled == n && open == 0, fmt.Sprintf("%d of %d requests settled, %d candidates open", settled, n, open)
	})
	rs, err := conn.Query(ctx, `SELECT provider || ' ' || status || ' ' || coalesce(status_code, 0) || ' ' ||
		coalesce(error_type, '') || ' ' || coalesce(skip_reason, ''), count(*) FROM request_candidates GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var k string
		var c int
		if err := rs.Scan(&k, &c); err != nil {
			t.Fatal(err)
		}
		rows[strings.TrimSpace(k)] = c
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	primFailed := rows["primary failed 503 upstream_http_error"]
	retries := rows["backup success 200"]
	skipped := rows["backup skipped 0  retry_budget"]
	t.Logf("%d requests: candidates %v, client statuses %v", n, rows, byCode)

	// Every request met the primary, which failed it; each then either
	// failed over to the backup or was refused by the budget.
	if primFailed != n || retries+skipped != n || len(rows) != 3 {
		t.Fatalf("candidate rows %v; want %d primary failures and, for the backup, successes + retry_budget skips = %d", rows, n, n)
	}
	prim, back := g.Primary.Stats(), g.Backup.Stats()
	if prim.Requests != uint64(n) || prim.Failed != uint64(n) || back.Requests != uint64(retries) {
		t.Errorf("mock stats primary %+v, backup %+v; want %d primary failures and %d backup requests (the ledger's)",
			prim, back, n, retries)
	}
	// The budget: retries stay under percent of the first attempts in the
	// window plus the floor's share of the window, which a 3s run keeps
	// whole: 1 + 20% + 100/600 upstream attempts per request at most.
	bound := percent*n/100 + minPerS*window
	if retries > bound {
		t.Errorf("%d failover attempts for %d requests (%.3f upstream attempts per request), want at most %d (%.3f per request)",
			retries, n, float64(n+retries)/float64(n), bound, float64(n+bound)/float64(n))
	}
	// And it grants what it promises: each first attempt raises the
	// allowance while failovers keep using it, so the run ends at the
	// bound, short of the count or two that RetryBudget may lose when a
	// bucket rotates.
	if retries < bound-5 || skipped == 0 {
		t.Errorf("%d failovers, %d refused; want about %d granted and the excess refused", retries, skipped, bound)
	}
	if byCode[http.StatusOK] != retries || byCode[http.StatusBadGateway] != skipped {
		t.Errorf("client statuses %v; want %d × 200 (served by the backup) and %d × 502 (the primary's failure, no failover left)",
			byCode, retries, skipped)
	}
	delta(t, before, g.scrape(t), map[string]float64{exhaust: float64(skipped), exhaustP: 0})
}
