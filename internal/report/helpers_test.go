package report

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/pgtest"
	"github.com/llmgw/gateway/internal/secret"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// migratedURL returns a fresh database with the schema applied.
func migratedURL(t testing.TB) string {
	t.Helper()
	dsn := pgtest.DatabaseURL(t)
	if err := Migrate(context.Background(), secret.New(dsn), "up", io.Discard); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	return dsn
}

// logBuffer collects log output for assertions; safe for concurrent writers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newTestWriter builds a writer with test-friendly timings. It is closed at the
// end of the test unless the test closed it already.
func newTestWriter(t testing.TB, dsn string, mutate func(*Options)) (*Writer, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	opts := Options{
		DatabaseURL:   secret.New(dsn),
		SpoolDir:      t.TempDir(),
		FlushInterval: 10 * time.Millisecond,
		// Generous: the race detector and parallel packages make a loaded CI
		// machine slow; outage tests refuse connections rather than time out.
		WriteTimeout: 10 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&opts)
	}
	w, err := NewWriter(opts)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	w.backoffMin = 10 * time.Millisecond
	w.backoffMax = 100 * time.Millisecond
	t.Cleanup(func() {
		if err := w.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			t.Logf("writer logs:\n%s", logs.String())
		}
	})
	return w, logs
}

// connectedWriter is a writer that has a pool and a migrated schema but no
// goroutines, for tests that drive upsert and replay directly.
func connectedWriter(t testing.TB, dsn string) *Writer {
	t.Helper()
	w, _ := newTestWriter(t, dsn, func(o *Options) { o.AutoMigrate = true })
	if err := w.connect(context.Background()); err != nil {
		t.Fatalf("connect: %v", err)
	}
	w.healthy.Store(true)
	return w
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// queryInt runs a single-value query on a short-lived connection.
func queryInt(t testing.TB, dsn, sql string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// candidateRow is the subset of request_candidates the tests compare.
type candidateRow struct {
	Status       string
	StatusCode   *int32
	ErrorType    *string
	ErrorMessage *string
	Provider     string
	Endpoint     string
	KeyID        string
	LatencyMS    *int64
	FirstByteMS  *int64
	StartedAt    *time.Time
	FinishedAt   *time.Time
	CreatedAt    time.Time
}

func readCandidate(t testing.TB, dsn string, k candidateKey) (candidateRow, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var r candidateRow
	err = conn.QueryRow(ctx, `SELECT status, status_code, error_type, error_message, provider,
		endpoint, key_id, latency_ms, first_byte_ms, started_at, finished_at, created_at
		FROM request_candidates WHERE request_id = $1 AND candidate_index = $2 AND retry_index = $3`,
		k.requestID, k.index, k.retryIndex).Scan(&r.Status, &r.StatusCode, &r.ErrorType,
		&r.ErrorMessage, &r.Provider, &r.Endpoint, &r.KeyID, &r.LatencyMS, &r.FirstByteMS,
		&r.StartedAt, &r.FinishedAt, &r.CreatedAt)
	if err == pgx.ErrNoRows {
		return r, false
	}
	if err != nil {
		t.Fatalf("read candidate: %v", err)
	}
	return r, true
}

// baseTime is a fixed, microsecond-aligned instant (Postgres keeps microseconds).
var baseTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// lifecycle returns the records a successful candidate produces, in order.
func lifecycle(id uuid.UUID, index int) []Candidate {
	started := baseTime.Add(time.Duration(index) * time.Second)
	c := Candidate{
		RequestID: id, Index: index, Provider: "primary", Endpoint: "http://127.0.0.1:9001",
		KeyID: "key-1", Model: "gpt-4o-mini", CreatedAt: baseTime,
	}
	avail := c
	avail.Status = CandidateAvailable
	pending := c
	pending.Status, pending.StartedAt = CandidatePending, started
	streaming := pending
	streaming.Status, streaming.FirstByte, streaming.StatusCode = CandidateStreaming, 40*time.Millisecond, 200
	success := streaming
	success.Status, success.Latency, success.FinishedAt = CandidateSuccess, 900*time.Millisecond, started.Add(900*time.Millisecond)
	return []Candidate{avail, pending, streaming, success}
}

// String shows pointed-to values, so rows can be compared and printed.
func (r candidateRow) String() string {
	deref := func(p any) string {
		switch v := p.(type) {
		case *int32:
			if v != nil {
				return strconv.Itoa(int(*v))
			}
		case *int64:
			if v != nil {
				return strconv.FormatInt(*v, 10)
			}
		case *string:
			if v != nil {
				return strconv.Quote(*v)
			}
		case *time.Time:
			if v != nil {
				return v.UTC().Format(time.RFC3339Nano)
			}
		}
		return "NULL"
	}
	return strings.Join([]string{r.Status, deref(r.StatusCode), deref(r.ErrorType), deref(r.ErrorMessage),
		r.Provider, r.Endpoint, r.KeyID, deref(r.LatencyMS), deref(r.FirstByteMS), deref(r.StartedAt),
		deref(r.FinishedAt), r.CreatedAt.UTC().Format(time.RFC3339Nano)}, "|")
}
