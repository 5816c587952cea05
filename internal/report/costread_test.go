package report

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
)

// jsonObject is v marshalled and read back as a map: the bytes the admin
// API sends, as a console would see them.
func jsonObject(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// wantFields fails unless m holds every key of want with its value
// (nil: present and JSON null).
func wantFields(t *testing.T, what string, m map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		got, ok := m[k]
		if !ok || got != v {
			t.Errorf("%s %s = %#v (present %v), want %#v", what, k, got, ok, v)
		}
	}
}

// TestCostColumnsRoundTrip writes three requests through the running
// writer (queue, batcher, Postgres) and reads them back as the console
// does, through the timeline and the list: a priced one whose cost and
// cache and reasoning counts come back as written, an unpriced one with
// usage (cost null, tokens present), and one without usage (all null). A
// candidate the provider did not bill (failed before its commit point)
// has neither usage nor cost, as the attempt loop records it, while its
// request's cost is known.
func TestCostColumnsRoundTrip(t *testing.T) {
	dsn := migratedURL(t)
	w, _ := newTestWriter(t, dsn, nil)
	w.Start(context.Background())
	waitFor(t, "state ok", 10*time.Second, func() bool { return w.State() == StateOK })

	priced, unpriced, noUsage := uuid.New(), uuid.New(), uuid.New()
	at := baseTime
	cand := func(id uuid.UUID, index int, provider string) Candidate {
		return Candidate{RequestID: id, Index: index, Provider: provider, Endpoint: "http://127.0.0.1:9", KeyID: "k",
			Model: "gpt-4o", Status: CandidateSuccess, StatusCode: 200, StartedAt: at, FinishedAt: at.Add(time.Second),
			Latency: time.Second, CreatedAt: at}
	}
	// The priced request: its first attempt failed before the commit
	// point (billed nothing), the second answered with the worked example
	// of docs/cost.md, cut and estimated.
	failed := cand(priced, 0, "azure")
	failed.Status, failed.StatusCode, failed.ErrorType = CandidateFailed, 500, ErrorTypeUpstreamHTTP
	answered := cand(priced, 1, "openai")
	answered.HasUsage, answered.PromptTokens, answered.CompletionTokens = true, 1000, 200
	answered.CachedTokens, answered.CacheWriteTokens, answered.ReasoningTokens = 400, 30, 50
	answered.HasCost, answered.CostUSD, answered.UsageEstimated = true, 0.004, true
	w.RecordCandidate(failed)
	w.RecordCandidate(answered)
	w.RecordRequest(Request{ID: priced, CreatedAt: at, Model: "gpt-4o", Client: "web", Team: "search",
		Status: RequestSuccess, StatusCode: 200, CandidateCount: 2, HasUsage: true, PromptTokens: 1000,
		CompletionTokens: 200, TotalTokens: 1200, CachedTokens: 400, CacheWriteTokens: 30, ReasoningTokens: 50,
		HasCost: true, CostUSD: 0.004, UsageEstimated: true, FinishedAt: at.Add(time.Second)})

	// Unpriced: usage, no price, so no cost.
	u := cand(unpriced, 0, "openai")
	u.HasUsage, u.PromptTokens, u.CompletionTokens = true, 10, 5
	w.RecordCandidate(u)
	w.RecordRequest(Request{ID: unpriced, CreatedAt: at.Add(time.Millisecond), Model: "m-free", Client: "web",
		Status: RequestSuccess, StatusCode: 200, CandidateCount: 1, HasUsage: true, PromptTokens: 10,
		CompletionTokens: 5, TotalTokens: 15, FinishedAt: at.Add(time.Second)})

	// No usage at all (the provider sent none).
	w.RecordCandidate(cand(noUsage, 0, "openai"))
	w.RecordRequest(Request{ID: noUsage, CreatedAt: at.Add(2 * time.Millisecond), Model: "gpt-4o",
		Status: RequestSuccess, StatusCode: 200, CandidateCount: 1, FinishedAt: at.Add(time.Second)})

	waitFor(t, "the rows", 10*time.Second, func() bool {
		return queryInt(t, dsn, "SELECT count(*) FROM requests") == 3 &&
			queryInt(t, dsn, "SELECT count(*) FROM request_candidates") == 4
	})

	ctx := context.Background()
	tl, err := w.Timeline(ctx, priced)
	if err != nil {
		t.Fatalf("Timeline: %v", err)
	}
	wantFields(t, "priced request", jsonObject(t, tl.Request), map[string]any{"cost_usd": 0.004, "usage_estimated": true,
		"team": "search", "prompt_tokens": 1000.0, "completion_tokens": 200.0, "total_tokens": 1200.0,
		"cached_tokens": 400.0, "cache_write_tokens": 30.0, "reasoning_tokens": 50.0})
	if len(tl.Candidates) != 2 {
		t.Fatalf("%d candidates, want 2", len(tl.Candidates))
	}
	wantFields(t, "unbilled candidate", jsonObject(t, tl.Candidates[0]), map[string]any{"cost_usd": nil,
		"usage_estimated": false, "prompt_tokens": nil, "completion_tokens": nil, "cached_tokens": nil,
		"cache_write_tokens": nil, "reasoning_tokens": nil})
	wantFields(t, "answering candidate", jsonObject(t, tl.Candidates[1]), map[string]any{"cost_usd": 0.004,
		"usage_estimated": true, "prompt_tokens": 1000.0, "completion_tokens": 200.0, "cached_tokens": 400.0,
		"cache_write_tokens": 30.0, "reasoning_tokens": 50.0})

	tl, err = w.Timeline(ctx, unpriced)
	if err != nil {
		t.Fatalf("Timeline: %v", err)
	}
	wantFields(t, "unpriced request", jsonObject(t, tl.Request), map[string]any{"cost_usd": nil, "usage_estimated": false,
		"team": nil, "prompt_tokens": 10.0, "total_tokens": 15.0, "cached_tokens": 0.0, "reasoning_tokens": 0.0})
	wantFields(t, "unpriced candidate", jsonObject(t, tl.Candidates[0]), map[string]any{"cost_usd": nil, "prompt_tokens": 10.0})

	tl, err = w.Timeline(ctx, noUsage)
	if err != nil {
		t.Fatalf("Timeline: %v", err)
	}
	wantFields(t, "request without usage", jsonObject(t, tl.Request), map[string]any{"cost_usd": nil, "prompt_tokens": nil,
		"total_tokens": nil, "cached_tokens": nil, "cache_write_tokens": nil, "reasoning_tokens": nil, "client": nil})
	wantFields(t, "candidate without usage", jsonObject(t, tl.Candidates[0]), map[string]any{"cost_usd": nil,
		"prompt_tokens": nil, "usage_estimated": false})

	// The list carries each row's cost, as the requests screen shows it.
	page, err := w.ListRequests(ctx, ListFilter{})
	if err != nil {
		t.Fatalf("ListRequests: %v", err)
	}
	byID := map[uuid.UUID]map[string]any{}
	for _, r := range page.Requests {
		byID[r.ID] = jsonObject(t, r)
	}
	wantFields(t, "listed priced", byID[priced], map[string]any{"cost_usd": 0.004, "usage_estimated": true, "team": "search",
		"cached_tokens": 400.0, "reasoning_tokens": 50.0, "total_tokens": 1200.0})
	wantFields(t, "listed unpriced", byID[unpriced], map[string]any{"cost_usd": nil, "usage_estimated": false, "total_tokens": 15.0})
	wantFields(t, "listed without usage", byID[noUsage], map[string]any{"cost_usd": nil, "cached_tokens": nil, "reasoning_tokens": nil})
	// A column read back that is not the list's (the timeline's own) would
	// widen every page of 200 rows.
	if _, ok := byID[priced]["cache_write_tokens"]; ok {
		t.Errorf("the list carries cache_write_tokens, a timeline column")
	}
}

// TestCostKeepsItsDigits: a cost as small as a single cached token
// (1.25e-6 USD) and one with many digits come back from numeric as the
// same float64, not rounded to a few places.
func TestCostKeepsItsDigits(t *testing.T) {
	w := connectedWriter(t, migratedURL(t))
	costs := []float64{1.25e-6, 0.123456789012, 4321.5}
	var ids []uuid.UUID
	var recs []record
	for i, c := range costs {
		id := uuid.New()
		ids = append(ids, id)
		recs = append(recs, record{kind: kindRequest, req: Request{ID: id, CreatedAt: baseTime.Add(time.Duration(i) * time.Second),
			Model: "m", Status: RequestSuccess, HasUsage: true, PromptTokens: 1, HasCost: true, CostUSD: c}})
	}
	mustUpsert(t, w, recs)
	for i, id := range ids {
		tl, err := w.Timeline(context.Background(), id)
		if err != nil {
			t.Fatalf("Timeline: %v", err)
		}
		if tl.Request.CostUSD == nil || *tl.Request.CostUSD != costs[i] {
			t.Errorf("cost %v read back as %v", costs[i], tl.Request.CostUSD)
		}
	}
}
