package candidates

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
)

// oncePanic panics at the first CandidateDone only.
type oncePanic struct {
	panicObserver
	done atomic.Bool
}

func (o *oncePanic) CandidateDone(*Candidate, string, string, time.Duration) {
	if o.done.CompareAndSwap(false, true) {
		panic("observer panic at candidate_done")
	}
}

// TestHedgeWinnerReleasedByLatePanic: a panic while the losers of a hedged
// request are recorded (after the winner was chosen) still releases the
// winner's slots: the panic came before Run handed the winner out.
func TestHedgeWinnerReleasedByLatePanic(t *testing.T) {
	h := newHealthRig(t, hedgeRoutes)
	h.sched = admission.New(admission.Config{GlobalLimit: 8})
	h.run.Admit = h.sched
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = h.sched.Close(ctx)
	}()
	h.run.Observe = &oncePanic{}
	a := &slowStream{delay: time.Hour}
	h.run.Upstreams = map[string]Sender{"a": a, "b": &slowStream{}}
	l := &ledger{cands: map[int]report.Candidate{}}
	h.run.Record = l
	pol, plan, _ := h.plan.PlanPolicy("m")
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Stream: true, Priority: admission.Interactive,
			Received: time.Now(), Candidates: plan, Exchange: chatOf("m"), Hedge: pol.Hedge})
	}()
	t.Logf("rows %s, request %s/%s", rowsOf(l, 2), l.req.Status, l.req.ErrorType)
	if !h.sched.Idle() {
		t.Fatalf("the winner's lease outlived the panic: %+v", h.sched.Stats().Global)
	}
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
