package report

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// listFixture writes requests whose created_at tie in groups, with
// candidates, and returns their ids newest first (created_at, then id,
// descending), the order the list must have.
// gamma holds the requests with a (skipped) candidate of provider gamma.
func listFixture(t *testing.T, w *Writer) (order []uuid.UUID, byID map[uuid.UUID]Request, gamma map[uuid.UUID]bool) {
	t.Helper()
	byID, gamma = map[uuid.UUID]Request{}, map[uuid.UUID]bool{}
	var recs []record
	models := []string{"gpt-a", "gpt-b"}
	clients := []string{"web", "ops", ""}
	statuses := []string{RequestSuccess, RequestFailed, RequestSuccess, RequestCancelled, RequestPending}
	for i := range 23 {
		// Groups of five share one created_at: every page boundary of a small
		// limit falls inside a tie.
		r := Request{
			ID: uuid.New(), CreatedAt: baseTime.Add(time.Duration(i/5) * time.Second),
			Model: models[i%2], Client: clients[i%3], Status: statuses[i%5], Replica: "gw-1",
			Route: "chat", CandidateCount: 1,
		}
		if r.Status != RequestPending {
			r.StatusCode, r.Latency = 200, time.Duration(i+1)*time.Millisecond
		}
		byID[r.ID] = r
		recs = append(recs, record{kind: kindRequest, req: r})
		provider := []string{"alpha", "beta"}[i%2]
		recs = append(recs, record{kind: kindCandidate, cand: Candidate{RequestID: r.ID, Provider: provider,
			Status: CandidateSuccess, CreatedAt: r.CreatedAt}})
		if i%4 == 0 { // a skipped candidate of a third provider: the filter matches it
			gamma[r.ID] = true
			recs = append(recs, record{kind: kindCandidate, cand: Candidate{RequestID: r.ID, Index: 1, Provider: "gamma",
				Status: CandidateSkipped, SkipReason: SkipCoolingDown, CreatedAt: r.CreatedAt}})
		}
	}
	mustUpsert(t, w, recs)
	for id := range byID {
		order = append(order, id)
	}
	slices.SortFunc(order, func(a, b uuid.UUID) int {
		if c := byID[b].CreatedAt.Compare(byID[a].CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.String(), a.String()) // uuid order is byte order
	})
	return order, byID, gamma
}

// pageAll follows next_before from the first page to the last.
func pageAll(t *testing.T, w *Writer, f ListFilter) []uuid.UUID {
	t.Helper()
	var got []uuid.UUID
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		page, err := w.ListRequests(context.Background(), f)
		if err != nil {
			t.Fatalf("ListRequests(%+v): %v", f, err)
		}
		for _, r := range page.Requests {
			got = append(got, r.ID)
		}
		if page.NextBefore == nil {
			return got
		}
		if len(page.Requests) != f.Limit {
			t.Fatalf("a page of %d rows before the last, want %d", len(page.Requests), f.Limit)
		}
		c, err := ParseCursor(*page.NextBefore)
		if err != nil {
			t.Fatalf("next_before %q does not parse: %v", *page.NextBefore, err)
		}
		f.Before = c
	}
}

// TestListRequestsPagingAndFilters protects GET /admin/requests: newest
// first, pages that follow next_before cover every row exactly once even
// when created_at ties across page boundaries, and each filter selects
// exactly the rows it names.
func TestListRequestsPagingAndFilters(t *testing.T) {
	w := connectedWriter(t, migratedURL(t))
	order, byID, gammaIDs := listFixture(t, w)
	match := func(keep func(uuid.UUID, Request) bool) []uuid.UUID {
		var out []uuid.UUID
		for _, id := range order {
			if keep(id, byID[id]) {
				out = append(out, id)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		filter ListFilter
		want   []uuid.UUID
	}{
		{"all", ListFilter{}, order},
		{"status failed", ListFilter{Status: RequestFailed}, match(func(_ uuid.UUID, r Request) bool { return r.Status == RequestFailed })},
		{"status success", ListFilter{Status: RequestSuccess}, match(func(_ uuid.UUID, r Request) bool { return r.Status == RequestSuccess })},
		{"status pending", ListFilter{Status: RequestPending}, match(func(_ uuid.UUID, r Request) bool { return r.Status == RequestPending })},
		{"model", ListFilter{Model: "gpt-b"}, match(func(_ uuid.UUID, r Request) bool { return r.Model == "gpt-b" })},
		{"client", ListFilter{Client: "ops"}, match(func(_ uuid.UUID, r Request) bool { return r.Client == "ops" })},
		{"provider tried", ListFilter{Provider: "alpha"}, match(func(_ uuid.UUID, r Request) bool { return r.Model == "gpt-a" })},
		{"provider only skipped", ListFilter{Provider: "gamma"}, match(func(id uuid.UUID, _ Request) bool { return gammaIDs[id] })},
		{"model and client", ListFilter{Model: "gpt-a", Client: "web"}, match(func(_ uuid.UUID, r Request) bool { return r.Model == "gpt-a" && r.Client == "web" })},
		{"no match", ListFilter{Model: "none"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name != "no match" && len(tc.want) == 0 {
				t.Fatal("fixture has no row for this filter")
			}
			for _, limit := range []int{1, 2, 5, 200} {
				f := tc.filter
				f.Limit = limit
				if got := pageAll(t, w, f); !slices.Equal(got, tc.want) {
					t.Errorf("limit %d: got %d rows %v\nwant %d rows %v", limit, len(got), got, len(tc.want), tc.want)
				}
			}
		})
	}
}

// TestListRequestsRow: a listed row has the documented JSON fields, its
// providers are the distinct attempted ones in candidate order (not skipped
// or unused), and the default limit applies.
func TestListRequestsRow(t *testing.T) {
	w := connectedWriter(t, migratedURL(t))
	id := uuid.New()
	recs := []record{{kind: kindRequest, req: Request{ID: id, CreatedAt: baseTime, Model: "m", Route: "messages",
		Stream: true, Client: "web", Priority: "interactive", Status: RequestSuccess, StatusCode: 200,
		Latency: 1500 * time.Millisecond, FirstByte: 300 * time.Millisecond, CandidateCount: 5,
		HasUsage: true, PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, Replica: "gw-9"}}}
	for i, c := range []struct{ provider, status string }{
		{"beta", CandidateFailed}, {"alpha", CandidateSkipped}, {"alpha", CandidateSuccess},
		{"beta", CandidateFailed}, {"delta", CandidateUnused},
	} {
		recs = append(recs, record{kind: kindCandidate, cand: Candidate{RequestID: id, Index: i, Provider: c.provider,
			Status: c.status, CreatedAt: baseTime}})
	}
	for i := range 60 { // more rows than the default limit, all older
		recs = append(recs, record{kind: kindRequest, req: Request{ID: uuid.New(), CreatedAt: baseTime.Add(-time.Duration(i+1) * time.Second),
			Status: RequestFailed}})
	}
	mustUpsert(t, w, recs)

	page, err := w.ListRequests(context.Background(), ListFilter{})
	if err != nil {
		t.Fatalf("ListRequests: %v", err)
	}
	if len(page.Requests) != DefaultListLimit || page.NextBefore == nil {
		t.Fatalf("%d rows, next %v; want %d and a next page", len(page.Requests), page.NextBefore, DefaultListLimit)
	}
	r := page.Requests[0]
	if r.ID != id || !slices.Equal(r.Providers, []string{"beta", "alpha"}) {
		t.Errorf("first row %s providers %v, want %s with [beta alpha]", r.ID, r.Providers, id)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"route":"messages"`, `"stream":true`, `"client":"web"`, `"priority":"interactive"`,
		`"status":"success"`, `"status_code":200`, `"error_type":null`, `"latency_ms":1500`, `"first_byte_ms":300`,
		`"candidate_count":5`, `"total_tokens":7`, `"replica":"gw-9"`, `"model":"m"`, `"created_at":"2026-03-01T12:00:00Z"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
	older := page.Requests[1]
	if older.Providers == nil || len(older.Providers) != 0 {
		t.Errorf("a row without candidates has providers %#v, want []", older.Providers)
	}

	if _, err := w.ListRequests(context.Background(), ListFilter{Limit: MaxListLimit + 1}); err == nil {
		t.Error("limit above the maximum: no error")
	}
	if _, err := w.ListRequests(context.Background(), ListFilter{Status: "done'; DROP TABLE requests; --"}); err == nil {
		t.Error("unknown status: no error")
	}
}

// TestCursorRoundTrip: the cursor survives its string form exactly
// (microseconds) and anything else is refused.
func TestCursorRoundTrip(t *testing.T) {
	c := Cursor{CreatedAt: time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC), ID: uuid.New()}
	got, err := ParseCursor(c.String())
	if err != nil || got != c {
		t.Fatalf("round trip %v -> %q -> %v, %v", c, c.String(), got, err)
	}
	for _, bad := range []string{"", "_", "123", "abc_" + c.ID.String(), "0_" + c.ID.String(), "123_" + c.ID.String() + "x",
		"123_{" + c.ID.String() + "}", "123_urn:uuid:" + c.ID.String()} {
		if _, err := ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) accepted", bad)
		}
	}
}

// TestListBeforeConnect: reads before Postgres was ever reached fail fast.
func TestListBeforeConnect(t *testing.T) {
	w, _ := newTestWriter(t, "postgres://postgres@127.0.0.1:1/x", nil)
	if _, err := w.ListRequests(context.Background(), ListFilter{}); err != ErrUnavailable {
		t.Errorf("list: err %v, want ErrUnavailable", err)
	}
	if _, err := w.ProviderStats(context.Background(), time.Hour); err != ErrUnavailable {
		t.Errorf("stats: err %v, want ErrUnavailable", err)
	}
}
