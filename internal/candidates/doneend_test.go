package candidates

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// doneThenHang answers a stream whose last event ([DONE]) is followed by a
// connection that stays open until the request ends.
type doneThenHang struct{}

func (doneThenHang) Send(ctx context.Context, _ *upstream.Call) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: &hangAfter{ctx: ctx, rest: ev1 + "data: [DONE]\n\n"}, ContentLength: -1}, nil
}

type hangAfter struct {
	ctx  context.Context
	rest string
}

func (b *hangAfter) Read(p []byte) (int, error) {
	if b.rest != "" {
		n := copy(p, b.rest)
		b.rest = b.rest[n:]
		return n, nil
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *hangAfter) Close() error { return nil }

// TestClientGoneAfterLastEvent: a client that hangs up once it has the
// stream's last event ([DONE]) got the whole answer: the read that its
// leaving breaks ends the stream, and the request is a success, not a
// cancel.
func TestClientGoneAfterLastEvent(t *testing.T) {
	h := newHealthRig(t, healthRoutes)
	h.run.Upstreams = map[string]Sender{"a": doneThenHang{}, "b": doneThenHang{}}
	plan, _ := h.plan.Plan("m")
	l := &ledger{cands: map[int]report.Candidate{}}
	h.run.Record = l
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	att, _ := h.run.Run(ctx, &Request{ID: uuid.New(), Model: "m", Stream: true, Priority: admission.Interactive,
		Received: h.clock.Now(), Candidates: plan, Exchange: chatOf("m")})
	if att == nil {
		t.Fatal("nothing committed")
	}
	att.Sent()
	var got strings.Builder
	got.Write(att.First())
	var err error
	for err == nil {
		var b []byte
		if b, err = att.Next(); err == nil {
			got.Write(b)
			if strings.Contains(got.String(), "[DONE]") {
				cancel() // the client leaves with the whole answer
			}
		}
	}
	out := att.Finish(err)
	if err != io.EOF || out.Status != report.RequestSuccess || !strings.HasSuffix(got.String(), "data: [DONE]\n\n") {
		t.Fatalf("end %v, outcome %s, client got %q; want io.EOF, success and the whole answer", err, out.Status, got.String())
	}
	idle(t, h)
}
