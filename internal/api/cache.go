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
}

func (s *Server) cacheStore() CacheStore {
	s.cache.once.Do(func() {
		s.cache.store = s.opts.CacheStore
		if s.cache.store == nil {
			s.cache.store = cache.NewMemory(DefaultCacheMaxBytes, nil)
		}
	})
	return s.cache.store
}

// cacheState is a cached route's request on its normal path (a miss or a
// bypass): what is needed to store its answer.
type cacheState struct {
	key     cache.Key
	store   bool
	ttl     time.Duration
	max     int64
	flight  *cache.Flight
	capture *captureWriter
}

// cacheLookup runs on a cached route after the rate count and before the
// budget reservation: a hit counts toward requests_per_minute and nothing
// else. It serves a hit itself (served true). Otherwise it returns the
// state to store the answer with, nil when nothing will be stored.
//
// Stream requests are bypassed for now: a stream answer is not yet
// assembled into the stored form, nor a stored answer served as a stream.
func (s *Server) cacheLookup(rj rejecter, cc *routes.CacheConfig, chat *upstream.ChatRequest, body []byte, req *candidates.Request) (*cacheState, bool) {
	w, r := rj.w, rj.r
	who, team, costInUsage := req.Client, req.Team, req.CostInUsage
	cacheControl := r.Header.Get("Cache-Control")
	noStore, noCache := hasDirective(cacheControl, "no-store"), hasDirective(cacheControl, "no-cache")
	if chat.Stream || noStore || costInUsage {
		// costInUsage: that client's answers carry its own cost, which
		// must not reach another client nor be served at cost 0.
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
	cs := &cacheState{key: key, store: true, ttl: ttl, max: int64(cc.MaxEntryBytes)}
	if noCache {
		w.Header().Set(headerCache, "bypass")
		return cs, false
	}
	if e, ok := s.cacheGet(r.Context(), key); ok {
		s.serveHit(w, e)
		s.recordHit(r.Context(), req, e)
		return nil, true
	}
	lead, e, ok := s.cache.flights.Join(r.Context(), key)
	if ok {
		s.serveHit(w, e)
		s.recordHit(r.Context(), req, e)
		return nil, true
	}
	cs.flight = lead // nil: the leader had nothing; this one tries itself
	w.Header().Set(headerCache, "miss")
	return cs, false
}

// cacheGet reads the store within storeTimeout; a failure is a miss.
func (s *Server) cacheGet(ctx context.Context, k cache.Key) (cache.Entry, bool) {
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	e, ok, err := s.cacheStore().Get(sctx, k)
	if err == nil && sctx.Err() != nil {
		err = sctx.Err() // answered, but too late
	}
	if err != nil {
		s.cacheStoreFailed(ctx, "get", err)
		return cache.Entry{}, false
	}
	return e, ok
}

// serveHit writes a stored answer: no gate, no provider.
func (s *Server) serveHit(w http.ResponseWriter, e cache.Entry) {
	s.boundWrites(w)
	h := w.Header()
	h.Set(headerCache, "hit")
	age := max(time.Since(e.Stored), 0)
	h.Set("Age", strconv.FormatInt(int64(age/time.Second), 10))
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(e.Body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(e.Body)
}

// wrap tees what the relay writes, up to the entry bound.
func (cs *cacheState) wrap(w http.ResponseWriter) http.ResponseWriter {
	if cs == nil || !cs.store {
		return w
	}
	cs.capture = &captureWriter{ResponseWriter: w, max: cs.max}
	return cs.capture
}

// finish stores a complete success and ends the flight, which sends its
// waiters their own way when there is nothing to serve them.
func (s *Server) cacheFinish(ctx context.Context, cs *cacheState, out *candidates.Outcome) {
	if cs == nil {
		return
	}
	var e cache.Entry
	ok := cs.capture != nil && !cs.capture.over && cs.capture.code/100 == 2 &&
		out.Status == report.RequestSuccess && len(cs.capture.buf) > 0
	if ok {
		now := time.Now()
		e = cache.Entry{Body: cs.capture.buf, Stored: now, Expires: now.Add(cs.ttl), CostUSD: out.Cost, HasCost: out.HasCost}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		if err := s.cacheStore().Set(sctx, cs.key, e); err != nil {
			s.cacheStoreFailed(context.WithoutCancel(ctx), "set", err)
		}
		cancel()
	}
	if cs.flight != nil {
		cs.flight.Done(e, ok)
		cs.flight = nil
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
// passes max (over: not storable).
type captureWriter struct {
	http.ResponseWriter
	max  int64
	buf  []byte
	code int
	over bool
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
	if !c.over {
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
