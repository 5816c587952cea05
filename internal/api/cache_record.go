package api

import (
	"context"
	"net/http"

	"github.com/llmgw/gateway/internal/cache"
	"github.com/llmgw/gateway/internal/candidates"
)

// What the response cache puts on record (docs/cache.md, "Records and
// metrics"): every request of a cached route carries its result on its
// row and in gateway_cache_requests_total; a hit, which never reaches the
// attempt loop, writes its one row here.

// cacheCounted counts the lookup's result and stamps it on req for the
// normal path's rows. The result is read from the x-gateway-cache header
// the lookup set, so the row and the metric say what the client was told.
func (s *Server) cacheCounted(w http.ResponseWriter, req *candidates.Request) {
	result := w.Header().Get(headerCache)
	if result == "" {
		return
	}
	req.Cache = result
	s.opts.Observe.CacheResult(req.Route.String(), result)
}

// recordHit puts a request served from e on record once its answer was
// written: its row (cost 0, e's cost as its saving), the team's savings and
// the access log line. It takes no gate and touches no budget or token
// count: the hit counted only toward requests_per_minute, before the lookup.
func (s *Server) recordHit(ctx context.Context, req *candidates.Request, e cache.Entry) {
	out := s.opts.Runner.RecordHit(ctx, req, e.CostUSD, e.HasCost)
	if e.HasCost && e.CostUSD > 0 {
		s.opts.Observe.CacheSaved(req.Team, e.CostUSD)
	}
	s.access.request(req, out)
}

// cacheStoreFailed counts a store call that failed or outlived
// storeTimeout: the request goes on as a miss (get) or unstored (set). A
// call cut short because the client left is not the store's failure.
func (s *Server) cacheStoreFailed(ctx context.Context, op string, err error) {
	if ctx.Err() != nil {
		return
	}
	s.opts.Observe.CacheStoreError(op)
	s.opts.Logger.Debug("response cache store failed; taken as a miss", "op", op, "err", err)
}
