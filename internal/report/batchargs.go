package report

import (
	"strconv"
	"strings"
	"time"
)

// batchArgs holds a batch as one array per column, the parameters of
// upsertBatchSQL. It is owned by the batcher goroutine and reused from batch to
// batch, so filling it allocates nothing once the slices have grown.
//
// The encodings keep pgx on its fast paths ([]string, []int32, []int64,
// [][16]byte, []time.Time need no reflection and no allocation per element)
// and put the record types' "zero means NULL" convention into the SQL: a text
// column that is NULL when empty is sent as ” and wrapped in NULLIF(x, ”),
// status codes likewise with 0, durations as nanoseconds turned into
// milliseconds by NULLIF(ns, 0) / 1000000 (the same truncation as
// time.Duration.Milliseconds). Only nullable timestamps and token counts,
// where the zero value does not mark NULL in SQL terms, are pointers: into
// the rows themselves, or nil for NULL.
type batchArgs struct {
	cRequestID                                     [][16]byte
	cIndex, cRetry, cStatusCode, cResumedFrom      []int32
	cProvider, cEndpoint, cKeyID, cModel, cStatus  []string
	cSkipReason, cErrorType, cErrorMessage         []string
	cLatency, cFirstByte                           []int64
	cStartedAt, cFinishedAt                        []*time.Time
	cCreatedAt                                     []time.Time
	cPrompt, cCompletion, cCached, cWrite, cReason []*int64
	cEstimated                                     []bool
	cCost                                          []*float64
	rID                                            [][16]byte
	rClientRequestID, rModel, rRoute, rClient      []string
	rPriority, rReplica                            []string
	rStatus, rErrorType                            []string
	rCreatedAt                                     []time.Time
	rStream                                        []bool
	rStatusCode, rCandidateCount                   []int32
	rLatency, rFirstByte                           []int64
	rPromptTokens, rCompletionTokens, rTotalTokens []*int64
	rFinishedAt                                    []*time.Time
	rTeam, rTraceID, rCache                        []string
	rCached, rWrite, rReason                       []*int64
	rEstimated                                     []bool
	rCost, rSaved                                  []*float64

	args []any
}

// fill sets the arrays from the rows and returns the statement to run and
// its arguments: insertBatchSQL when every row is flagged as presumed new in
// reqNew and candNew (nil: none), else upsertBatchSQL. The rows must stay
// unchanged until the statement has run (some arguments point into them).
func (a *batchArgs) fill(reqs []Request, reqNew []bool, cands []Candidate, candNew []bool) (string, []any) {
	a.reset()
	allNew := true
	for i := range cands {
		a.addCandidate(&cands[i])
		allNew = allNew && candNew != nil && candNew[i]
	}
	for i := range reqs {
		a.addRequest(&reqs[i])
		allNew = allNew && reqNew != nil && reqNew[i]
	}
	// The order is that of candidateParams and requestParams.
	a.args = append(a.args[:0],
		a.cRequestID, a.cIndex, a.cRetry, a.cProvider, a.cEndpoint, a.cKeyID, a.cModel,
		a.cStatus, a.cSkipReason, a.cStatusCode, a.cErrorType, a.cErrorMessage,
		a.cLatency, a.cFirstByte, a.cStartedAt, a.cFinishedAt, a.cCreatedAt, a.cResumedFrom,
		a.cPrompt, a.cCompletion, a.cCached, a.cWrite, a.cReason, a.cEstimated, a.cCost,
		a.rID, a.rClientRequestID, a.rCreatedAt, a.rModel, a.rRoute, a.rReplica, a.rStream, a.rClient, a.rPriority,
		a.rStatus, a.rStatusCode, a.rErrorType, a.rLatency, a.rFirstByte,
		a.rCandidateCount, a.rPromptTokens, a.rCompletionTokens, a.rTotalTokens, a.rFinishedAt,
		a.rTeam, a.rCached, a.rWrite, a.rReason, a.rEstimated, a.rCost, a.rTraceID,
		a.rCache, a.rSaved)
	if allNew {
		return insertBatchSQL, a.args
	}
	return upsertBatchSQL, a.args
}

func (a *batchArgs) addCandidate(c *Candidate) {
	a.cRequestID = append(a.cRequestID, [16]byte(c.RequestID))
	a.cIndex = append(a.cIndex, int32(c.Index))
	a.cRetry = append(a.cRetry, int32(c.RetryIndex))
	a.cProvider = append(a.cProvider, c.Provider)
	a.cEndpoint = append(a.cEndpoint, c.Endpoint)
	a.cKeyID = append(a.cKeyID, c.KeyID)
	a.cModel = append(a.cModel, c.Model)
	a.cStatus = append(a.cStatus, c.Status)
	a.cSkipReason = append(a.cSkipReason, c.SkipReason)
	a.cStatusCode = append(a.cStatusCode, int32(c.StatusCode))
	a.cErrorType = append(a.cErrorType, c.ErrorType)
	a.cErrorMessage = append(a.cErrorMessage, c.ErrorMessage)
	a.cLatency = append(a.cLatency, int64(c.Latency))
	a.cFirstByte = append(a.cFirstByte, int64(c.FirstByte))
	a.cStartedAt = append(a.cStartedAt, timeOrNil(&c.StartedAt))
	a.cFinishedAt = append(a.cFinishedAt, timeOrNil(&c.FinishedAt))
	a.cCreatedAt = append(a.cCreatedAt, c.CreatedAt)
	from := int32(-1) // NULL
	if c.Resumed {
		from = int32(c.ResumedFrom)
	}
	a.cResumedFrom = append(a.cResumedFrom, from)
	if c.HasUsage {
		a.cPrompt, a.cCompletion = append(a.cPrompt, &c.PromptTokens), append(a.cCompletion, &c.CompletionTokens)
		a.cCached, a.cWrite, a.cReason = append(a.cCached, &c.CachedTokens), append(a.cWrite, &c.CacheWriteTokens),
			append(a.cReason, &c.ReasoningTokens)
	} else {
		a.cPrompt, a.cCompletion = append(a.cPrompt, nil), append(a.cCompletion, nil)
		a.cCached, a.cWrite, a.cReason = append(a.cCached, nil), append(a.cWrite, nil), append(a.cReason, nil)
	}
	a.cEstimated = append(a.cEstimated, c.UsageEstimated)
	a.cCost = append(a.cCost, costOrNil(c.HasCost, &c.CostUSD))
}

func costOrNil(has bool, usd *float64) *float64 {
	if !has {
		return nil
	}
	return usd
}

func (a *batchArgs) addRequest(r *Request) {
	a.rID = append(a.rID, [16]byte(r.ID))
	a.rClientRequestID = append(a.rClientRequestID, r.ClientRequestID)
	a.rCreatedAt = append(a.rCreatedAt, r.CreatedAt)
	a.rModel = append(a.rModel, r.Model)
	route := r.Route
	if route == "" {
		route = "chat" // a record spooled before routes existed
	}
	a.rRoute = append(a.rRoute, route)
	a.rReplica = append(a.rReplica, r.Replica)
	a.rStream = append(a.rStream, r.Stream)
	a.rClient = append(a.rClient, r.Client)
	a.rPriority = append(a.rPriority, r.Priority)
	a.rStatus = append(a.rStatus, r.Status)
	a.rStatusCode = append(a.rStatusCode, int32(r.StatusCode))
	a.rErrorType = append(a.rErrorType, r.ErrorType)
	a.rLatency = append(a.rLatency, int64(r.Latency))
	a.rFirstByte = append(a.rFirstByte, int64(r.FirstByte))
	a.rCandidateCount = append(a.rCandidateCount, int32(r.CandidateCount))
	if r.HasUsage {
		a.rPromptTokens = append(a.rPromptTokens, &r.PromptTokens)
		a.rCompletionTokens = append(a.rCompletionTokens, &r.CompletionTokens)
		a.rTotalTokens = append(a.rTotalTokens, &r.TotalTokens)
		a.rCached, a.rWrite, a.rReason = append(a.rCached, &r.CachedTokens), append(a.rWrite, &r.CacheWriteTokens),
			append(a.rReason, &r.ReasoningTokens)
	} else {
		a.rPromptTokens = append(a.rPromptTokens, nil)
		a.rCompletionTokens = append(a.rCompletionTokens, nil)
		a.rTotalTokens = append(a.rTotalTokens, nil)
		a.rCached, a.rWrite, a.rReason = append(a.rCached, nil), append(a.rWrite, nil), append(a.rReason, nil)
	}
	a.rFinishedAt = append(a.rFinishedAt, timeOrNil(&r.FinishedAt))
	a.rTeam = append(a.rTeam, r.Team)
	a.rEstimated = append(a.rEstimated, r.UsageEstimated)
	a.rCost = append(a.rCost, costOrNil(r.HasCost, &r.CostUSD))
	a.rTraceID = append(a.rTraceID, r.TraceID)
	a.rCache = append(a.rCache, r.Cache)
	a.rSaved = append(a.rSaved, costOrNil(r.HasSaved, &r.SavedUSD))
}

// reset empties the arrays, dropping the references into the last batch's
// rows and strings so the GC can reclaim them.
func (a *batchArgs) reset() {
	a.cRequestID = a.cRequestID[:0]
	a.cIndex, a.cRetry, a.cStatusCode, a.cResumedFrom = a.cIndex[:0], a.cRetry[:0], a.cStatusCode[:0], a.cResumedFrom[:0]
	for _, s := range []*[]string{&a.cProvider, &a.cEndpoint, &a.cKeyID, &a.cModel, &a.cStatus,
		&a.cSkipReason, &a.cErrorType, &a.cErrorMessage, &a.rClientRequestID, &a.rModel, &a.rRoute, &a.rReplica,
		&a.rClient, &a.rPriority, &a.rStatus, &a.rErrorType, &a.rTeam, &a.rTraceID, &a.rCache} {
		clear(*s)
		*s = (*s)[:0]
	}
	for _, p := range []*[]*time.Time{&a.cStartedAt, &a.cFinishedAt, &a.rFinishedAt} {
		clear(*p)
		*p = (*p)[:0]
	}
	for _, p := range []*[]*int64{&a.rPromptTokens, &a.rCompletionTokens, &a.rTotalTokens, &a.rCached, &a.rWrite, &a.rReason,
		&a.cPrompt, &a.cCompletion, &a.cCached, &a.cWrite, &a.cReason} {
		clear(*p)
		*p = (*p)[:0]
	}
	for _, p := range []*[]*float64{&a.cCost, &a.rCost, &a.rSaved} {
		clear(*p)
		*p = (*p)[:0]
	}
	a.cEstimated, a.rEstimated = a.cEstimated[:0], a.rEstimated[:0]
	a.cLatency, a.cFirstByte = a.cLatency[:0], a.cFirstByte[:0]
	a.cCreatedAt = a.cCreatedAt[:0]
	a.rID, a.rCreatedAt, a.rStream = a.rID[:0], a.rCreatedAt[:0], a.rStream[:0]
	a.rStatusCode, a.rCandidateCount = a.rStatusCode[:0], a.rCandidateCount[:0]
	a.rLatency, a.rFirstByte = a.rLatency[:0], a.rFirstByte[:0]
	clear(a.args)
	a.args = a.args[:0]
}

func timeOrNil(t *time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return t
}

// param describes one array parameter: its element type, and the expression
// that turns the unnested value u.<column> into the column's value.
type param struct {
	column, typ, expr string
}

// candidateParams and requestParams follow the column lists and the order of
// batchArgs.fill; expr is empty when the value is used as it is.
var candidateParams = []param{
	{"request_id", "uuid", ""}, {"candidate_index", "int4", ""}, {"retry_index", "int4", ""},
	{"provider", "text", ""}, {"endpoint", "text", ""}, {"key_id", "text", ""},
	{"model", "text", ""}, {"status", "text", ""}, {"skip_reason", "text", "nullText"},
	{"status_code", "int4", "nullZero"}, {"error_type", "text", "nullText"},
	{"error_message", "text", "nullText"}, {"latency_ms", "int8", "millis"},
	{"first_byte_ms", "int8", "millis"}, {"started_at", "timestamptz", ""},
	{"finished_at", "timestamptz", ""}, {"created_at", "timestamptz", ""},
	{"resumed_from", "int4", "nullNegative"},
	{"prompt_tokens", "int8", ""}, {"completion_tokens", "int8", ""}, {"cached_tokens", "int8", ""},
	{"cache_write_tokens", "int8", ""}, {"reasoning_tokens", "int8", ""}, {"usage_estimated", "bool", ""},
	{"cost_usd", "float8", ""},
}

var requestParams = []param{
	{"id", "uuid", ""}, {"client_request_id", "text", "nullText"}, {"created_at", "timestamptz", ""},
	{"model", "text", ""}, {"route", "text", ""}, {"replica", "text", ""}, {"stream", "bool", ""}, {"client", "text", "nullText"},
	{"priority", "text", "nullText"}, {"status", "text", ""}, {"status_code", "int4", "nullZero"},
	{"error_type", "text", "nullText"}, {"latency_ms", "int8", "millis"},
	{"first_byte_ms", "int8", "millis"}, {"candidate_count", "int4", ""},
	{"prompt_tokens", "int8", ""}, {"completion_tokens", "int8", ""},
	{"total_tokens", "int8", ""}, {"finished_at", "timestamptz", ""},
	{"team", "text", "nullText"}, {"cached_tokens", "int8", ""}, {"cache_write_tokens", "int8", ""},
	{"reasoning_tokens", "int8", ""}, {"usage_estimated", "bool", ""}, {"cost_usd", "float8", ""},
	{"trace_id", "text", "nullText"}, {"cache", "text", "nullText"}, {"saved_usd", "float8", ""},
}

// insertFromArrays renders INSERT INTO table ... SELECT ... FROM (SELECT
// unnest($first), ...) for the given parameters.
//
// The unnest calls are in a select list, where Postgres zips them row by row
// (a ProjectSet node), rather than in FROM, where each array would first be
// copied into a tuplestore of its own: one per column, whose buffers
// alone cost the backend more CPU than a small batch's rows.
func insertFromArrays(table string, params []param, first int) string {
	var cols, exprs, unnests []string
	for i, p := range params {
		u := "u." + p.column
		switch p.expr {
		case "nullText":
			u = "NULLIF(" + u + ", '')"
		case "nullZero":
			u = "NULLIF(" + u + ", 0)"
		case "nullNegative":
			u = "NULLIF(" + u + ", -1)"
		case "millis":
			u = "NULLIF(" + u + ", 0) / 1000000"
		}
		cols = append(cols, p.column)
		exprs = append(exprs, u)
		unnests = append(unnests, "unnest($"+strconv.Itoa(first+i)+"::"+p.typ+"[]) AS "+p.column)
	}
	return "INSERT INTO " + table + " AS t (" + strings.Join(cols, ", ") + ")\nSELECT " +
		strings.Join(exprs, ", ") + "\nFROM (SELECT " + strings.Join(unnests, ", ") + ") AS u"
}

// The statements that write a batch, each atomic on its own (no BEGIN and
// COMMIT); data-modifying CTEs run to completion although nothing reads them.
//
// A batch whose rows are all presumed new (see merger.add) is inserted
// plainly: a plain INSERT skips what ON CONFLICT costs per row (a probe of the
// primary key before the insert, a speculative-insertion lock and a
// confirmation WAL record), about a fifth of the backend's CPU per row. A row
// that exists after all fails the statement with a unique violation, and
// upsertMerged writes the batch again with upsertBatchSQL. A batch with both
// kinds of rows is upserted whole: a statement inserting some rows and
// upserting others (four ModifyTable nodes) measured no cheaper.
var (
	insertBatchSQL = "WITH c AS (\n" +
		insertFromArrays("request_candidates", candidateParams, 1) + "\n)\n" +
		insertFromArrays("requests", requestParams, 1+len(candidateParams))
	upsertBatchSQL = "WITH c AS (\n" +
		insertFromArrays("request_candidates", candidateParams, 1) + candidateConflictSQL + "\n)\n" +
		insertFromArrays("requests", requestParams, 1+len(candidateParams)) + requestConflictSQL
)
