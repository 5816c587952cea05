package report

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestTimeline protects GET /admin/requests/{id}: candidates come back ordered
// by (candidate_index, retry_index) whatever order they were written in, NULLs
// are JSON null, keys are snake_case, and an unknown id is ErrNotFound.
func TestTimeline(t *testing.T) {
	w := connectedWriter(t, migratedURL(t))
	id := uuid.New()
	var recs []record
	for _, k := range [][2]int{{2, 0}, {0, 1}, {1, 0}, {0, 0}} {
		recs = append(recs, record{kind: kindCandidate, cand: Candidate{RequestID: id, Index: k[0], RetryIndex: k[1],
			Provider: "p", Status: CandidateFailed, StatusCode: 502, ErrorType: ErrorTypeUpstreamConnect, CreatedAt: baseTime}})
	}
	recs = append(recs, record{kind: kindRequest, req: Request{ID: id, Status: RequestFailed, StatusCode: 502,
		Model: "gpt", CandidateCount: 4, CreatedAt: baseTime, Latency: 1200 * time.Millisecond}})
	mustUpsert(t, w, recs)

	tl, err := w.Timeline(context.Background(), id)
	if err != nil {
		t.Fatalf("Timeline: %v", err)
	}
	var order [][2]int32
	for _, c := range tl.Candidates {
		order = append(order, [2]int32{c.CandidateIndex, c.RetryIndex})
	}
	want := [][2]int32{{0, 0}, {0, 1}, {1, 0}, {2, 0}}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
	if tl.Request.LatencyMS == nil || *tl.Request.LatencyMS != 1200 || tl.Request.FinishedAt != nil {
		t.Errorf("request %+v, want latency 1200 and no finished_at", tl.Request)
	}
	b, err := json.Marshal(tl)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"request":{"id":`, `"candidate_index":0`, `"error_type":"upstream_connect_error"`, `"finished_at":null`, `"candidate_count":4`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}

	if _, err := w.Timeline(context.Background(), uuid.New()); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: err %v, want ErrNotFound", err)
	}
}

// TestTimelineBeforeConnect: reads before Postgres was ever reached fail fast.
func TestTimelineBeforeConnect(t *testing.T) {
	w, _ := newTestWriter(t, "postgres://postgres@127.0.0.1:1/x", nil)
	if _, err := w.Timeline(context.Background(), uuid.New()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("err %v, want ErrUnavailable", err)
	}
}

// TestAdminReadsEveryColumn pins what the admin answers carry for a fully
// set row: every column of the request and its candidate under its
// snake_case key with the value written, in both the timeline and the
// list, and no other key. A column lost or mapped to the wrong field by the
// reads' scanning would show here.
func TestAdminReadsEveryColumn(t *testing.T) {
	w := connectedWriter(t, migratedURL(t))
	id := uuid.New()
	fin := baseTime.Add(2 * time.Second)
	mustUpsert(t, w, []record{
		{kind: kindCandidate, cand: Candidate{RequestID: id, Index: 1, RetryIndex: 2, Provider: "prov", Endpoint: "https://up.example",
			KeyID: "k1", Model: "up-model", Status: CandidateFailed, SkipReason: "sr", Resumed: true, ResumedFrom: 0, StatusCode: 503, ErrorType: ErrorTypeUpstreamHTTP,
			ErrorMessage: "boom", Latency: 700 * time.Millisecond, FirstByte: 90 * time.Millisecond,
			StartedAt: baseTime.Add(time.Second), FinishedAt: fin, CreatedAt: baseTime,
			HasUsage: true, PromptTokens: 30, CompletionTokens: 40, CachedTokens: 10, CacheWriteTokens: 5, ReasoningTokens: 20,
			UsageEstimated: true, HasCost: true, CostUSD: 0.125}},
		{kind: kindRequest, req: Request{ID: id, ClientRequestID: "cr-1", CreatedAt: baseTime, Model: "m", Route: "messages",
			Replica: "gw-3", Stream: true, Client: "web", Priority: "interactive", Status: RequestFailed, StatusCode: 503,
			ErrorType: ErrorTypeUpstreamHTTP, Latency: 1500 * time.Millisecond, FirstByte: 300 * time.Millisecond,
			CandidateCount: 2, HasUsage: true, PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, FinishedAt: fin,
			Team: "search", CachedTokens: 1, CacheWriteTokens: 2, ReasoningTokens: 3, HasCost: true, CostUSD: 0.25, UsageEstimated: true,
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Cache: CacheMiss, HasSaved: true, SavedUSD: 0.5}},
	})
	asMap := func(v any) map[string]any {
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
	same := func(what string, got, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s %s = %#v (present %v), want %#v", what, k, g, ok, v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s has unexpected key %s", what, k)
			}
		}
	}
	const created, finished, started = "2026-03-01T12:00:00Z", "2026-03-01T12:00:02Z", "2026-03-01T12:00:01Z"
	common := map[string]any{"id": id.String(), "created_at": created, "model": "m", "route": "messages", "replica": "gw-3",
		"stream": true, "client": "web", "priority": "interactive", "status": "failed", "status_code": 503.0,
		"error_type": ErrorTypeUpstreamHTTP, "latency_ms": 1500.0, "first_byte_ms": 300.0, "candidate_count": 2.0,
		"total_tokens": 7.0, "team": "search", "cost_usd": 0.25, "usage_estimated": true, "cached_tokens": 1.0,
		"reasoning_tokens": 3.0, "cache": "miss", "saved_usd": 0.5}

	tl, err := w.Timeline(context.Background(), id)
	if err != nil {
		t.Fatalf("Timeline: %v", err)
	}
	wantReq := map[string]any{"client_request_id": "cr-1", "prompt_tokens": 3.0, "completion_tokens": 4.0, "finished_at": finished,
		"cache_write_tokens": 2.0, "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
	for k, v := range common {
		wantReq[k] = v
	}
	same("timeline request", asMap(tl.Request), wantReq)
	if len(tl.Candidates) != 1 {
		t.Fatalf("%d candidates, want 1", len(tl.Candidates))
	}
	same("timeline candidate", asMap(tl.Candidates[0]), map[string]any{"candidate_index": 1.0, "retry_index": 2.0,
		"provider": "prov", "endpoint": "https://up.example", "key_id": "k1", "model": "up-model", "status": "failed",
		"skip_reason": "sr", "status_code": 503.0, "error_type": ErrorTypeUpstreamHTTP, "error_message": "boom",
		"latency_ms": 700.0, "first_byte_ms": 90.0, "started_at": started, "finished_at": finished, "created_at": created,
		"resumed_from": 0.0, "prompt_tokens": 30.0, "completion_tokens": 40.0, "cached_tokens": 10.0, "cache_write_tokens": 5.0,
		"reasoning_tokens": 20.0, "usage_estimated": true, "cost_usd": 0.125})

	page, err := w.ListRequests(context.Background(), ListFilter{})
	if err != nil {
		t.Fatalf("ListRequests: %v", err)
	}
	if len(page.Requests) != 1 {
		t.Fatalf("%d listed, want 1", len(page.Requests))
	}
	listed := asMap(page.Requests[0])
	if p, ok := listed["providers"].([]any); !ok || len(p) != 1 || p[0] != "prov" {
		t.Errorf("listed providers %#v, want [prov]", listed["providers"])
	}
	delete(listed, "providers")
	same("listed request", listed, common)
}
