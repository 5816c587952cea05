package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/quota"
)

// RateCounter counts clients' request and token rates (quota.Rates: in
// Redis across replicas, or in this process).
type RateCounter interface {
	Admit(ctx context.Context, client string, l quota.Limits) quota.RateState
	// AddTokens returns a *quota.ScriptError when the shared store
	// refused the count on its input (not an outage).
	AddTokens(ctx context.Context, client string, l quota.Limits, n int) error
}

// clientLimits are one client's limits from the routes file.
type clientLimits struct {
	concurrency int
	rates       quota.Limits
	team        string // the client's team: records, budgets, cost metrics
	costInUsage bool   // usage.cost in the answers (docs/cost.md)
	// owners are the budgets the client's requests reserve against: its
	// own and its team's (the budgets ignore an owner without a limit).
	owners []budget.Owner
}

// codeRateLimitExceeded is OpenAI's code for a client over its rate limit.
const codeRateLimitExceeded = "rate_limit_exceeded"

// countRate counts one request of a client with rate limits and sets the
// x-ratelimit-* headers; it answers 429 itself and returns false when a
// window is full. It runs after every check that can refuse the request,
// so a malformed request never uses up the client's quota.
func (s *Server) countRate(rj rejecter, client string, lim clientLimits) bool {
	if !lim.rates.Any() || s.opts.Rates == nil {
		return true
	}
	st := s.opts.Rates.Admit(rj.r.Context(), client, lim.rates)
	setRateHeaders(rj.w.Header(), lim.rates, st)
	if st.Allowed {
		return true
	}
	rj.w.Header().Set("Retry-After", retryAfterSeconds(st.RetryAfter))
	what := "requests"
	if lim.rates.TokensPerMinute > 0 && st.RemainingTokens == 0 {
		what = "tokens"
	}
	rj.reject(http.StatusTooManyRequests, typeRateLimit, codeRateLimitExceeded, "",
		"rate limit reached for "+what+" per minute; retry after "+retryAfterSeconds(st.RetryAfter)+"s")
	return false
}

// countTokens adds a finished request's tokens to its client's window,
// after the response, so the client's next request sees them.
func (s *Server) countTokens(ctx context.Context, client string, lim clientLimits, usage int) {
	if lim.rates.TokensPerMinute > 0 && s.opts.Rates != nil && usage > 0 {
		if err := s.opts.Rates.AddTokens(context.WithoutCancel(ctx), client, lim.rates, usage); err != nil {
			s.opts.Logger.Warn("tokens not counted in the shared store", "client", client, "tokens", usage, "error", err)
		}
	}
}

// setRateHeaders writes OpenAI's x-ratelimit-* headers for the limits the
// client has. They are set before the response starts, and the provider's
// headers of the same names do not replace them (upstream.CopyResponseHeaders).
func setRateHeaders(h http.Header, l quota.Limits, st quota.RateState) {
	if l.RequestsPerMinute > 0 {
		h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(st.Requests))
		h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(st.RemainingRequests))
		h.Set("X-Ratelimit-Reset-Requests", resetString(st.ResetRequests))
	}
	if l.TokensPerMinute > 0 {
		h.Set("X-Ratelimit-Limit-Tokens", strconv.Itoa(st.Tokens))
		h.Set("X-Ratelimit-Remaining-Tokens", strconv.Itoa(st.RemainingTokens))
		h.Set("X-Ratelimit-Reset-Tokens", resetString(st.ResetTokens))
	}
}

// resetString spells a reset the way OpenAI does: "1s", "6m0s", "59.5s".
func resetString(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}

// tokenCount counts a response's tokens for a client with a token rate
// before the client can see the response end, so that its next request,
// on any replica, already sees them. Nil for every other request.
type tokenCount struct {
	s      *Server
	ctx    context.Context
	client string
	lim    clientLimits
	done   bool
}

// newTokenCount returns nil unless the request's client has a token rate.
// lim comes from the routes file the request was planned with: a reload
// while it runs must not mix two files' limits into one request.
func (s *Server) newTokenCount(ctx context.Context, client string, lim clientLimits) *tokenCount {
	if client == "" || s.opts.Rates == nil {
		return nil
	}
	if lim.rates.TokensPerMinute <= 0 {
		return nil
	}
	return &tokenCount{s: s, ctx: ctx, client: client, lim: lim}
}

// beforeEnd counts the tokens when b ends the stream (its last event, or
// the held events that include it): the usage event came before it.
func (tc *tokenCount) beforeEnd(a *candidates.Attempt, b []byte) {
	if tc == nil || tc.done || !endsStream(b) {
		return
	}
	tc.count(a)
}

func (tc *tokenCount) count(a *candidates.Attempt) {
	if u, ok := a.UsageSoFar(); ok {
		tc.done = true
		tc.s.countTokens(tc.ctx, tc.client, tc.lim, int(u.TotalTokens))
	}
}

// finish counts the tokens of an answer whose end had no marker (a stream
// that ended without one): the best that can be done after the fact.
func (tc *tokenCount) finish(out *candidates.Outcome) {
	if tc != nil && !tc.done && out.HasUsage {
		tc.done = true
		tc.s.countTokens(tc.ctx, tc.client, tc.lim, int(out.Usage.TotalTokens))
	}
}

// endsStream reports whether b holds the event that ends a stream in any of
// the client formats: chat's [DONE], Anthropic's message_stop, Responses'
// response.completed. Only a line that starts with the marker counts: a
// model's text that quotes one is inside a JSON string, where a newline
// is always escaped, so it can never start a line.
func endsStream(b []byte) bool {
	for _, m := range streamEnds {
		if bytes.HasPrefix(b, m[1:]) || bytes.Contains(b, m) {
			return true
		}
	}
	return false
}

// streamEnds are the end markers, each with the newline that precedes it
// when it is not the first line of b.
var streamEnds = [][]byte{[]byte("\ndata: [DONE]"), []byte("\nevent: message_stop"), []byte("\nevent: response.completed")}

// sendCounted relays a body for a client with a token rate so that the
// client cannot see the end of the answer before its tokens are counted:
// each read of the body is written once the next one arrived, and the last
// only after the count (its usage is in the body's tail, which the attempt
// keeps). What is held back is one read, at most the attempt's read buffer,
// never the whole body; every write is bounded like any other (dl).
func (s *Server) sendCounted(w http.ResponseWriter, rc *http.ResponseController, dl *writeDeadline, a *candidates.Attempt, first []byte, tc *tokenCount) error {
	bp := heldBufs.Get().(*[]byte)
	held := append((*bp)[:0], first...)
	defer func() {
		// A translated body comes whole (up to 16 MiB): not kept.
		if cap(held) <= 64<<10 {
			*bp = held[:0]
			heldBufs.Put(bp)
		}
	}()
	sent := false
	var err error
	for {
		var b []byte
		if b, err = a.Next(); err != nil {
			break
		}
		if len(b) == 0 {
			continue
		}
		if err = s.send(w, rc, dl, held, false); err != nil {
			break
		}
		if !sent {
			a.Sent()
			sent = true
		}
		held = append(held[:0], b...) // b is the attempt's buffer: valid until the next read
	}
	if err != io.EOF {
		return err
	}
	tc.count(a)
	if err = s.send(w, rc, dl, held, true); err != nil {
		return err
	}
	if !sent {
		a.Sent()
	}
	dl.answered()
	return io.EOF
}

// heldBufs are sendCounted's buffers for the read it holds back.
var heldBufs = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}
