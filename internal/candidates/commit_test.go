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

// scriptedBody yields its chunks, then blocks until release is closed (when
// set), then ends with end (io.EOF when nil).
type scriptedBody struct {
	chunks  []string
	release chan struct{}
	then    []string // read once release is closed
	end     error
}

func (b *scriptedBody) Read(p []byte) (int, error) {
	if len(b.chunks) > 0 {
		n := copy(p, b.chunks[0])
		if b.chunks[0] = b.chunks[0][n:]; b.chunks[0] == "" {
			b.chunks = b.chunks[1:]
		}
		return n, nil
	}
	if b.release != nil {
		<-b.release
		b.release = nil
		if b.chunks, b.then = b.then, nil; len(b.chunks) > 0 {
			return b.Read(p)
		}
	}
	if b.end != nil {
		return 0, b.end
	}
	return 0, io.EOF
}

func (b *scriptedBody) Close() error { return nil }

// streams answers each provider with its own scripted stream.
type streams map[string]func() *scriptedBody

func (s streams) sender(name string) Sender { return streamSender{s[name]} }

type streamSender struct{ body func() *scriptedBody }

func (f streamSender) Send(context.Context, *upstream.Call) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: f.body(), ContentLength: -1}, nil
}

const ev1, ev2, ev3 = "data: {\"n\":1}\n\n", "data: {\"n\":2}\n\n", "data: {\"n\":3}\n\n"

// commitRun streams one request through the rig's runner and returns the
// bytes relayed to the client, the outcome and the candidate rows.
func commitRun(t *testing.T, h *healthRig, s streams) (string, *Outcome, []string) {
	t.Helper()
	h.run.Upstreams = map[string]Sender{"a": s.sender("a"), "b": s.sender("b")}
	l := &ledger{cands: map[int]report.Candidate{}}
	h.run.Record = l
	plan, _ := h.plan.Plan("m")
	a, out := h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Stream: true,
		Priority: admission.Interactive, Received: time.Now(), Candidates: plan, Exchange: chatOf("m")})
	var sb strings.Builder
	if a != nil {
		out = relayTo(&sb, a)
	}
	return sb.String(), out, candidateRows(l, plan)
}

const commitRoutes = `
providers:
  - { name: a, base_url: "http://a.example/v1", api_keys: [ka], max_concurrency: 4, stream_commit: { events: 3 } }
  - { name: b, base_url: "http://b.example/v1", api_keys: [kb], max_concurrency: 4 }
models:
  - name: m
    candidates: [ { provider: a, priority: 0 }, { provider: b, priority: 1 } ]
`

// TestCommitPoint: before its third event the primary's stream may still
// fail over invisibly, whether it carries an error object or is cut; the
// client then sees only the backup's stream. A stream that reaches the
// commit point, or [DONE] before it, is relayed whole.
func TestCommitPoint(t *testing.T) {
	backup := func() *scriptedBody { return &scriptedBody{chunks: []string{ev1, ev2, "data: [DONE]\n\n"}} }
	tests := []struct {
		name    string
		primary func() *scriptedBody
		want    string
		rows    string
	}{
		{"error object", func() *scriptedBody {
			return &scriptedBody{chunks: []string{ev1, "data: {\"error\":{\"message\":\"overloaded\"}}\n\n"}}
		}, ev1 + ev2 + "data: [DONE]\n\n", "a:failed/upstream_stream_error b:success/"},
		{"cut", func() *scriptedBody {
			return &scriptedBody{chunks: []string{ev1, ": ping\n\n", ev2}, end: io.ErrUnexpectedEOF}
		}, ev1 + ev2 + "data: [DONE]\n\n", "a:failed/stream_interrupted b:success/"},
		{"ended early without [DONE]", func() *scriptedBody {
			return &scriptedBody{chunks: []string{ev1}}
		}, ev1 + ev2 + "data: [DONE]\n\n", "a:failed/stream_interrupted b:success/"},
		{"error object as the first event", func() *scriptedBody {
			return &scriptedBody{chunks: []string{"data: {\"error\":{}}\n\n"}}
		}, ev1 + ev2 + "data: [DONE]\n\n", "a:failed/upstream_stream_error b:success/"},
		{"committed at the third event", func() *scriptedBody {
			return &scriptedBody{chunks: []string{ev1, ": ping\n\n", ev2, ev3, "data: [DONE]\n\n"}}
		}, ev1 + ": ping\n\n" + ev2 + ev3 + "data: [DONE]\n\n", "a:success/ b:unused/"},
		{"[DONE] before the commit point", func() *scriptedBody {
			return &scriptedBody{chunks: []string{ev1, "data: [DONE]\n\n"}}
		}, ev1 + "data: [DONE]\n\n", "a:success/ b:unused/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHealthRig(t, commitRoutes)
			got, out, rows := commitRun(t, h, streams{"a": tt.primary, "b": backup})
			if got != tt.want || strings.Join(rows, " ") != tt.rows || out.Status != report.RequestSuccess {
				t.Fatalf("client got %q\nrows %v, outcome %s\nwant %q\nrows %s", got, rows, out.Status, tt.want, tt.rows)
			}
		})
	}
}

// TestCommitWithin: a hold bounded by within commits with what arrived in
// time, while the upstream is still silent; the read in flight is collected
// by the relay afterwards.
func TestCommitWithin(t *testing.T) {
	h := newHealthRig(t, strings.Replace(commitRoutes, "stream_commit: { events: 3 }", "stream_commit: { events: 3, within: 30ms }", 1))
	release := make(chan struct{})
	h.run.Upstreams = map[string]Sender{
		"a": streamSender{func() *scriptedBody {
			return &scriptedBody{chunks: []string{ev1}, release: release, then: []string{"data: [DONE]\n\n"}}
		}},
	}
	// Bounds the test if the hold ignored within: Run would wait for this.
	guard := time.AfterFunc(5*time.Second, func() { close(release) })
	defer guard.Stop()
	plan, _ := h.plan.Plan("m")
	start := time.Now()
	a, out := h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Stream: true,
		Priority: admission.Interactive, Received: start, Candidates: plan, Exchange: chatOf("m")})
	if a == nil {
		t.Fatalf("nothing committed: %+v", out)
	}
	if took := time.Since(start); took > 2*time.Second || string(a.First()) != ev1 {
		t.Fatalf("committed %q after %s; want the first event once 30ms passed", a.First(), took)
	}
	a.Sent()
	if guard.Stop() {
		close(release)
	}
	if b, err := a.Next(); err != nil || string(b) != "data: [DONE]\n\n" {
		t.Fatalf("after release: %q, %v; want [DONE]", b, err)
	}
	if b, err := a.Next(); err != io.EOF {
		t.Fatalf("after [DONE]: %q, %v; want the clean end", b, err)
	}
	if out := a.Finish(io.EOF); out.Status != report.RequestSuccess {
		t.Fatalf("outcome %+v", out)
	}
}
