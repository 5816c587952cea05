package candidates

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// panicObserver panics at the named observation; the others are no-ops.
type panicObserver struct{ at string }

func (o panicObserver) maybe(point string) {
	if o.at == point {
		panic("observer panic at " + point)
	}
}
func (o panicObserver) AdmissionWait(*Candidate, time.Duration, error) { o.maybe("admission") }
func (o panicObserver) CandidateDone(*Candidate, string, string, time.Duration) {
	o.maybe("candidate_done")
}
func (o panicObserver) FirstByte(*Candidate, time.Duration)                      { o.maybe("first_byte") }
func (o panicObserver) GlobalHeld(time.Duration)                                 {}
func (o panicObserver) Billed(*Candidate, string, upstream.Usage, float64, bool) {}
func (o panicObserver) WatchdogFired(*Candidate, string)                         {}
func (o panicObserver) RequestDone(string, string, string, int, time.Duration)   {}
func (o panicObserver) Enqueued(time.Duration)                                   {}
func (o panicObserver) RetryBudgetExhausted(*Candidate)                          {}
func (o panicObserver) HedgeDone(*Candidate, string)                             {}

// ledger keeps the last record of each row. A hedge loser records its own
// row from its goroutine, so the writes are locked; tests read the fields
// once the runner has no flight left (settled).
type ledger struct {
	mu    sync.Mutex
	req   report.Request
	cands map[int]report.Candidate
}

func (l *ledger) RecordRequest(r report.Request) { l.mu.Lock(); l.req = r; l.mu.Unlock() }
func (l *ledger) RecordCandidate(c report.Candidate) {
	l.mu.Lock()
	l.cands[c.Index] = c
	l.mu.Unlock()
}

// succeed answers every call with a small non-streaming 200.
type succeed struct{}

func (succeed) Send(context.Context, *upstream.Call) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: 2,
		Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// runAll runs req and, when an attempt commits, relays it to nowhere the way
// the HTTP handler does, returning the request's outcome.
func runAll(r *Runner, req *Request) *Outcome {
	a, out := r.Run(context.Background(), req)
	if a == nil {
		return out
	}
	return relayTo(io.Discard, a)
}

// relayTo relays a committed attempt to w the way api.relay does (held
// bytes, Sent, then the rest; Abort on a panic) and ends it.
func relayTo(w io.Writer, a *Attempt) *Outcome {
	defer func() {
		if v := recover(); v != nil {
			a.Abort()
			panic(v)
		}
	}()
	_, _ = w.Write(a.First())
	a.Sent()
	for {
		b, err := a.Next()
		if err != nil {
			return a.Finish(err)
		}
		_, _ = w.Write(b)
	}
}

// candidateRows lists the candidate rows of plan as provider:status/error_type.
func candidateRows(l *ledger, plan []Candidate) []string {
	var rows []string
	for i := range plan {
		c := l.cands[i]
		rows = append(rows, c.Provider+":"+c.Status+"/"+c.ErrorType)
	}
	return rows
}

func chatOf(model string) *upstream.ChatRequest {
	c, err := upstream.ParseChatRequest([]byte(`{"model":"` + model + `","messages":[]}`))
	if err != nil {
		panic(err)
	}
	return c
}

// TestPanicReleasesSlots: whichever observation of an attempt panics, the
// attempt's slots are released and the ledger says the request failed with
// a gateway error; the panic still reaches the caller (the HTTP layer).
func TestPanicReleasesSlots(t *testing.T) {
	p := mustPlanner(t, `
providers:
  - { name: a, base_url: "http://a.example/v1", api_keys: [ka], max_concurrency: 1 }
models:
  - { name: m, candidates: [ { provider: a } ] }
`, 1)
	for _, at := range []string{"admission", "first_byte", "candidate_done"} {
		t.Run(at, func(t *testing.T) {
			sched := admission.New(admission.Config{GlobalLimit: 4})
			defer func() {
				// Bounded: Close waits for leases, and a leaked one is what
				// this test looks for.
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = sched.Close(ctx)
			}()
			plan, err := p.Plan("m")
			if err != nil {
				t.Fatal(err)
			}
			l := &ledger{cands: map[int]report.Candidate{}}
			r := &Runner{Admit: sched, Record: l, Observe: panicObserver{at: at},
				Upstreams: map[string]Sender{"a": succeed{}}}
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("the panic did not reach the caller")
					}
				}()
				runAll(r, &Request{ID: uuid.New(), Model: "m", Priority: admission.Interactive,
					Received: time.Now(), Candidates: plan, Exchange: chatOf("m")})
			}()
			if !sched.Idle() {
				t.Fatalf("slots held after a panic at %s: %+v", at, sched.Stats().Global)
			}
			if l.req.Status != report.RequestFailed || l.req.ErrorType != report.ErrorTypeInternal {
				t.Fatalf("request recorded %s/%s, want failed/%s", l.req.Status, l.req.ErrorType, report.ErrorTypeInternal)
			}
		})
	}
}
