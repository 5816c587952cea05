package candidates

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// emptyReads is a non-streaming body that answers its first empties reads
// with (0, nil), which io.Reader allows, then yields body.
type emptyReads struct {
	empties int
	body    io.Reader
}

func (b *emptyReads) Read(p []byte) (int, error) {
	if b.empties > 0 {
		b.empties--
		return 0, nil
	}
	return b.body.Read(p)
}

func (b *emptyReads) Close() error { return nil }

// emptyFirst answers with an emptyReads body of empties empty reads.
type emptyFirst struct{ empties int }

func (e emptyFirst) Send(context.Context, *upstream.Call) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: -1,
		Body: &emptyReads{empties: e.empties, body: strings.NewReader(`{"ok":1}`)}}, nil
}

// TestEmptyFirstRead protects a non-streaming answer whose first read
// returns (0, nil): the attempt reads on and relays the body, a body that
// never makes progress fails over like any broken body, and either way the
// client gets a real answer (never a zero outcome) and every gate slot
// comes back.
func TestEmptyFirstRead(t *testing.T) {
	for _, tt := range []struct {
		name     string
		a        Sender
		wantBody string
		wantRows string
	}{
		{"one empty read", emptyFirst{1}, `{"ok":1}`, "a:success/ b:unused/"},
		{"a few empty reads", emptyFirst{5}, `{"ok":1}`, "a:success/ b:unused/"},
		{"no progress ever", emptyFirst{1 << 30}, `{}`, "a:failed/upstream_protocol_error b:success/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHealthRig(t, healthRoutes)
			leakProof(t, h)
			h.run.Upstreams = map[string]Sender{"a": tt.a, "b": succeed{}}
			plan, err := h.plan.Plan("m")
			if err != nil {
				t.Fatal(err)
			}
			l := &ledger{cands: map[int]report.Candidate{}}
			h.run.Record = l
			att, out := h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m",
				Priority: admission.Interactive, Received: h.clock.Now(), Candidates: plan, Exchange: chatOf("m")})
			var sb strings.Builder
			if att != nil {
				out = relayTo(&sb, att)
			}
			idle(t, h)
			if out.StatusCode != http.StatusOK || out.Status != report.RequestSuccess {
				t.Fatalf("outcome %d %q (committed %v), want 200 %q", out.StatusCode, out.Status, att != nil, report.RequestSuccess)
			}
			if got := sb.String(); got != tt.wantBody {
				t.Fatalf("client got %q, want %q", got, tt.wantBody)
			}
			if got := rowsOf(l, len(plan)); got != tt.wantRows {
				t.Fatalf("rows %s, want %s", got, tt.wantRows)
			}
		})
	}
}

// leakProof gives the rig a scheduler of its own whose closing gives up
// after a while, so a test that leaks a slot fails instead of hanging in
// its clean-up.
func leakProof(t *testing.T, h *healthRig) {
	t.Helper()
	sched := admission.New(admission.Config{GlobalLimit: 8})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = sched.Close(ctx)
	})
	h.sched, h.run.Admit = sched, sched
}
