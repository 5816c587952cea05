package quota

import (
	"context"
	"testing"
	"time"
)

// TestRatesAcrossReplicas: two replicas count one client's requests and
// tokens in one window, exactly.
func TestRatesAcrossReplicas(t *testing.T) {
	url, ns := redisURL(t), namespace(t)
	a := newStore(t, url, ns, "a", 5*time.Second)
	b := newStore(t, url, ns, "b", 5*time.Second)
	a.Start(Hooks{})
	b.Start(Hooks{})
	defer b.Close()
	defer a.Close()
	ra, rb := NewRates(a), NewRates(b)
	ctx := context.Background()
	lim := Limits{RequestsPerMinute: 5, TokensPerMinute: 100}
	allowed := 0
	for i := range 8 {
		r := ra
		if i%2 == 1 {
			r = rb
		}
		st := r.Admit(ctx, "c", lim)
		if st.Allowed {
			allowed++
			if want := 5 - allowed; st.RemainingRequests != want {
				t.Errorf("request %d: remaining %d, want %d", i, st.RemainingRequests, want)
			}
			if st.ResetRequests <= 0 || st.ResetRequests > RateWindow {
				t.Errorf("reset %s", st.ResetRequests)
			}
		} else if st.RetryAfter <= 0 || st.RetryAfter > RateWindow || st.RemainingRequests != 0 {
			t.Errorf("refused request %d: %+v", i, st)
		}
	}
	if allowed != 5 {
		t.Fatalf("%d requests allowed across replicas, want exactly 5", allowed)
	}

	// Tokens: another client, counted after each response.
	lim = Limits{TokensPerMinute: 100}
	served := 0
	for i := range 10 {
		r := ra
		if i%2 == 1 {
			r = rb
		}
		st := r.Admit(ctx, "d", lim)
		if !st.Allowed {
			if st.RemainingTokens != 0 || st.RetryAfter <= 0 {
				t.Errorf("refused on tokens: %+v", st)
			}
			continue
		}
		if want := max(100-30*served, 0); st.RemainingTokens != want {
			t.Errorf("request %d: remaining tokens %d, want %d", i, st.RemainingTokens, want)
		}
		served++
		r.AddTokens(ctx, "d", lim, 30)
	}
	if served != 4 { // 0, 30, 60, 90 < 100; then 120
		t.Fatalf("%d requests served under 100 tokens/min at 30 each, want 4", served)
	}
}

// TestLocalRates: without Redis, windows start at the first count and end
// a minute later; a share divides each limit, never below 1.
func TestLocalRates(t *testing.T) {
	now := time.Unix(1000, 0)
	lr := NewLocalRates()
	lr.now = func() time.Time { return now }
	lim := Limits{RequestsPerMinute: 3}
	for i := range 3 {
		if st := lr.Admit("c", lim, 1); !st.Allowed || st.RemainingRequests != 2-i {
			t.Fatalf("request %d: %+v", i, st)
		}
	}
	now = now.Add(40 * time.Second)
	st := lr.Admit("c", lim, 1)
	if st.Allowed || st.RetryAfter != 20*time.Second {
		t.Fatalf("fourth request: %+v, want refused for 20s", st)
	}
	now = now.Add(20 * time.Second)
	if st := lr.Admit("c", lim, 1); !st.Allowed || st.ResetRequests != RateWindow {
		t.Fatalf("after the window: %+v", st)
	}
	// A share of 2 halves the limit; a share larger than the limit leaves 1.
	if st := lr.Admit("x", Limits{RequestsPerMinute: 4}, 2); st.Requests != 2 {
		t.Fatalf("shared limit %d, want 2", st.Requests)
	}
	if st := lr.Admit("y", Limits{RequestsPerMinute: 1}, 3); !st.Allowed || st.Requests != 1 {
		t.Fatalf("share floor: %+v", st)
	}
	lr.AddTokens("z", 50)
	if st := lr.Admit("z", Limits{TokensPerMinute: 50}, 1); st.Allowed {
		t.Fatal("allowed with the token window full")
	}
}

// TestRatesDegraded: with Redis away a client is counted against this
// replica's share, never refused for the outage itself.
func TestRatesDegraded(t *testing.T) {
	rs := startPrivateRedis(t)
	a := newStore(t, rs.url(), namespace(t), "a", 3*time.Second)
	a.Start(Hooks{})
	defer a.Close()
	r := NewRates(a)
	rs.stop()
	ctx := context.Background()
	lim := Limits{RequestsPerMinute: 2}
	if st := r.Admit(ctx, "c", lim); !st.Allowed {
		t.Fatalf("refused during the outage: %+v", st)
	}
	if !a.Degraded() {
		t.Fatal("not degraded")
	}
	if st := r.Admit(ctx, "c", lim); !st.Allowed {
		t.Fatalf("second request refused: %+v", st)
	}
	if st := r.Admit(ctx, "c", lim); st.Allowed {
		t.Fatal("third request allowed over the local share")
	}
}

// TestRatesPeek: Peek reads a client's windows as the other replica
// counted them, locally and in Redis, and counts nothing itself.
func TestRatesPeek(t *testing.T) {
	url, ns := redisURL(t), namespace(t)
	a := newStore(t, url, ns, "a", 5*time.Second)
	b := newStore(t, url, ns, "b", 5*time.Second)
	a.Start(Hooks{})
	b.Start(Hooks{})
	defer b.Close()
	defer a.Close()
	ctx := context.Background()
	lim := Limits{RequestsPerMinute: 3, TokensPerMinute: 100}
	for name, pair := range map[string][2]*Rates{"redis": {NewRates(a), NewRates(b)}, "local": {NewRates(nil), nil}} {
		counter, reader := pair[0], pair[1]
		if reader == nil {
			reader = counter
		}
		for range 2 {
			counter.Admit(ctx, "p", lim)
		}
		if err := counter.AddTokens(ctx, "p", lim, 40); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			st := reader.Peek(ctx, "p", lim)
			if !st.Allowed || st.RemainingRequests != 1 || st.RemainingTokens != 60 || st.ResetRequests <= 0 || st.ResetTokens <= 0 {
				t.Fatalf("%s: peek %+v, want 1 request and 60 tokens left", name, st)
			}
		}
		counter.Admit(ctx, "p", lim)
		if st := reader.Peek(ctx, "p", lim); st.Allowed || st.RemainingRequests != 0 {
			t.Fatalf("%s: peek after the third request %+v, want the window full", name, st)
		}
	}
}
