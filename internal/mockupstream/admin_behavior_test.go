package mockupstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// admin sends method to a /mock/ URL with an optional JSON body and returns the status
// and the body.
func admin(t *testing.T, ts *httptest.Server, method, target, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(readAll(t, resp))
}

// TestAdminBehavior: POST /mock/behavior?model= gives a model its own Behavior (the
// body decoded over the defaults), DELETE clears it, GET /mock/stats?model= counts the
// model's requests, POST /mock/reset forgets them; bad bodies change nothing.
func TestAdminBehavior(t *testing.T) {
	s, ts := start(t, Behavior{Identity: "shared"})

	if code, body := admin(t, ts, http.MethodPost, "/mock/behavior?model=gpt-4o", `{"Status":503,"RetryAfter":"2","latency":"1ms","ChunkInterval":1000}`); code != 204 {
		t.Fatalf("POST behavior: %d %s", code, body)
	}
	b, ok := s.ModelBehavior("gpt-4o")
	if !ok || b.Status != 503 || b.RetryAfter != "2" || b.Latency != time.Millisecond || b.ChunkInterval != time.Microsecond || b.Identity != "shared" {
		t.Fatalf("ModelBehavior = %+v, %v; want the body over the defaults", b, ok)
	}
	resp := post(t, context.Background(), ts, chatFor("gpt-4o"))
	readAll(t, resp)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("gpt-4o: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if got := statuses(t, ts, "gpt-4o-mini", 2); fmt.Sprint(got) != "[200 200]" {
		t.Errorf("gpt-4o-mini: %v", got)
	}

	waitIdle(t, s)
	stats := func(model string) Stats {
		t.Helper()
		code, body := admin(t, ts, http.MethodGet, "/mock/stats?model="+model, "")
		var st Stats
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET stats?model=%s: %d %s", model, code, body)
		}
		return st
	}
	if st := stats("gpt-4o"); st.Requests != 1 || st.Failed != 1 {
		t.Errorf("stats gpt-4o %+v", st)
	}
	if st := stats("gpt-4o-mini"); st.Requests != 2 || st.Completed != 2 {
		t.Errorf("stats gpt-4o-mini %+v", st)
	}

	for _, bad := range []string{`{"Statuss":503}`, `{"Status":42}`, `{"Latency":"soon"}`, `{"ErrorKind":"nope"}`, `not json`, `{} {}`} {
		if code, body := admin(t, ts, http.MethodPost, "/mock/behavior?model=gpt-4o", bad); code != 400 || !strings.Contains(body, "invalid_behavior") {
			t.Errorf("POST %s: %d %s, want 400", bad, code, body)
		}
	}
	if b, _ := s.ModelBehavior("gpt-4o"); b.Status != 503 {
		t.Errorf("a bad body changed the behaviour: %+v", b)
	}

	if code, _ := admin(t, ts, http.MethodDelete, "/mock/behavior?model=gpt-4o", ""); code != 204 {
		t.Errorf("DELETE: %d", code)
	}
	if got := statuses(t, ts, "gpt-4o", 1); got[0] != 200 {
		t.Errorf("after DELETE: %v", got)
	}

	// Without ?model= the body sets the defaults; DELETE without it clears every model.
	admin(t, ts, http.MethodPost, "/mock/behavior?model=a", `{"Status":500}`)
	admin(t, ts, http.MethodPost, "/mock/behavior?model=b", `{"Status":500}`)
	if code, _ := admin(t, ts, http.MethodDelete, "/mock/behavior", ""); code != 204 || s.models.Load() != nil {
		t.Errorf("DELETE all: %d, models %v", code, s.models.Load())
	}
	if code, _ := admin(t, ts, http.MethodPost, "/mock/behavior", `{"Identity":"new","DownFor":"1h"}`); code != 204 {
		t.Errorf("POST defaults: %d", code)
	}
	if b := s.Behavior(); b.Identity != "new" || !b.DownUntil.Equal(fixedNow.Add(time.Hour)) {
		t.Errorf("defaults %+v: want Identity new, down an hour from now", b)
	}

	// A model's DownFor starts when posted, though the defaults have a window of their own.
	admin(t, ts, http.MethodPost, "/mock/behavior?model=m", `{"DownFor":"1m"}`)
	if b, _ := s.ModelBehavior("m"); !b.DownUntil.Equal(fixedNow.Add(time.Minute)) {
		t.Errorf("model's DownUntil %v, want a minute from now", b.DownUntil)
	}
	admin(t, ts, http.MethodPost, "/mock/behavior?model=m", `{"DownUntil":"2030-01-02T03:04:05Z"}`)
	if b, _ := s.ModelBehavior("m"); b.DownUntil.Year() != 2030 {
		t.Errorf("model's DownUntil %v, want 2030", b.DownUntil)
	}

	waitIdle(t, s)
	if code, _ := admin(t, ts, http.MethodPost, "/mock/reset", ""); code != 204 {
		t.Errorf("reset: %d", code)
	}
	if st := stats("gpt-4o-mini"); st != (Stats{}) {
		t.Errorf("after reset: %+v", st)
	}

	for _, tt := range []struct{ method, target string }{
		{http.MethodGet, "/mock/behavior"},
		{http.MethodGet, "/mock/reset"},
		{http.MethodGet, "/mock/stats?model=a&path=/v1/messages"},
		{http.MethodPost, "/mock/behavior?model="},
	} {
		if code, body := admin(t, ts, tt.method, tt.target, ""); code != 405 && code != 400 {
			t.Errorf("%s %s: %d %s", tt.method, tt.target, code, body)
		}
	}
}

// TestModelBehaviorKeepsKeyStatusMap: the admin body's KeyStatus does not write into
// the defaults' map, which Behavior documents as read-only.
func TestModelBehaviorKeepsKeyStatusMap(t *testing.T) {
	keys := map[string]int{"k1": 401}
	s, ts := start(t, Behavior{KeyStatus: keys})
	if code, body := admin(t, ts, http.MethodPost, "/mock/behavior?model=m", `{"KeyStatus":{"k2":429}}`); code != 204 {
		t.Fatalf("%d %s", code, body)
	}
	if len(keys) != 1 {
		t.Errorf("defaults' map written: %v", keys)
	}
	if b, _ := s.ModelBehavior("m"); b.KeyStatus["k1"] != 401 || b.KeyStatus["k2"] != 429 {
		t.Errorf("model's KeyStatus %v", b.KeyStatus)
	}
}
