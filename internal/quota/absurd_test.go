package quota

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestAbsurdTokenCounts protects a replica from a provider's impossible
// usage: a count of math.MaxInt64 tokens neither overflows Redis's INCRBY
// into an error taken for an outage (the replica stays out of degraded
// mode) nor wraps a counter, and the client's window is simply full.
func TestAbsurdTokenCounts(t *testing.T) {
	url, ns := redisURL(t), namespace(t)
	s := newStore(t, url, ns, "a", 5*time.Second)
	s.Start(Hooks{})
	defer s.Close()
	r := NewRates(s)
	ctx := context.Background()
	lim := Limits{TokensPerMinute: 1000}
	for i := range 3 {
		if st := r.Admit(ctx, "huge", lim); i == 0 && !st.Allowed {
			t.Fatalf("first request refused: %+v", st)
		}
		if err := r.AddTokens(ctx, "huge", lim, math.MaxInt64); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		if s.Degraded() {
			t.Fatalf("add %d of MaxInt64 tokens put the replica in degraded mode", i)
		}
	}
	st := r.Admit(ctx, "huge", lim)
	if st.Allowed || st.RemainingTokens != 0 {
		t.Errorf("after huge counts: %+v, want refused with 0 remaining", st)
	}
	if r.AddTokens(ctx, "huge", lim, -5) != nil || s.Degraded() {
		t.Error("a negative count was not ignored")
	}

	// A key already past what INCRBY can add to (written by hand: the
	// gateway never stores one) makes the script fail on its input: a
	// typed error, not an outage.
	c := redis.NewClient(mustParse(t, url))
	defer c.Close()
	if err := c.Set(ctx, s.tpmKey("full"), math.MaxInt64, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	err := r.AddTokens(ctx, "full", lim, 10)
	var se *ScriptError
	if !errors.As(err, &se) {
		t.Fatalf("AddTokens on an overflowing key: %v, want a *ScriptError", err)
	}
	if s.Degraded() {
		t.Fatal("a script error from input put the replica in degraded mode")
	}
}

// TestLocalTokensNeverWrap: the local window saturates instead of
// wrapping to a negative count that would give a client more than its
// limit.
func TestLocalTokensNeverWrap(t *testing.T) {
	lr := NewLocalRates()
	lim := Limits{TokensPerMinute: 1000}
	for i := range 3 {
		lr.AddTokens("c", math.MaxInt)
		if st := lr.Admit("c", lim, 1); st.Allowed || st.RemainingTokens != 0 {
			t.Fatalf("after MaxInt tokens %d times: %+v, want refused with 0 remaining", i+1, st)
		}
	}
}

func mustParse(t *testing.T, url string) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
