package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/pgtest"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/secret"
)

const testAdminToken = "admin-test-token"

// fakeLedger is a ReportStore and LedgerReader that remembers what it was asked.
type fakeLedger struct {
	err    error
	filter *report.ListFilter
	window time.Duration
}

func (f *fakeLedger) State() string { return report.StateOK }
func (f *fakeLedger) Timeline(context.Context, uuid.UUID) (report.Timeline, error) {
	return report.Timeline{}, report.ErrNotFound
}

func (f *fakeLedger) ListRequests(_ context.Context, lf report.ListFilter) (report.RequestPage, error) {
	f.filter = &lf
	return report.RequestPage{Requests: []report.ListedRequest{}}, f.err
}

func (f *fakeLedger) ProviderStats(_ context.Context, window time.Duration) (report.ProviderStats, error) {
	f.window = window
	return report.ProviderStats{Providers: []report.ProviderTotal{}}, f.err
}

// adminServer is a Server with the admin routes on and store as its records
// (nil: records off).
func adminServer(t *testing.T, store ReportStore) *Server {
	t.Helper()
	routes, err := routes.Parse([]byte(`
providers:
  - name: p
    base_url: http://127.0.0.1:1/v1
    api_keys: ["${KEY}"]
    max_concurrency: 1
models:
  - name: m
    candidates:
      - { provider: p, model: up-m }
`), func(string) (string, bool) { return "sk-test", true })
	if err != nil {
		t.Fatal(err)
	}
	planner, err := candidates.NewPlanner(routes, candidates.PlannerOptions{DefaultFirstByte: time.Second, DefaultQueueBudget: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{
		Planner: planner, Admission: admission.New(admission.Config{}), Reports: store,
		AdminToken: secret.New(testAdminToken), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// adminGet serves one GET and decodes the error body, if any.
func adminGet(t *testing.T, s *Server, target, token string) (int, errorDetail) {
	t.Helper()
	auth := ""
	if token != "" {
		auth = "Bearer " + token
	}
	return adminGetRaw(t, s, target, auth)
}

// adminGetRaw is adminGet with the whole Authorization header ("" for none).
func adminGetRaw(t *testing.T, s *Server, target, auth string) (int, errorDetail) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var body errorBody
	if rec.Code != http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %d with a body that is not an error object: %q", target, rec.Code, rec.Body.String())
		}
	}
	return rec.Code, body.Error
}

// TestAdminListValidation: every bad parameter is a 400 in the OpenAI error
// shape naming the parameter, before the store is asked anything.
func TestAdminListValidation(t *testing.T) {
	for _, tc := range []struct {
		target, param string
	}{
		{"/admin/requests?limit=0", "limit"},
		{"/admin/requests?limit=201", "limit"},
		{"/admin/requests?limit=-5", "limit"},
		{"/admin/requests?limit=ten", "limit"},
		{"/admin/requests?limit=", ""}, // empty means the default: not an error
		{"/admin/requests?limit=10&limit=20", "limit"},
		{"/admin/requests?before=yesterday", "before"},
		{"/admin/requests?before=1764518400123456", "before"},
		{"/admin/requests?before=1764518400123456_not-a-uuid", "before"},
		{"/admin/requests?before=-1_0193a7c4-0000-7000-8000-000000000000", "before"},
		{"/admin/requests?status=ok", "status"},
		{"/admin/requests?status=FAILED", "status"},
		{"/admin/stats/providers?window=30s", "window"},
		{"/admin/stats/providers?window=25h", "window"},
		{"/admin/stats/providers?window=1", "window"},
		{"/admin/stats/providers?window=hour", "window"},
		{"/admin/stats/providers?window=-1h", "window"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			store := &fakeLedger{}
			code, e := adminGet(t, adminServer(t, store), tc.target, testAdminToken)
			if tc.param == "" {
				if code != http.StatusOK {
					t.Fatalf("status %d (%s), want 200", code, e.Message)
				}
				return
			}
			if code != http.StatusBadRequest || e.Type != typeInvalidRequest || e.Param == nil || *e.Param != tc.param {
				t.Fatalf("status %d, error %+v; want 400 invalid_request_error naming %q", code, e, tc.param)
			}
			if store.filter != nil || store.window != 0 {
				t.Errorf("the store was read despite the bad parameter")
			}
		})
	}
}

// TestAdminListPassesFilters: valid parameters reach the store as given,
// with the documented defaults.
func TestAdminListPassesFilters(t *testing.T) {
	cursor := report.Cursor{CreatedAt: time.UnixMicro(1764518400123456).UTC(), ID: uuid.MustParse("0193a7c4-0000-7000-8000-000000000001")}
	for _, tc := range []struct {
		target string
		want   report.ListFilter
	}{
		{"/admin/requests", report.ListFilter{Limit: 50}},
		{"/admin/requests?limit=200&status=failed", report.ListFilter{Limit: 200, Status: "failed"}},
		{"/admin/requests?limit=1&model=gpt-4o&provider=azure&client=web&before=" + cursor.String(),
			report.ListFilter{Limit: 1, Model: "gpt-4o", Provider: "azure", Client: "web", Before: cursor}},
	} {
		t.Run(tc.target, func(t *testing.T) {
			store := &fakeLedger{}
			if code, e := adminGet(t, adminServer(t, store), tc.target, testAdminToken); code != http.StatusOK {
				t.Fatalf("status %d (%s), want 200", code, e.Message)
			}
			if store.filter == nil || *store.filter != tc.want {
				t.Errorf("store got filter %+v, want %+v", store.filter, tc.want)
			}
		})
	}
	for target, want := range map[string]time.Duration{
		"/admin/stats/providers": time.Hour, "/admin/stats/providers?window=1m": time.Minute,
		"/admin/stats/providers?window=24h": 24 * time.Hour, "/admin/stats/providers?window=90m": 90 * time.Minute,
	} {
		store := &fakeLedger{}
		if code, e := adminGet(t, adminServer(t, store), target, testAdminToken); code != http.StatusOK || store.window != want {
			t.Errorf("%s: status %d (%s), window %s; want 200 and %s", target, code, e.Message, store.window, want)
		}
	}
}

// TestAdminListAuthAndStore: both endpoints need the admin token, answer 404
// with records off and 503 when the store cannot be read, like the timeline.
func TestAdminListAuthAndStore(t *testing.T) {
	for _, target := range []string{"/admin/requests", "/admin/stats/providers"} {
		t.Run(target, func(t *testing.T) {
			s := adminServer(t, &fakeLedger{})
			for _, token := range []string{"", "wrong"} {
				if code, e := adminGet(t, s, target, token); code != http.StatusUnauthorized || e.Type != typeAuthentication {
					t.Errorf("token %q: status %d %+v, want 401 authentication_error", token, code, e)
				}
			}
			if code, e := adminGet(t, adminServer(t, nil), target, testAdminToken); code != http.StatusNotFound || e.Code != codeNotFound {
				t.Errorf("records off: status %d %+v, want 404 not_found", code, e)
			}
			down := adminServer(t, &fakeLedger{err: report.ErrUnavailable})
			if code, e := adminGet(t, down, target, testAdminToken); code != http.StatusServiceUnavailable || e.Type != typeServer {
				t.Errorf("store down: status %d %+v, want 503 server_error", code, e)
			}
		})
	}
}

// TestAdminListFromPostgres: the real record store serves both endpoints
// (a *report.Writer is a LedgerReader, or the routes would answer as
// records off), and the list's JSON carries what was recorded.
func TestAdminListFromPostgres(t *testing.T) {
	dsn := pgtest.DatabaseURL(t)
	w, err := report.NewWriter(report.Options{
		DatabaseURL: secret.New(dsn), SpoolDir: t.TempDir(), AutoMigrate: true, Replica: "gw-test",
		FlushInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	t.Cleanup(func() {
		if err := w.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	id := uuid.New()
	w.RecordCandidate(report.Candidate{RequestID: id, Provider: "azure", Status: report.CandidateFailed, StatusCode: 502})
	w.RecordCandidate(report.Candidate{RequestID: id, Index: 1, Provider: "openai", Status: report.CandidateSuccess, StatusCode: 200})
	w.RecordRequest(report.Request{ID: id, Model: "m", Status: report.RequestSuccess, StatusCode: 200, CandidateCount: 2})
	s := adminServer(t, w)

	var body struct {
		Requests []struct {
			ID        uuid.UUID `json:"id"`
			Replica   string    `json:"replica"`
			Providers []string  `json:"providers"`
		} `json:"requests"`
		NextBefore *string `json:"next_before"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(body.Requests) == 0 || len(body.Requests[0].Providers) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the request never showed up in /admin/requests: %+v", body)
		}
		time.Sleep(20 * time.Millisecond)
		req := httptest.NewRequest(http.MethodGet, "/admin/requests?provider=azure", nil)
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code == http.StatusServiceUnavailable {
			continue // not connected yet
		}
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
	}
	got := body.Requests[0]
	if len(body.Requests) != 1 || got.ID != id || got.Replica != "gw-test" || got.Providers[0] != "azure" || got.Providers[1] != "openai" || body.NextBefore != nil {
		t.Errorf("list %+v (next %v), want the one request, replica gw-test, providers [azure openai], no next page", body.Requests, body.NextBefore)
	}

	req := httptest.NewRequest(http.MethodGet, "/admin/stats/providers?window=5m", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var stats report.ProviderStats
	if err := json.Unmarshal(rec.Body.Bytes(), &stats); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("stats: status %d, %v: %s", rec.Code, err, rec.Body.String())
	}
	if len(stats.Providers) != 2 || stats.Providers[0].Provider != "azure" || stats.Providers[0].Failed != 1 || stats.Providers[1].Attempts != 1 {
		t.Errorf("stats providers %+v, want azure (1 failed) and openai (1 attempt)", stats.Providers)
	}
}
