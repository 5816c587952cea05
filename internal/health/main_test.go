package health

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind; the
// package starts none, and this keeps it that way.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeClock only moves when Advance is called.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// recorder collects notified transitions.
type recorder struct {
	mu  sync.Mutex
	trs []Transition
}

func (r *recorder) notify(tr Transition) {
	r.mu.Lock()
	r.trs = append(r.trs, tr)
	r.mu.Unlock()
}

// take returns the transitions since the last take.
func (r *recorder) take() []Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	trs := r.trs
	r.trs = nil
	return trs
}

func (tr Transition) short() string {
	return fmt.Sprintf("%s %s->%s %s", tr.KeyID, tr.From, tr.To, tr.Reason)
}

// Verdicts as the gateway's classifier would produce them: a 5xx or a
// timeout is the model's, a refused dial the provider's, a 401/403 or a
// key-wide 429 the key's, a plain 429 the (key, model)'s.
var (
	success   = Verdict{Success: true}
	http429   = Verdict{Counts: true, ErrorType: "upstream_http_error", Status: 429}
	http429K  = Verdict{Counts: true, Scope: ScopeKey, ErrorType: "upstream_http_error", Status: 429}
	http502   = Verdict{Counts: true, Scope: ScopeModel, ErrorType: "upstream_http_error", Status: 502}
	connErr   = Verdict{Counts: true, Scope: ScopeProvider, ErrorType: "upstream_connect_error", Status: 502}
	timeout   = Verdict{Counts: true, Scope: ScopeModel, ErrorType: "stream_first_byte_timeout", Status: 504}
	http401   = Verdict{Counts: true, Scope: ScopeKey, Auth: true, ErrorType: "upstream_http_error", Status: 401}
	http403   = Verdict{Counts: true, Scope: ScopeKey, Auth: true, ErrorType: "upstream_http_error", Status: 403}
	http400   = Verdict{ErrorType: "upstream_http_error", Status: 400}
	cancelled = Verdict{ErrorType: "client_cancelled", Status: 499}
	admission = Verdict{ErrorType: "gateway_admission_timeout", Status: 429}
)

func http429After(d time.Duration) Verdict {
	v := http429
	v.RetryAfter = d
	return v
}

func http503After(d time.Duration) Verdict {
	return Verdict{Counts: true, Scope: ScopeModel, RetryAfter: d, ErrorType: "upstream_http_error", Status: 503}
}
