package candidates

import (
	"net/http"

	"github.com/llmgw/gateway/internal/report"
)

// How the walk puts a request and its candidates on record: the planned
// rows, each candidate's settlement, the untried ones, and the request's
// final row (the table of events and rows in docs/architecture.md).

// requestRow is the part of a request's row that its plan and client
// decide: every record of the request carries it (planned, final, or a
// cache hit's only one).
func requestRow(req *Request, traceID string) report.Request {
	return report.Request{
		ID: req.ID, ClientRequestID: req.ClientRequestID, CreatedAt: req.Received,
		Model: req.Model, Route: req.Route.String(), Stream: req.Stream, Client: req.Client, Team: req.Team,
		Priority: req.Priority.String(), CandidateCount: len(req.Candidates), TraceID: traceID, Cache: req.Cache,
	}
}

// recordPlanned writes the pending request and its available candidates.
func (w *walk) recordPlanned() {
	req := w.req
	rec := requestRow(req, w.traceID)
	rec.Status = report.RequestPending
	w.r.Record.RecordRequest(rec)
	w.rows = make([]report.Candidate, len(req.Candidates))
	for i := range req.Candidates {
		c := &req.Candidates[i]
		w.rows[i] = report.Candidate{
			RequestID: req.ID, Index: c.Index, Provider: c.Target.Provider.Name,
			Endpoint: c.Target.Provider.Origin, KeyID: c.Target.KeyID, Model: c.Model,
			Status: report.CandidateAvailable, CreatedAt: req.Received,
		}
		w.r.Record.RecordCandidate(w.rows[i])
	}
}

// finishRequest writes the request's final record.
func (w *walk) finishRequest() {
	out := &w.out
	now := w.r.now()
	out.Tried = w.tried
	if !w.sentAt.IsZero() {
		out.FirstByte = w.sentAt.Sub(w.req.Received)
	}
	rec := requestRow(w.req, w.traceID)
	rec.Status, rec.StatusCode, rec.ErrorType = out.Status, out.StatusCode, out.ErrorType
	rec.Latency, rec.FirstByte, rec.FinishedAt = now.Sub(w.req.Received), out.FirstByte, now
	out.TraceID = w.traceID
	if out.HasUsage {
		rec.HasUsage = true
		u := &out.Usage
		rec.PromptTokens, rec.CompletionTokens, rec.TotalTokens = u.PromptTokens, u.CompletionTokens, u.TotalTokens
		rec.CachedTokens, rec.CacheWriteTokens, rec.ReasoningTokens = u.CachedTokens, u.CacheWriteTokens, u.ReasoningTokens
	}
	out.Cost, out.HasCost = w.spentUSD()
	out.UsageEstimated = w.usageEstimated()
	rec.HasCost, rec.CostUSD, rec.UsageEstimated = out.HasCost, out.Cost, out.UsageEstimated
	w.r.Record.RecordRequest(rec)
	if w.cancel != nil {
		w.cancel()
	}
	if w.r.Observe != nil {
		w.r.Observe.Enqueued(w.r.now().Sub(now))
		w.r.Observe.RequestDone(w.req.Model, w.req.Route.String(), out.Status, out.StatusCode, rec.Latency)
	}
}

// sent records that the committed attempt's first bytes reached the client
// (settler): a stream's candidate is streaming from now on.
func (w *walk) sent(a *Attempt) {
	if w.sentAt.IsZero() { // a continuation's first bytes are not the request's
		w.sentAt = w.r.now()
	}
	if a.Stream() {
		row := &w.rows[a.i]
		row.Status, row.FirstByte = report.CandidateStreaming, a.fb
		w.r.Record.RecordCandidate(*row)
	}
}

// ended settles the committed attempt's row and the request's once its
// relay ended (settler).
func (w *walk) ended(a *Attempt, err error) *Outcome {
	w.end(a, err, true)
	if relayedError(err) {
		w.out.ErrorSent = true
	}
	w.finishRequest()
	return &w.out
}

func (w *walk) settle(i int, status string, code int, errorType, msg string) {
	row := &w.rows[i]
	row.Status, row.StatusCode, row.ErrorType, row.ErrorMessage = status, code, errorType, msg
	if row.FinishedAt.IsZero() && !row.StartedAt.IsZero() {
		row.FinishedAt = w.r.now()
		row.Latency = row.FinishedAt.Sub(row.StartedAt)
	}
	if status == report.CandidateFailed {
		w.failed++
	}
	w.r.Record.RecordCandidate(*row)
	w.traceAttempt(row)
	if w.r.Observe != nil {
		w.r.Observe.CandidateDone(&w.req.Candidates[i], status, errorType, row.Latency)
	}
}

// skipScope marks the later candidates that candidate i's failure of scope
// s reaches as skipped for the rest of the request: a transport failure
// every candidate of the provider (provider_failed), a model's failure
// those of the same provider and upstream model, on any key
// (model_failed). A key's failure skips nothing: the provider's other keys
// remain worth trying.
func (w *walk) skipScope(i int, s Scope) {
	c := &w.req.Candidates[i]
	reason := report.SkipModelFailed
	switch s {
	case ScopeTransport:
		reason = report.SkipProviderFailed
	case ScopeModel:
	default:
		return
	}
	for j := i + 1; j < len(w.req.Candidates); j++ {
		o := &w.req.Candidates[j]
		if o.Target.Provider != c.Target.Provider || w.rows[j].Status != report.CandidateAvailable ||
			s == ScopeModel && o.Model != c.Model {
			continue
		}
		w.rows[j].Status, w.rows[j].SkipReason = report.CandidateSkipped, reason
		w.r.Record.RecordCandidate(w.rows[j])
		w.traceSkip(&w.rows[j])
		w.observeUntried(j)
	}
}

// observeUntried counts an unused or skipped candidate, so candidate
// outcomes in metrics add up to every planned candidate.
func (w *walk) observeUntried(j int) {
	if w.r.Observe != nil {
		w.r.Observe.CandidateDone(&w.req.Candidates[j], w.rows[j].Status, "", 0)
	}
}

// stop settles the request with out: candidates from index from on that were
// never tried become unused. It returns true, for callers that report done.
func (w *walk) stop(from int, out Outcome) bool {
	if w.resumes > 0 {
		// A continuation stepped over the candidates after the cut that
		// take no prefill: they were never tried either.
		from = 0
	}
	w.recordSkips()
	for j := from; j < len(w.rows); j++ {
		if w.rows[j].Status == report.CandidateAvailable {
			w.rows[j].Status = report.CandidateUnused
			w.r.Record.RecordCandidate(w.rows[j])
			w.observeUntried(j)
		}
	}
	w.out = out
	return true
}

// exhausted settles a request whose every candidate failed (DESIGN section
// 4): 429 when each failed by admission or an upstream 429, 504 when the last
// failure was a timeout, else 502.
func (w *walk) exhausted() {
	w.recordSkips()
	out := Outcome{Status: report.RequestFailed, Code: "candidates_exhausted"}
	switch {
	case w.tooLong != nil:
		// The last candidate refused the request for its size: its answer,
		// in the client's shape, says what to shorten.
		out = Outcome{Status: report.RequestFailed, StatusCode: w.tooLong.Code, ErrorType: ErrorTypeContextLength, Relay: w.tooLong}
	case w.failed > 0 && w.retryable:
		out.StatusCode = http.StatusTooManyRequests
		out.RetryAfter = w.retryAfter
		out.Message = "every candidate is at capacity or rate limited; retry later"
	case w.timedOut:
		out.StatusCode = http.StatusGatewayTimeout
		out.Message = "every candidate failed; the last one timed out"
	default:
		out.StatusCode = http.StatusBadGateway
		out.Message = "every candidate failed"
	}
	// The request row names the last candidate's error type: it says why the
	// request ended; candidates_exhausted is the client-facing code.
	for j := len(w.rows) - 1; j >= 0; j-- {
		if w.rows[j].Status == report.CandidateFailed {
			out.ErrorType = w.rows[j].ErrorType
			break
		}
	}
	w.out = out
}
