package candidates

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/tracing"
	"github.com/llmgw/gateway/internal/upstream"
)

// Tracer puts a request's attempts and skipped candidates on its trace
// (implemented by *tracing.Tracer). Runner.Trace nil is tracing off: every
// hook below is then one nil check, with nothing kept per request.
type Tracer interface {
	// Attempt makes a settled attempt's span from its row.
	Attempt(ctx context.Context, at *tracing.Attempt)
	// Skipped notes a candidate skipped by policy on the request's span.
	Skipped(ctx context.Context, row *report.Candidate)
	// TraceID is the trace of ctx, for the request row; "" without one.
	TraceID(ctx context.Context) string
	// Traceparent is the trace context a propagating provider is sent.
	Traceparent(ctx context.Context, request uuid.UUID, index int, started time.Time) (parent, state string)
}

var _ Tracer = (*tracing.Tracer)(nil)

// spanNote is what a candidate's span needs that its row does not keep:
// set as the attempt goes, read when its row settles (traceAttempt).
type spanNote struct {
	queued    time.Time // when the attempt asked for its slots
	committed time.Time // when it passed its commit point
	hedge     bool      // started by the hedge timer
	reasons   []string  // why its answer ended (Attempt.Finish)
}

// traceStart readies a traced walk: the trace id its rows carry and a
// note per candidate.
func (w *walk) traceStart() {
	if w.r.Trace == nil {
		return
	}
	w.traceID = w.r.Trace.TraceID(w.ctx)
	w.notes = make([]spanNote, len(w.req.Candidates))
}

// traceAttempt makes the span of the attempt whose row just settled. It
// runs on whichever goroutine settles the row (a lost hedge's own), and
// reads only that candidate's note.
func (w *walk) traceAttempt(row *report.Candidate) {
	if w.r.Trace == nil {
		return
	}
	i := w.indexOf(row)
	n := &w.notes[i]
	at := tracing.Attempt{Row: row, Operation: operation(w.req.Route),
		Format: w.req.Candidates[i].Target.Provider.Format, Hedge: n.hedge,
		Queued: n.queued, Committed: n.committed, FinishReasons: n.reasons}
	if x, ok := w.req.Exchange.(*upstream.ChatRequest); ok {
		at.MaxTokens = x.MaxTokens
		at.Temperature, at.HasTemp = x.Temperature()
	}
	w.r.Trace.Attempt(w.ctx, &at)
	*n = spanNote{hedge: n.hedge} // a retry of the candidate starts its own
}

// indexOf is the position in the plan of row's candidate.
func (w *walk) indexOf(row *report.Candidate) int {
	for i := range w.req.Candidates {
		if w.req.Candidates[i].Index == row.Index {
			return i
		}
	}
	return 0
}

// traceSkip notes a skipped candidate on the request's span.
func (w *walk) traceSkip(row *report.Candidate) {
	if w.r.Trace != nil && row.Status == report.CandidateSkipped {
		w.r.Trace.Skipped(w.ctx, row)
	}
}

// traceQueued notes when candidate i's attempt asked for its slots.
func (w *walk) traceQueued(i int, at time.Time, hedge bool) {
	if w.notes != nil {
		w.notes[i].queued = at
		if hedge {
			w.notes[i].hedge = true
		}
	}
}

// traceFinished notes why the released attempt a's answer ended, as
// Finish read it; nothing for one that never reached Finish.
func (w *walk) traceFinished(a *Attempt) {
	if w.notes != nil {
		w.notes[a.i].reasons = a.reasons
	}
}

// traceCommitted notes when candidate i's attempt passed its commit point.
func (w *walk) traceCommitted(i int) {
	if w.notes != nil {
		w.notes[i].committed = w.r.now()
	}
}

// propagate sets the trace context a's call carries: only to a provider
// that asked for it (propagate_trace), else none.
func (a *Attempt) propagate(ctx context.Context, prov *Provider) {
	a.call.Traceparent, a.call.Tracestate = "", ""
	if a.r.Trace != nil && prov.PropagateTrace {
		a.call.Traceparent, a.call.Tracestate = a.r.Trace.Traceparent(ctx, a.req.ID,
			a.req.Candidates[a.i].Index, a.admitted)
	}
}

// operation is gen_ai.operation.name for a client route.
func operation(r upstream.Route) string {
	if r == upstream.RouteEmbeddings {
		return "embeddings"
	}
	return "chat"
}
