package candidates

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
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
func (o panicObserver) FirstByte(*Candidate, time.Duration)            { o.maybe("first_byte") }
func (o panicObserver) GlobalHeld(time.Duration)                       {}
func (o panicObserver) WatchdogFired(*Candidate, string)               {}
func (o panicObserver) RequestDone(string, string, int, time.Duration) {}
func (o panicObserver) Enqueued(time.Duration)                         {}

// ledger keeps the last record of each row.
type ledger struct {
	req   report.Request
	cands map[int]report.Candidate
}

func (l *ledger) RecordRequest(r report.Request)     { l.req = r }
func (l *ledger) RecordCandidate(c report.Candidate) { l.cands[c.Index] = c }

type succeed struct{}

func (succeed) Execute(_ context.Context, a *Attempt) error {
	a.Committed, a.Status, a.FirstByte = true, 200, time.Millisecond
	return nil
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
			r := &Runner{Admit: sched, Record: l, Observe: panicObserver{at: at}, Now: time.Now}
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("the panic did not reach the caller")
					}
				}()
				r.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Priority: admission.Interactive,
					Received: time.Now(), Candidates: plan}, succeed{})
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
