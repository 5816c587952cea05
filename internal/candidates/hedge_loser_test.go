package candidates

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// slowClose answers with a stream that waits for its first event like
// slowStream (delay, or the request's end) and whose Close then blocks until
// release is closed: a transport slow to tear its connection down.
type slowClose struct {
	slowStream
	closing chan struct{} // closed when Close starts
	release chan struct{}
}

func (s *slowClose) Send(ctx context.Context, call *upstream.Call) (*http.Response, error) {
	resp, err := s.slowStream.Send(ctx, call)
	if err == nil {
		resp.Body = &slowCloseBody{ctxBody: resp.Body.(*ctxBody), s: s}
	}
	return resp, err
}

type slowCloseBody struct {
	*ctxBody
	s *slowClose
}

func (b *slowCloseBody) Close() error {
	close(b.s.closing)
	<-b.s.release
	return nil
}

// TestHedgeWinnerDoesNotWaitForLoser protects the winner's first byte from
// a loser's clean-up: the primary loses to the hedge and its upstream body
// is slow to close; Run hands out the winner at once, while the loser is
// still closing. Once the close returns, the loser settles itself: its row
// is cancelled, 499, hedge_lost, its slots are released and no goroutine is
// left.
func TestHedgeWinnerDoesNotWaitForLoser(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := newHealthRig(t, hedgeRoutes)
	loser := &slowClose{slowStream: slowStream{delay: time.Hour}, closing: make(chan struct{}), release: make(chan struct{})}
	h.run.Upstreams = map[string]Sender{"a": loser, "b": &slowStream{}}
	l := &ledger{cands: map[int]report.Candidate{}}
	h.run.Record = l
	pol, plan, err := h.plan.PlanPolicy("m")
	if err != nil {
		t.Fatal(err)
	}
	// A bound on the loser's close, so that code that waits for it fails
	// the test instead of hanging it.
	guard := time.AfterFunc(3*time.Second, func() { close(loser.release) })
	start := time.Now()
	att, out := h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Stream: true,
		Priority: admission.Interactive, Received: start, Candidates: plan, Exchange: chatOf("m"), Hedge: pol.Hedge})
	took := time.Since(start)
	if !guard.Stop() {
		t.Errorf("Run returned after %s, once the loser's close was let go: the winner waited for it", took)
	} else {
		close(loser.release)
	}
	if att == nil {
		t.Fatalf("nothing committed: %+v", out)
	}
	var sb strings.Builder
	out = relayTo(&sb, att)
	if sb.String() != ev1+"data: [DONE]\n\n" || out.Status != report.RequestSuccess {
		t.Fatalf("client got %q, outcome %+v", sb.String(), out)
	}
	idle(t, h) // waits for the loser to settle itself
	select {
	case <-loser.closing:
	default:
		t.Fatal("the loser's upstream body was never closed")
	}
	if got := rowsOf(l, 2); got != "a:cancelled/hedge_lost b:success/" {
		t.Fatalf("rows %s", got)
	}
	if c := l.cands[0]; c.StatusCode != 499 || c.FinishedAt.IsZero() {
		t.Fatalf("loser row %+v, want 499 with its end", c)
	}
	if loser.cancelled.Load() != 1 {
		t.Fatal("the loser's upstream request was not cancelled")
	}
}
