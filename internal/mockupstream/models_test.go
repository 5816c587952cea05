package mockupstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a test's source of now, moved by hand, so the down window is asserted
// without sleeping.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func newClock(t time.Time) *clock        { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func chatFor(model string) string        { return strings.Replace(chatBody, "gpt-test", model, 1) }
func chatStreamFor(model string) string  { return strings.Replace(streamBody, "gpt-test", model, 1) }
func withModel(body, from, to string) string {
	return strings.Replace(body, `"model":"`+from+`"`, `"model":"`+to+`"`, 1)
}

// startClocked serves a mock whose now is the returned clock.
func startClocked(t *testing.T, b Behavior) (*Server, *httptest.Server, *clock) {
	t.Helper()
	clk := newClock(fixedNow)
	s := New(Behavior{})
	s.now = clk.now
	s.SetBehavior(b) // DownFor starts on the clock
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts, clk
}

// statuses sends n chat requests for model and returns their statuses.
func statuses(t *testing.T, ts *httptest.Server, model string, n int, headers ...string) []int {
	t.Helper()
	var got []int
	for range n {
		resp := post(t, context.Background(), ts, chatFor(model), headers...)
		readAll(t, resp)
		got = append(got, resp.StatusCode)
	}
	return got
}

// bodyModel is the model each target's bodies name.
func bodyModel(tg target) string {
	var m struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal([]byte(tg.body), &m)
	return m.Model
}

// TestModelBehavior: a model given its own Behavior answers with it on every endpoint
// while another model on the same mock, with the same headers, answers with the
// defaults; headers still apply on top; each model's requests are counted apart.
func TestModelBehavior(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			s, ts := start(t, Behavior{})
			model := bodyModel(tg)
			s.SetModelBehavior(model, Behavior{Status: http.StatusServiceUnavailable})
			other := withModel(tg.body, model, "fallback-model")

			do := func(body string, headers ...string) int {
				resp, err := tg.post(t, context.Background(), ts, body, headers...)
				if err != nil {
					t.Fatal(err)
				}
				readAll(t, resp)
				return resp.StatusCode
			}
			if got := do(tg.body); got != 503 {
				t.Errorf("primary model: status %d, want 503", got)
			}
			if got := do(other); got != 200 {
				t.Errorf("other model: status %d, want 200", got)
			}
			if got := do(tg.body, HeaderStatus, "200"); got != 200 {
				t.Errorf("primary model with X-Mock-Status 200: status %d, want 200", got)
			}
			waitIdle(t, s)
			if st := s.StatsForModel(model); st.Requests != 2 || st.Failed != 1 || st.Completed != 1 {
				t.Errorf("StatsForModel(%s) = %+v, want 2 requests, 1 failed, 1 completed", model, st)
			}
			if st := s.StatsForModel("fallback-model"); st.Requests != 1 || st.Completed != 1 {
				t.Errorf("StatsForModel(fallback-model) = %+v, want 1 completed", st)
			}
			if b, ok := s.ModelBehavior(model); !ok || b.Status != 503 {
				t.Errorf("ModelBehavior = %+v, %v", b, ok)
			}

			s.ClearModelBehavior(model)
			if got := do(tg.body); got != 200 {
				t.Errorf("after ClearModelBehavior: status %d, want 200", got)
			}
			if _, ok := s.ModelBehavior(model); ok || s.models.Load() != nil {
				t.Error("ClearModelBehavior left a per-model Behavior")
			}
		})
	}
}

// TestForModelHeader: X-Mock-For-Model scopes every other X-Mock-* header to the
// models it lists; the others ignore them, even invalid ones.
func TestForModelHeader(t *testing.T) {
	s, ts := start(t, Behavior{})
	tests := []struct {
		model   string
		headers []string
		want    int
	}{
		{"gpt-4o", []string{HeaderForModel, "gpt-4o", HeaderStatus, "503"}, 503},
		{"gpt-4o-mini", []string{HeaderForModel, "gpt-4o", HeaderStatus, "503"}, 200},
		{"b", []string{HeaderForModel, "a, b ,c", HeaderStatus, "429"}, 429},
		{"gpt-4o-mini", []string{HeaderForModel, "gpt-4o", HeaderStatus, "not a number"}, 200},
		{"gpt-4o", []string{HeaderForModel, "gpt-4o", HeaderStatus, "not a number"}, 400},
		{"gpt-4o", []string{HeaderForModel, "", HeaderStatus, "503"}, 200},
	}
	for _, tt := range tests {
		if got := statuses(t, ts, tt.model, 1, tt.headers...); got[0] != tt.want {
			t.Errorf("model %s with %q: status %d, want %d", tt.model, tt.headers, got[0], tt.want)
		}
	}
	waitIdle(t, s)
	// The rejected request was refused before its body was parsed: not counted per model.
	if st := s.StatsForModel("gpt-4o"); st.Requests != 2 || st.Failed != 1 || st.Completed != 1 {
		t.Errorf("StatsForModel(gpt-4o) = %+v", st)
	}
}

// TestModelStatsInvariant: a model's counters keep Stats' invariant, and they sum to
// the totals when every request parses.
func TestModelStatsInvariant(t *testing.T) {
	s, ts := start(t, Behavior{})
	s.SetModelBehavior("a", Behavior{FailRate: 0.5})
	statuses(t, ts, "a", 4)
	statuses(t, ts, "b", 3)
	waitIdle(t, s)
	a, b, all := s.StatsForModel("a"), s.StatsForModel("b"), s.Stats()
	for _, st := range []Stats{a, b} {
		if st.Requests != uint64(st.InFlight)+st.Completed+st.Failed+st.Rejected+st.Cancelled+st.Resets {
			t.Errorf("invariant broken: %+v", st)
		}
	}
	if a.Failed != 2 || a.Completed != 2 || b.Completed != 3 || a.Requests+b.Requests != all.Requests {
		t.Errorf("a %+v b %+v all %+v", a, b, all)
	}
	if st := s.StatsForModel("never"); st != (Stats{}) {
		t.Errorf("unseen model: %+v", st)
	}
}

// TestFailFirst: the first N requests of each model fail, then they succeed; set per
// model, by header or in the defaults, and counted again when set again.
func TestFailFirst(t *testing.T) {
	tests := []struct {
		name     string
		defaults Behavior
		model    Behavior // for gpt-4o, when FailFirst is set
		headers  []string
		primary  string // statuses of 3 gpt-4o requests
		fallback string // statuses of 2 gpt-4o-mini requests
	}{
		{"per model", Behavior{}, Behavior{FailFirst: 1}, nil, "[500 200 200]", "[200 200]"},
		{"per model status", Behavior{}, Behavior{FailFirst: 2, Status: 502, RetryAfter: "1"}, nil, "[502 502 200]", "[200 200]"},
		{"header", Behavior{}, Behavior{}, []string{HeaderForModel, "gpt-4o", HeaderFailFirst, "1", HeaderStatus, "503"}, "[503 200 200]", "[200 200]"},
		{"defaults count per model", Behavior{FailFirst: 1}, Behavior{}, nil, "[500 200 200]", "[500 200]"},
		{"overrides a fail rate", Behavior{}, Behavior{FailFirst: 1, FailRate: 1}, nil, "[500 200 200]", "[200 200]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.defaults)
			if tt.model.FailFirst > 0 {
				s.SetModelBehavior("gpt-4o", tt.model)
			}
			if got := fmt.Sprint(statuses(t, ts, "gpt-4o", 3, tt.headers...)); got != tt.primary {
				t.Errorf("gpt-4o: %s, want %s", got, tt.primary)
			}
			if got := fmt.Sprint(statuses(t, ts, "gpt-4o-mini", 2, tt.headers...)); got != tt.fallback {
				t.Errorf("gpt-4o-mini: %s, want %s", got, tt.fallback)
			}
			waitIdle(t, s)
			if st := s.StatsForModel("gpt-4o"); st.Requests != 3 || st.Failed+st.Completed != 3 {
				t.Errorf("StatsForModel = %+v", st)
			}
		})
	}

	t.Run("set again counts again", func(t *testing.T) {
		s, ts := start(t, Behavior{})
		s.SetModelBehavior("m", Behavior{FailFirst: 1})
		first := fmt.Sprint(statuses(t, ts, "m", 2))
		s.SetModelBehavior("m", Behavior{FailFirst: 1})
		second := fmt.Sprint(statuses(t, ts, "m", 2))
		s.Reset()
		s.SetBehavior(Behavior{FailFirst: 1})
		third := fmt.Sprint(statuses(t, ts, "m", 2))
		if first != "[500 200]" || second != "[500 200]" || third != "[500 200]" {
			t.Errorf("got %s, %s, %s; want [500 200] each time", first, second, third)
		}
	})
}

// TestDownWindow: a model is down (503 unless told otherwise) until DownUntil, or for
// DownFor from when it was set or from its first request carrying the header, then up.
func TestDownWindow(t *testing.T) {
	tests := []struct {
		name    string
		set     func(s *Server)
		headers []string
		want    int // the status while down
	}{
		{"DownFor per model", func(s *Server) { s.SetModelBehavior("gpt-4o", Behavior{DownFor: 10 * time.Second}) }, nil, 503},
		{"DownUntil with status", func(s *Server) {
			s.SetModelBehavior("gpt-4o", Behavior{DownUntil: fixedNow.Add(10 * time.Second), Status: 500})
		}, nil, 500},
		{"DownFor header", func(*Server) {}, []string{HeaderForModel, "gpt-4o", HeaderDownFor, "10s"}, 503},
		{"DownUntil header", func(*Server) {}, []string{HeaderForModel, "gpt-4o", HeaderDownUntil, fixedNow.Add(10 * time.Second).Format(time.RFC3339)}, 503},
		{"DownFor header over a model's window", func(s *Server) { s.SetModelBehavior("gpt-4o", Behavior{DownFor: time.Hour}) },
			[]string{HeaderForModel, "gpt-4o", HeaderDownFor, "10s"}, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts, clk := startClocked(t, Behavior{})
			tt.set(s)
			clk.advance(time.Second) // the header's DownFor starts here, the others 1 s ago
			var got []int
			got = append(got, statuses(t, ts, "gpt-4o", 1, tt.headers...)...)
			got = append(got, statuses(t, ts, "gpt-4o-mini", 1, tt.headers...)...)
			clk.advance(8 * time.Second)
			got = append(got, statuses(t, ts, "gpt-4o", 1, tt.headers...)...)
			clk.advance(2 * time.Second) // 11 s after the start, 10 s after the header's: up
			got = append(got, statuses(t, ts, "gpt-4o", 2, tt.headers...)...)
			want := fmt.Sprint([]int{tt.want, 200, tt.want, 200, 200})
			if fmt.Sprint(got) != want {
				t.Errorf("statuses %v, want %s", got, want)
			}
		})
	}

	t.Run("defaults DownFor starts at SetBehavior", func(t *testing.T) {
		_, ts, clk := startClocked(t, Behavior{DownFor: 10 * time.Second})
		down := statuses(t, ts, "m", 1)
		clk.advance(10 * time.Second)
		up := statuses(t, ts, "m", 1)
		if down[0] != 503 || up[0] != 200 {
			t.Errorf("down %v, up %v", down, up)
		}
	})
}
