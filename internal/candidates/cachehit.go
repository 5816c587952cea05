package candidates

import (
	"context"
	"net/http"

	"github.com/llmgw/gateway/internal/report"
)

// RecordHit puts a request answered from the response cache on record,
// once its answer was written: one final request row (cache hit, success,
// 200, cost 0, no candidates: none was tried) with what the stored answer
// cost as its saving (savedUSD, when hasSaved), and the request in the
// request metrics like any other. req is the request as the handler read
// it; its Candidates are not looked at. The returned outcome is for the
// access log.
func (r *Runner) RecordHit(ctx context.Context, req *Request, savedUSD float64, hasSaved bool) *Outcome {
	traceID := ""
	if r.Trace != nil {
		traceID = r.Trace.TraceID(ctx)
	}
	now := r.now()
	rec := requestRow(req, traceID)
	rec.Cache, rec.CandidateCount = report.CacheHit, 0
	rec.Status, rec.StatusCode = report.RequestSuccess, http.StatusOK
	// A stored answer is written without waiting on anyone: its first
	// byte is not timed apart from its end.
	rec.Latency = now.Sub(req.Received)
	rec.FirstByte, rec.FinishedAt = rec.Latency, now
	rec.HasCost, rec.CostUSD = true, 0 // nothing was billed; budgets sum this column
	rec.HasSaved, rec.SavedUSD = hasSaved, savedUSD
	r.Record.RecordRequest(rec)
	if r.Observe != nil {
		r.Observe.RequestDone(req.Model, req.Route.String(), rec.Status, rec.StatusCode, rec.Latency)
	}
	return &Outcome{Status: rec.Status, StatusCode: rec.StatusCode, FirstByte: rec.FirstByte, HasCost: true, TraceID: traceID}
}
