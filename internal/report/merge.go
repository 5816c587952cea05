package report

import (
	"time"

	"github.com/google/uuid"
)

// merger folds the records of one batch into at most one row per key.
//
// It is needed because INSERT ... ON CONFLICT DO UPDATE refuses to touch the same
// row twice in one statement, and a batch routinely holds available, pending and
// success for the same candidate. The fold applies exactly the rules of the SQL
// upsert (mergeCandidate and mergeRequest mirror upsertCandidatesSQL and
// upsertRequestsSQL), treating the earlier record in the batch as the stored row,
// so folding first and upserting once gives the same row as upserting one by one.
// The merger is reused from batch to batch to avoid reallocating its maps.
type merger struct {
	reqs    []Request
	reqN    []int // records folded into reqs[i], for exact drop accounting
	reqNew  []bool
	reqIdx  map[uuid.UUID]int
	cands   []Candidate
	candN   []int
	candNew []bool
	candIdx map[candidateKey]int
}

func newMerger(capacity int) *merger {
	return &merger{
		reqIdx:  make(map[uuid.UUID]int, capacity),
		candIdx: make(map[candidateKey]int, capacity),
	}
}

func (m *merger) reset() {
	clear(m.reqs) // drop string references so the GC can reclaim them
	clear(m.cands)
	m.reqs = m.reqs[:0]
	m.cands = m.cands[:0]
	m.reqN = m.reqN[:0]
	m.candN = m.candN[:0]
	m.reqNew = m.reqNew[:0]
	m.candNew = m.candNew[:0]
	clear(m.reqIdx)
	clear(m.candIdx)
}

// add folds one sanitised record into the batch, keeping first-seen order of keys.
//
// It also notes which rows are presumably new: those whose records include
// the initial status (rank 0: a request's pending, a candidate's available).
// The attempt loop records that status once, first, when it plans a request,
// so a batch holding it holds the row's first record, and the row can be
// written with a plain INSERT (see upsertMerged, which falls back to the
// upsert when the guess was wrong).
func (m *merger) add(rec *record) {
	switch rec.kind {
	case kindRequest:
		initial := requestRank[rec.req.Status] == 0
		if i, ok := m.reqIdx[rec.req.ID]; ok {
			mergeRequest(&m.reqs[i], &rec.req)
			m.reqN[i]++
			m.reqNew[i] = m.reqNew[i] || initial
			return
		}
		m.reqIdx[rec.req.ID] = len(m.reqs)
		m.reqs = append(m.reqs, rec.req)
		m.reqN = append(m.reqN, 1)
		m.reqNew = append(m.reqNew, initial)
	case kindCandidate:
		k := rec.cand.key()
		initial := candidateRank[rec.cand.Status] == 0
		if i, ok := m.candIdx[k]; ok {
			mergeCandidate(&m.cands[i], &rec.cand)
			m.candN[i]++
			m.candNew[i] = m.candNew[i] || initial
			return
		}
		m.candIdx[k] = len(m.cands)
		m.cands = append(m.cands, rec.cand)
		m.candN = append(m.candN, 1)
		m.candNew = append(m.candNew, initial)
	}
}

// mergeCandidate applies an incoming record to a stored one under the rank rule.
func mergeCandidate(stored, in *Candidate) {
	if candidateRank[in.Status] <= candidateRank[stored.Status] {
		return
	}
	m := *in
	m.Provider = coalesceString(in.Provider, stored.Provider)
	m.Endpoint = coalesceString(in.Endpoint, stored.Endpoint)
	m.KeyID = coalesceString(in.KeyID, stored.KeyID)
	m.Model = coalesceString(in.Model, stored.Model)
	m.SkipReason = coalesceString(in.SkipReason, stored.SkipReason)
	m.StatusCode = coalesceInt(in.StatusCode, stored.StatusCode)
	m.ErrorType = coalesceString(in.ErrorType, stored.ErrorType)
	m.ErrorMessage = coalesceString(in.ErrorMessage, stored.ErrorMessage)
	m.Latency = coalesceDuration(in.Latency, stored.Latency)
	m.FirstByte = coalesceDuration(in.FirstByte, stored.FirstByte)
	m.StartedAt = earliest(in.StartedAt, stored.StartedAt)
	m.FinishedAt = coalesceTime(in.FinishedAt, stored.FinishedAt)
	m.CreatedAt = stored.CreatedAt
	if !in.Resumed {
		m.Resumed, m.ResumedFrom = stored.Resumed, stored.ResumedFrom
	}
	if !in.HasUsage && stored.HasUsage {
		m.HasUsage, m.PromptTokens, m.CompletionTokens = true, stored.PromptTokens, stored.CompletionTokens
		m.CachedTokens, m.CacheWriteTokens, m.ReasoningTokens = stored.CachedTokens, stored.CacheWriteTokens, stored.ReasoningTokens
	}
	if !in.HasCost && stored.HasCost {
		m.HasCost, m.CostUSD = true, stored.CostUSD
	}
	m.UsageEstimated = in.UsageEstimated || stored.UsageEstimated
	*stored = m
}

// mergeRequest applies an incoming request record to a stored one.
func mergeRequest(stored, in *Request) {
	if requestRank[in.Status] <= requestRank[stored.Status] {
		return
	}
	m := *in
	m.ClientRequestID = coalesceString(in.ClientRequestID, stored.ClientRequestID)
	m.Model = coalesceString(in.Model, stored.Model)
	m.Route = coalesceString(in.Route, stored.Route)
	m.Replica = coalesceString(in.Replica, stored.Replica)
	m.Stream = in.Stream || stored.Stream
	m.Client = coalesceString(in.Client, stored.Client)
	m.Priority = coalesceString(in.Priority, stored.Priority)
	m.StatusCode = coalesceInt(in.StatusCode, stored.StatusCode)
	m.ErrorType = coalesceString(in.ErrorType, stored.ErrorType)
	m.Latency = coalesceDuration(in.Latency, stored.Latency)
	m.FirstByte = coalesceDuration(in.FirstByte, stored.FirstByte)
	m.CandidateCount = max(in.CandidateCount, stored.CandidateCount)
	if !in.HasUsage && stored.HasUsage {
		m.HasUsage = true
		m.PromptTokens, m.CompletionTokens, m.TotalTokens = stored.PromptTokens, stored.CompletionTokens, stored.TotalTokens
		m.CachedTokens, m.CacheWriteTokens, m.ReasoningTokens = stored.CachedTokens, stored.CacheWriteTokens, stored.ReasoningTokens
	}
	if !in.HasCost && stored.HasCost {
		m.HasCost, m.CostUSD = true, stored.CostUSD
	}
	m.Team = coalesceString(in.Team, stored.Team)
	m.TraceID = coalesceString(in.TraceID, stored.TraceID)
	m.Cache = coalesceString(in.Cache, stored.Cache)
	if !in.HasSaved && stored.HasSaved {
		m.HasSaved, m.SavedUSD = true, stored.SavedUSD
	}
	m.UsageEstimated = in.UsageEstimated || stored.UsageEstimated
	m.FinishedAt = coalesceTime(in.FinishedAt, stored.FinishedAt)
	m.CreatedAt = stored.CreatedAt
	*stored = m
}

func coalesceString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func coalesceInt(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

func coalesceDuration(a, b time.Duration) time.Duration {
	if a != 0 {
		return a
	}
	return b
}

func coalesceTime(a, b time.Time) time.Time {
	if !a.IsZero() {
		return a
	}
	return b
}

// earliest is SQL LEAST over nullable timestamps: NULL (zero) loses.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	case b.Before(a):
		return b
	default:
		return a
	}
}
