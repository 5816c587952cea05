package candidates

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
)

// loserPanic panics at the CandidateDone of a cancelled candidate only: a
// hedge loser settling itself.
type loserPanic struct{ panicObserver }

func (loserPanic) CandidateDone(_ *Candidate, status, _ string, _ time.Duration) {
	if status == report.CandidateCancelled {
		panic("observer panic at a loser's candidate_done")
	}
}

// TestHedgeLoserPanicContained: a panic while a hedge loser settles itself,
// on its own goroutine after Run handed out the winner, neither takes the
// process down nor touches the winner: the winner is relayed, the loser's
// row (written before the observer) and slots are let go, the gates are
// back to zero.
func TestHedgeLoserPanicContained(t *testing.T) {
	h := newHealthRig(t, hedgeRoutes)
	h.run.Observe = loserPanic{}
	h.run.Log = slog.New(slog.DiscardHandler)
	res := raceRun(t, h, context.Background(), map[string]Sender{"a": &slowStream{delay: time.Hour}, "b": &slowStream{}}, nil)
	if res.got != ev1+"data: [DONE]\n\n" || res.out.Status != report.RequestSuccess {
		t.Fatalf("client got %q, outcome %+v", res.got, res.out)
	}
	if res.rows != "a:cancelled/hedge_lost b:success/" {
		t.Fatalf("rows %s", res.rows)
	}
	idle(t, h)
}

// TestQueuedFlightSettledWhenClientLeaves: a hedged flight still queued for
// admission when the client leaves gets a final record (unused, as in the
// sequential walk), not the "available" of its plan.
func TestQueuedFlightSettledWhenClientLeaves(t *testing.T) {
	h := newHealthRig(t, strings.Replace(hedgeRoutes, `api_keys: [ka], max_concurrency: 4 }`,
		`api_keys: [ka], max_concurrency: 1, queue_budget: 10s }`, 1))
	var prov *Provider
	for _, p := range h.plan.Providers() {
		if p.Name == "a" {
			prov = p
		}
	}
	hog, err := h.sched.Acquire(context.Background(), admission.Request{Priority: admission.Interactive, Budget: time.Second,
		Dimensions: []admission.Dimension{{Gate: admission.TargetGate, ID: prov.Targets[0].ID, Label: "a", Limit: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Release()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Wait until a is queued, then leave.
		for h.sched.Stats().Global.Pending == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	// b takes the hedge: make it slow so that only the queue matters.
	res := raceRun(t, h, ctx, map[string]Sender{"a": &slowStream{}, "b": &slowStream{delay: time.Hour}}, func(r *Request) {
		r.Hedge.After = time.Hour // no hedge: one flight, queued
	})
	if res.out.Status != report.RequestCancelled {
		t.Fatalf("outcome %+v", res.out)
	}
	if strings.Contains(res.rows, ":available/") || strings.Contains(res.rows, ":pending/") {
		t.Fatalf("rows %s: a candidate left without a final record", res.rows)
	}
}
