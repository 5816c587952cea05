package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/llmgw/gateway/internal/cache"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/upstream"
)

// CacheStore keeps cached answers (internal/cache's Memory or Redis).
// A failing store is a miss: its errors are counted, never answered.
type CacheStore interface {
	Get(ctx context.Context, k cache.Key) (cache.Entry, bool, error)
	Set(ctx context.Context, k cache.Key, e cache.Entry) error
}

var _ CacheStore = (*cache.Memory)(nil)

// DefaultCacheMaxBytes bounds the in-process store when Options.CacheStore
// is nil (GATEWAY_CACHE_MAX_BYTES's default).
const DefaultCacheMaxBytes = 64 << 20

// storeTimeout is how long a store may take before its answer is a miss.
const storeTimeout = 20 * time.Millisecond

const (
	headerCache    = "X-Gateway-Cache"
	headerCacheTTL = "X-Gateway-Cache-Ttl"
)

// responseCache is the server's cache: its store and its flights. Created
// once, on the first request of a cached route, so a gateway without one
// holds nothing.
type responseCache struct {
	once    sync.Once
	store   CacheStore
	flights cache.Flights
	// inProcess: the store is a cache.Memory, which never blocks, so its
	// calls are not given storeTimeout (storeContext).
	inProcess bool
}

func (s *Server) cacheStore() CacheStore {
	s.cache.once.Do(func() {
		s.cache.store = s.opts.CacheStore
		if s.cache.store == nil {
			s.cache.store = cache.NewMemory(DefaultCacheMaxBytes, nil)
		}
		_, s.cache.inProcess = s.cache.store.(*cache.Memory)
	})
	return s.cache.store
}

// cacheState is a cached route's request on its normal path (a miss or a
// bypass): what is needed to store its answer.
type cacheState struct {
	key     cache.Key
	route   upstream.Route
	stream  bool // stored from the stream the client is sent, assembled
	store   bool
	ttl     time.Duration
	max     int64
	flight  *cache.Flight
	capture *captureWriter // &captured once wrapped; nil before
	// captured is capture's storage: one allocation for both.
	captured captureWriter
}

// cacheLookup runs on a cached route after the rate count and before the
// budget reservation: a hit counts toward requests_per_minute and nothing
// else. It serves a hit itself (served true). Otherwise it returns the
// state to store the answer with, nil when nothing will be stored. A
// stream request and a non-stream one share an entry: a stream answer is
// assembled into the non-stream form, which a stream request is served as
// a stream.
func (s *Server) cacheLookup(rj rejecter, cc *routes.CacheConfig, chat *upstream.ChatRequest, body []byte, req *candidates.Request) (*cacheState, bool) {
	w, r := rj.w, rj.r
	who, team, costInUsage := req.Client, req.Team, req.CostInUsage
	cacheControl := r.Header.Get("Cache-Control")
	noStore, noCache := hasDirective(cacheControl, "no-store"), hasDirective(cacheControl, "no-cache")
	if noStore || costInUsage || rj.route == upstream.RouteResponses {
		// costInUsage: that client's answers carry its own cost, which
		// must not reach another client nor be served at cost 0. The
		// Responses API is never cached: an answer may be stored by the
		// provider and continued by id (previous_response_id), which a
		// replayed copy could not be.
		w.Header().Set(headerCache, "bypass")
		return nil, false
	}
	scope := ""
	switch cc.Scope {
	case routes.CacheScopeClient:
		scope = "client:" + who
	case routes.CacheScopeTeam:
		scope = "team:" + team
		if team == "" {
			scope = "client:" + who // a client without a team is its own
		}
	}
	key, err := cache.NewKey(cache.Identity{Route: rj.route.String(), Scope: scope, Model: chat.Model}, body)
	if err != nil {
		w.Header().Set(headerCache, "bypass")
		return nil, false
	}
	ttl := time.Duration(cc.TTL)
	if v := r.Header.Get(headerCacheTTL); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 && d < ttl {
			ttl = d
		}
	}
	cs := &cacheState{key: key, route: rj.route, stream: chat.Stream, store: true, ttl: ttl, max: int64(cc.MaxEntryBytes)}
	if noCache {
		w.Header().Set(headerCache, "bypass")
		return cs, false
	}
	if e, ok := s.cacheGet(r.Context(), key); ok && s.serveHit(w, e, rj.route, chat) {
		s.recordHit(r.Context(), req, e)
		return nil, true
	}
	lead, e, ok := s.cache.flights.Join(r.Context(), key)
	if ok && s.serveHit(w, e, rj.route, chat) {
		s.recordHit(r.Context(), req, e)
		return nil, true
	}
	cs.flight = lead // nil: the leader had nothing; this one tries itself
	w.Header().Set(headerCache, "miss")
	return cs, false
}

// storeContext is ctx bounded by storeTimeout for a call of the store
// (after cacheStore); an in-process store's is ctx itself: it never
// blocks, and a context with a timer per call was a tenth of what a miss
// added.
func (s *Server) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.cache.inProcess {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, storeTimeout)
}

// cacheGet reads the store within storeTimeout (an in-process store
// without one: it never blocks); a failure is a miss.
func (s *Server) cacheGet(ctx context.Context, k cache.Key) (cache.Entry, bool) {
	store := s.cacheStore()
	sctx, cancel := s.storeContext(ctx)
	defer cancel()
	e, ok, err := store.Get(sctx, k)
	if err == nil && sctx.Err() != nil {
		err = sctx.Err() // answered, but too late
	}
	if err != nil {
		s.cacheStoreFailed(ctx, "get", err)
		return cache.Entry{}, false
	}
	return e, ok
}

// serveHit writes a stored answer: no gate, no provider. A stream request
// gets it as the stream of its route's format (cache.Replay), with the
// headers of a live stream (commitHeaders). false: the entry cannot be
// written as that stream, which is then a miss; nothing was written.
func (s *Server) serveHit(w http.ResponseWriter, e cache.Entry, route upstream.Route, chat *upstream.ChatRequest) bool {
	body := e.Body
	if chat.Stream {
		sse, err := cache.Replay(route, e.Body, chat.IncludeUsage)
		if err != nil {
			return false
		}
		body = sse
	}
	s.boundWrites(w)
	h := w.Header()
	h.Set(headerCache, "hit")
	age := max(time.Since(e.Stored), 0)
	h.Set("Age", strconv.FormatInt(int64(age/time.Second), 10))
	if chat.Stream {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	} else {
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	// Flushed here, not when the handler returns: the hit's record and
	// metrics come after it, and the client need not wait for them.
	_ = http.NewResponseController(w).Flush()
	return true
}

// wrap tees what the relay writes, up to the entry bound: a body as it
// is, a stream into the assembler of its stored form.
func (cs *cacheState) wrap(w http.ResponseWriter) http.ResponseWriter {
	if cs == nil || !cs.store {
		return w
	}
	cs.captured = captureWriter{ResponseWriter: w, max: cs.max}
	cs.capture = &cs.captured
	if cs.stream {
		cs.capture.asm = cache.NewAssembler(cs.route, cs.max)
	}
	return cs.capture
}

// finish stores a complete success and ends the flight, which sends its
// waiters their own way when there is nothing to serve them.
func (s *Server) cacheFinish(ctx context.Context, cs *cacheState, out *candidates.Outcome) {
	if cs == nil {
		return
	}
	var e cache.Entry
	body, ok := cs.capture.stored(out)
	if ok {
		now := time.Now()
		e = cache.Entry{Body: body, Stored: now, Expires: now.Add(cs.ttl), CostUSD: out.Cost, HasCost: out.HasCost}
		// The answer is complete: a client that leaves now must not cut
		// its storing short.
		s.cacheSet(context.WithoutCancel(ctx), cs.key, e)
	}
	if cs.flight != nil {
		cs.flight.Done(e, ok)
		cs.flight = nil
	}
}

// cacheSet stores e within storeTimeout (an in-process store without
// one: it never blocks); a failure is counted, never answered.
func (s *Server) cacheSet(ctx context.Context, k cache.Key, e cache.Entry) {
	store := s.cacheStore()
	sctx, cancel := s.storeContext(ctx)
	defer cancel()
	if err := store.Set(sctx, k, e); err != nil {
		s.cacheStoreFailed(ctx, "set", err)
	}
}

// abandon ends a led flight of a request that will not call a provider
// (its budget refused it), or whose handler panicked before its finish:
// the waiters try themselves. A no-op once the flight ended.
func (cs *cacheState) abandon() {
	if cs != nil && cs.flight != nil {
		cs.flight.Done(cache.Entry{}, false)
		cs.flight = nil
	}
}

// hasDirective reports whether a Cache-Control value holds directive d.
func hasDirective(v, d string) bool {
	for len(v) > 0 {
		var part string
		part, v, _ = cutComma(v)
		if equalFoldTrim(part, d) {
			return true
		}
	}
	return false
}

func cutComma(s string) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func equalFoldTrim(s, d string) bool {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	s = s[i:j]
	if len(s) != len(d) {
		return false
	}
	for k := 0; k < len(s); k++ {
		c := s[k]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != d[k] {
			return false
		}
	}
	return true
}

// captureWriter keeps a copy of the body written through it, until it
// passes max (over: not storable); a stream's goes to its assembler.
type captureWriter struct {
	http.ResponseWriter
	max  int64
	buf  []byte
	asm  *cache.Assembler // a stream's; nil for a body
	code int
	over bool
}

// stored is the answer to store for a request that ended with out: a
// complete success, and for a stream one whose usage is the provider's
// (not the gateway's estimate) and whose final event arrived. A chat
// client that did not ask for the usage chunk was not sent it: the
// usage the gateway read goes into the stored form.
func (c *captureWriter) stored(out *candidates.Outcome) ([]byte, bool) {
	if c == nil || c.code/100 != 2 || out.Status != report.RequestSuccess {
		return nil, false
	}
	if c.asm == nil {
		return c.buf, !c.over && len(c.buf) > 0
	}
	if out.UsageEstimated {
		return nil, false
	}
	var usage []byte
	if out.HasUsage {
		usage = cache.ChatUsage(out.Usage)
	}
	body, err := c.asm.Body(usage)
	return body, err == nil
}

func (c *captureWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	if c.asm != nil {
		_, _ = c.asm.Write(b)
	} else if !c.over {
		if int64(len(c.buf)+len(b)) > c.max {
			c.over, c.buf = true, nil
		} else {
			c.buf = append(c.buf, b...)
		}
	}
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
