package candidates

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

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
// blocks in Close until the test lets it go; Run hands out the winner while
// the loser is still closing. Once the close returns, the loser settles
// itself: its row is cancelled, 499, hedge_lost, its slots are released and
// no goroutine is left. The hedge delay passes on the rig's step clock.
func TestHedgeWinnerDoesNotWaitForLoser(t *testing.T) {
	defer goleak.VerifyNone(t)
	h, clock := newHedgeRig(t, hedgeRoutes)
	loser := &slowClose{slowStream: slowStream{gate: make(chan struct{}), reading: make(chan struct{})},
		closing: make(chan struct{}), release: make(chan struct{})}
	released := false
	t.Cleanup(func() { // a failed test must not leave the loser's close blocked
		if !released {
			close(loser.release)
		}
	})
	c := startHedged(t, h, loser, &slowStream{})
	clock.waitArmed(t, hedgeAfter)
	select { // the loser has its body before the hedge starts: it has one to close
	case <-loser.reading:
	case <-time.After(5 * time.Second):
		t.Fatal("the primary's body was never read")
	}
	clock.advance(hedgeAfter)
	var att *Attempt
	select {
	case att = <-c.done:
		c.finished = true
	case <-time.After(5 * time.Second): // the bound only ends a wait that never ends
		t.Fatal("Run did not return while the loser's close was blocked: the winner waited for it")
	}
	released = true
	close(loser.release)
	if att == nil {
		t.Fatalf("nothing committed: rows %v", candidateRows(c.l, c.plan))
	}
	var sb strings.Builder
	out := relayTo(&sb, att)
	if sb.String() != ev1+"data: [DONE]\n\n" || out.Status != report.RequestSuccess {
		t.Fatalf("client got %q, outcome %+v", sb.String(), out)
	}
	idle(t, h) // waits for the loser to settle itself
	select {
	case <-loser.closing:
	default:
		t.Fatal("the loser's upstream body was never closed")
	}
	if got := rowsOf(c.l, 2); got != "a:cancelled/hedge_lost b:success/" {
		t.Fatalf("rows %s", got)
	}
	if r := c.l.cands[0]; r.StatusCode != 499 || r.FinishedAt.IsZero() {
		t.Fatalf("loser row %+v, want 499 with its end", r)
	}
	if loser.cancelled.Load() != 1 {
		t.Fatal("the loser's upstream request was not cancelled")
	}
}
