package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/pricing"
	"github.com/llmgw/gateway/internal/upstream"
)

// Budgets (docs/cost.md, "Budgets"): a request of a client whose budget,
// or whose team's, is set reserves an estimate of its cost before its first
// attempt and settles it to the real cost when it ends. A reservation that
// would cross a limit refuses the request with 429 insufficient_quota /
// budget_exceeded before anything reaches a provider.

// BudgetKeeper holds the budgets (implemented by *budget.Budgets).
type BudgetKeeper interface {
	Reserve(ctx context.Context, owners []budget.Owner, estimateMicros int64) (*budget.Reservation, error)
}

const (
	typeInsufficientQuota = "insufficient_quota"
	codeBudgetExceeded    = "budget_exceeded"
	// HeaderBudgetRemaining is on every answer to a budgeted client: the
	// smallest remaining of its budgets, its own reservation counted.
	HeaderBudgetRemaining = "X-Gateway-Budget-Remaining-Usd"
)

// estimateMicros is a request's reservation: its body's bytes / 4 at the
// first candidate's input price, plus its max_tokens (else the route's
// max_tokens_estimate, default 1024) at the output price, plus the request fee. An unpriced first
// candidate reserves nothing: its cost is unknown.
func estimateMicros(chat *upstream.ChatRequest, first *candidates.Candidate, outTokens int64) int64 {
	p := first.Price
	if p == nil {
		return 0
	}
	out := chat.MaxTokens
	if out <= 0 {
		out = outTokens
	}
	return pricing.Micros(p.Cost(pricing.Usage{Input: int64(len(chat.Body) / 4), Output: out}))
}

// reserve reserves the request's estimate against the budgets of its
// client and team. It answers the client itself and returns false when a
// budget refuses; with no budget it returns (nil, true).
func (s *Server) reserve(rj rejecter, owners []budget.Owner, estimate int64) (*budget.Reservation, bool) {
	if s.opts.Budgets == nil || len(owners) == 0 {
		return nil, true
	}
	res, err := s.opts.Budgets.Reserve(rj.r.Context(), owners, estimate)
	var ex *budget.ExceededError
	if errors.As(err, &ex) {
		h := rj.w.Header()
		h.Set(HeaderBudgetRemaining, FormatUSD(math.Max(ex.Remaining, 0)))
		if ex.RetryAfter > 0 {
			h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(ex.RetryAfter.Seconds())), 10))
		}
		s.opts.Observe.BudgetRefused(ex.Limit.Owner.Label())
		rj.reject(http.StatusTooManyRequests, typeInsufficientQuota, codeBudgetExceeded, "",
			"budget exceeded: "+ex.Limit.Owner.String()+", "+string(ex.Limit.Per))
		return nil, false
	}
	if err != nil {
		// The window's spend could not be read from the ledger (or the
		// client left): a budget that cannot be checked refuses rather
		// than lets the client spend without one.
		s.opts.Logger.Warn("budget not checked", "err", err)
		rj.w.Header().Set("Retry-After", "1")
		rj.reject(http.StatusServiceUnavailable, typeServer, codeInternal, "", "the budget could not be checked; retry shortly")
		return nil, false
	}
	if usd, ok := res.Remaining(); ok {
		rj.w.Header().Set(HeaderBudgetRemaining, FormatUSD(math.Max(usd, 0)))
	}
	return res, true
}

// settle replaces the reservation by what the request cost: its known
// part when some attempt's cost is unknown. It runs detached from the
// request's context: a client that left still spent.
func settle(ctx context.Context, res *budget.Reservation, out *candidates.Outcome) {
	if res == nil {
		return
	}
	var micros int64
	if out != nil {
		micros = pricing.Micros(out.Cost)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	res.Settle(sctx, micros)
}
