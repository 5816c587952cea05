package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/gateway/internal/api"
	"github.com/llmgw/gateway/internal/cache"
)

// openCache picks the response cache's store (docs/cache.md, "Storage"):
// Redis when GATEWAY_REDIS_URL is set, so the replicas share entries,
// through the shared limits' client (one pool; each call bounded by its
// context and tried once, which the cache's 20 ms needs); else in
// process, bounded by GATEWAY_CACHE_MAX_BYTES and exported as
// gateway_cache_memory_bytes. After startQuota and metrics.New.
func (g *Gateway) openCache() api.CacheStore {
	if g.Quota != nil {
		return cache.NewRedis(g.Quota.Client(), "", nil)
	}
	bound := int64(g.Config.CacheMaxBytes)
	if bound <= 0 { // a Config not from config.Load: never unbounded
		bound = api.DefaultCacheMaxBytes
	}
	m := cache.NewMemory(bound, nil)
	g.Metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_cache_memory_bytes",
		Help: "Bytes the in-process response cache holds, as GATEWAY_CACHE_MAX_BYTES bounds them (keys, bodies as stored, and a fixed overhead per entry).",
	}, func() float64 { return float64(m.Weight()) }))
	return m
}
