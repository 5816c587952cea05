package quota

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RateWindow is the span of a client's request and token counts. A window
// starts with the first request (or token) counted in it, so a client is
// never refused or reset by a wall-clock minute boundary it did not see.
const RateWindow = time.Minute

// Limits are one client's rates; 0 means no limit.
type Limits struct {
	RequestsPerMinute int
	TokensPerMinute   int
}

// Any reports that at least one rate is limited.
func (l Limits) Any() bool { return l.RequestsPerMinute > 0 || l.TokensPerMinute > 0 }

// RateState is a client's standing after a request was counted (or
// refused): what OpenAI's x-ratelimit-* headers report.
type RateState struct {
	Allowed bool
	// RetryAfter is when the exhausted window ends; set when refused.
	RetryAfter time.Duration

	Requests, RemainingRequests int
	ResetRequests               time.Duration
	Tokens, RemainingTokens     int
	ResetTokens                 time.Duration
}

// admitScript counts one request when both windows have room. KEYS[1] is
// the request counter, KEYS[2] the token counter; ARGV are their limits
// (0: none) and the window in ms. It returns {allowed, requests, tokens,
// request window ms left, token window ms left}.
var admitScript = redis.NewScript(`
local r = tonumber(redis.call('GET', KEYS[1]) or '0')
local t = tonumber(redis.call('GET', KEYS[2]) or '0')
local rl, tl, win = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local ok = 1
if (rl > 0 and r >= rl) or (tl > 0 and t >= tl) then
  ok = 0
elseif rl > 0 then
  r = redis.call('INCR', KEYS[1])
  if r == 1 then redis.call('PEXPIRE', KEYS[1], win) end
end
return {ok, r, t, redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2])}
`)

// tokensScript adds a request's tokens to its client's token window,
// starting the window when it is the first count in it.
var tokensScript = redis.NewScript(`
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return v
`)

func (s *Store) rpmKey(client string) string { return s.n.prefix + "rpm:" + client }
func (s *Store) tpmKey(client string) string { return s.n.prefix + "tpm:" + client }

// Rates counts client rates across replicas in Redis, and in local
// windows (a share of each limit) while Redis does not answer.
type Rates struct {
	store *Store // nil: local only
	local *LocalRates
}

// NewRates returns the rates of store, or purely local ones when store is
// nil (no GATEWAY_REDIS_URL).
func NewRates(store *Store) *Rates {
	return &Rates{store: store, local: NewLocalRates()}
}

// Admit counts one request of client if its windows have room.
func (r *Rates) Admit(ctx context.Context, client string, l Limits) RateState {
	if r.store == nil {
		return r.local.Admit(client, l, 1)
	}
	if r.store.Degraded() {
		return r.local.Admit(client, l, r.store.Replicas())
	}
	r.store.calls.rates.Add(1)
	octx, cancel := r.store.opContext(ctx)
	vals, err := admitScript.Run(octx, r.store.rdb, []string{r.store.rpmKey(client), r.store.tpmKey(client)},
		l.RequestsPerMinute, l.TokensPerMinute, RateWindow.Milliseconds()).Int64Slice()
	cancel()
	if err != nil || len(vals) != 5 {
		if se := scriptError("admit", err); se != nil {
			r.store.log.Warn("client rate not counted in redis", "client", client, "error", se)
		} else if ctx.Err() == nil && err != nil {
			r.store.enterDegraded(err)
		}
		// Never refuse because Redis is away: count against the share.
		return r.local.Admit(client, l, r.store.Replicas())
	}
	st := RateState{Allowed: vals[0] == 1}
	fill(&st, l, int(vals[1]), int(vals[2]), msLeft(vals[3]), msLeft(vals[4]))
	return st
}

// peekScript reads a client's two windows without counting: {requests,
// tokens, request window ms left, token window ms left}.
var peekScript = redis.NewScript(`
return {tonumber(redis.call('GET', KEYS[1]) or '0'), tonumber(redis.call('GET', KEYS[2]) or '0'),
  redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2])}
`)

// Peek is client's standing under l without counting anything: what
// GET /admin/keys/{id} shows. Allowed says whether a request would be
// admitted now. With Redis away it reads this replica's windows, its
// share of the limits.
func (r *Rates) Peek(ctx context.Context, client string, l Limits) RateState {
	if r.store == nil {
		return r.local.Peek(client, l, 1)
	}
	if r.store.Degraded() {
		return r.local.Peek(client, l, r.store.Replicas())
	}
	octx, cancel := r.store.opContext(ctx)
	vals, err := peekScript.Run(octx, r.store.rdb, []string{r.store.rpmKey(client), r.store.tpmKey(client)}).Int64Slice()
	cancel()
	if err != nil || len(vals) != 4 {
		return r.local.Peek(client, l, r.store.Replicas())
	}
	reqs, toks := int(vals[0]), int(vals[1])
	st := RateState{Allowed: !full(l, reqs, toks)}
	fill(&st, l, reqs, toks, msLeft(vals[2]), msLeft(vals[3]))
	return st
}

// full reports whether either window is at its limit.
func full(l Limits, reqs, toks int) bool {
	return (l.RequestsPerMinute > 0 && reqs >= l.RequestsPerMinute) || (l.TokensPerMinute > 0 && toks >= l.TokensPerMinute)
}

// MaxTokenCount is the most tokens one AddTokens counts. The gateway
// refuses usage above its own ceiling before it gets here (upstream.
// MaxUsageTokens, the same figure); this bound keeps any caller from
// overflowing a window: Redis's INCRBY fails past int64, and a local
// counter would wrap negative and hand the client more than its limit.
const MaxTokenCount = 1_000_000_000

// AddTokens counts a finished request's tokens. It waits for Redis (one
// round trip, after the response was sent) so that the client's next
// request already sees them. A count above MaxTokenCount counts as
// MaxTokenCount; one below 1 counts nothing. A *ScriptError is a count
// Redis refused on its input (not an outage: the replica stays out of
// degraded mode); the tokens are then counted locally only.
func (r *Rates) AddTokens(ctx context.Context, client string, l Limits, n int) error {
	if l.TokensPerMinute <= 0 || n <= 0 {
		return nil
	}
	n = min(n, MaxTokenCount)
	if r.store == nil || r.store.Degraded() {
		r.local.AddTokens(client, n)
		return nil
	}
	r.store.calls.rates.Add(1)
	octx, cancel := r.store.opContext(ctx)
	err := tokensScript.Run(octx, r.store.rdb, []string{r.store.tpmKey(client)}, n, RateWindow.Milliseconds()).Err()
	cancel()
	if err == nil {
		return nil
	}
	r.local.AddTokens(client, n)
	if se := scriptError("tokens", err); se != nil {
		return se
	}
	if ctx.Err() == nil {
		r.store.enterDegraded(err)
	}
	return nil
}

// ScriptError is a script call Redis answered with an error caused by its
// input (a count it cannot add, a key of the wrong type), as opposed to
// Redis not answering: it must not put the replica in degraded mode, where
// every shared limit would shrink to this replica's share.
type ScriptError struct {
	Script string // which script: "admit", "tokens"
	Err    error  // Redis's reply
}

func (e *ScriptError) Error() string {
	return "redis script " + e.Script + " refused its input: " + redactErr(e.Err)
}

func (e *ScriptError) Unwrap() error { return e.Err }

// scriptError returns a *ScriptError when err is Redis's error reply to a
// script's own command (a Lua runtime error names "@user_script"; a key of
// another type answers WRONGTYPE), and nil for everything else: timeouts,
// refused connections, and the replies of a Redis that cannot serve
// (LOADING, READONLY, BUSY, MASTERDOWN, OOM), which are outages. Redis
// errors are replies of text; this is the one place that reads it.
func scriptError(script string, err error) error {
	var re redis.Error
	if !errors.As(err, &re) || errors.Is(err, redis.Nil) {
		return nil
	}
	msg := re.Error()
	if strings.Contains(msg, "@user_script") || strings.HasPrefix(msg, "WRONGTYPE") {
		return &ScriptError{Script: script, Err: err}
	}
	return nil
}

// msLeft turns a PTTL answer into the window's time left: a missing key
// (-2) or one without expiry (-1) has a whole window ahead.
func msLeft(ms int64) time.Duration {
	if ms < 0 {
		return RateWindow
	}
	return time.Duration(ms) * time.Millisecond
}

// fill sets the header figures from the counts.
func fill(st *RateState, l Limits, reqs, toks int, resetReq, resetTok time.Duration) {
	st.Requests, st.Tokens = l.RequestsPerMinute, l.TokensPerMinute
	st.RemainingRequests = max(l.RequestsPerMinute-reqs, 0)
	st.RemainingTokens = max(l.TokensPerMinute-toks, 0)
	st.ResetRequests, st.ResetTokens = resetReq, resetTok
	if !st.Allowed {
		if l.RequestsPerMinute > 0 && reqs >= l.RequestsPerMinute {
			st.RetryAfter = resetReq
		}
		if l.TokensPerMinute > 0 && toks >= l.TokensPerMinute {
			st.RetryAfter = max(st.RetryAfter, resetTok)
		}
	}
}

// LocalRates counts client rates in this process only.
type LocalRates struct {
	mu      sync.Mutex
	now     func() time.Time
	clients map[string]*localWindow
}

type localWindow struct {
	reqStart, tokStart time.Time
	reqs, toks         int
}

// NewLocalRates returns empty local windows on the process clock.
func NewLocalRates() *LocalRates {
	return &LocalRates{now: time.Now, clients: map[string]*localWindow{}}
}

// Admit counts one request of client against limits divided by share (the
// replicas sharing them; 1 when alone), each at least 1.
func (lr *LocalRates) Admit(client string, l Limits, share int) RateState {
	l = l.share(share)
	lr.mu.Lock()
	defer lr.mu.Unlock()
	now := lr.now()
	w := lr.window(client, now)
	st := RateState{Allowed: !full(l, w.reqs, w.toks)}
	if st.Allowed && l.RequestsPerMinute > 0 {
		if w.reqs == 0 {
			w.reqStart = now
		}
		w.reqs++
	}
	fill(&st, l, w.reqs, w.toks, left(w.reqStart, w.reqs, now), left(w.tokStart, w.toks, now))
	return st
}

// Peek is Admit without counting.
func (lr *LocalRates) Peek(client string, l Limits, share int) RateState {
	l = l.share(share)
	lr.mu.Lock()
	defer lr.mu.Unlock()
	now := lr.now()
	w := lr.window(client, now)
	st := RateState{Allowed: !full(l, w.reqs, w.toks)}
	fill(&st, l, w.reqs, w.toks, left(w.reqStart, w.reqs, now), left(w.tokStart, w.toks, now))
	return st
}

// share is l divided among share replicas, each limit at least 1.
func (l Limits) share(share int) Limits {
	share = max(share, 1)
	if l.RequestsPerMinute > 0 {
		l.RequestsPerMinute = max(l.RequestsPerMinute/share, 1)
	}
	if l.TokensPerMinute > 0 {
		l.TokensPerMinute = max(l.TokensPerMinute/share, 1)
	}
	return l
}

// AddTokens counts n tokens of client.
func (lr *LocalRates) AddTokens(client string, n int) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	now := lr.now()
	w := lr.window(client, now)
	if w.toks == 0 {
		w.tokStart = now
	}
	// Saturate rather than wrap: a wrapped count would be negative and
	// leave the client more than its limit.
	w.toks += min(max(n, 0), math.MaxInt-w.toks)
}

// window returns client's windows with any that ended reset.
func (lr *LocalRates) window(client string, now time.Time) *localWindow {
	w := lr.clients[client]
	if w == nil {
		w = &localWindow{}
		lr.clients[client] = w
	}
	if w.reqs > 0 && now.Sub(w.reqStart) >= RateWindow {
		w.reqs = 0
	}
	if w.toks > 0 && now.Sub(w.tokStart) >= RateWindow {
		w.toks = 0
	}
	return w
}

func left(start time.Time, count int, now time.Time) time.Duration {
	if count == 0 {
		return RateWindow
	}
	return max(RateWindow-now.Sub(start), 0)
}
