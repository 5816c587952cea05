package metrics

import "github.com/prometheus/client_golang/prometheus"

// The response cache's families (docs/cache.md). Labels are bounded by
// the gateway and the routes file: client routes (chat, messages,
// embeddings), the three results, team names ("" for none), two ops.

// cacheFamilies count what the response cache did.
type cacheFamilies struct {
	requests    *prometheus.CounterVec
	saved       *prometheus.CounterVec
	storeErrors *prometheus.CounterVec
}

// Store operations of gateway_cache_store_errors_total.
const (
	CacheOpGet = "get"
	CacheOpSet = "set"
)

func newCacheFamilies() cacheFamilies {
	f := cacheFamilies{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_cache_requests_total",
			Help: "Requests on routes with a response cache, by client route (chat, messages, embeddings) and result: hit (served from the cache), miss, bypass (not looked up).",
		}, []string{"route", "result"}),
		saved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_cache_saved_usd_total",
			Help: "What the answers served from the response cache cost when they were stored, in USD, by the client's team (\"\" for none): the spend the hits saved.",
		}, []string{"team"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_cache_store_errors_total",
			Help: "Response cache store calls that failed or took over 20 ms, by op (get: the request was a miss; set: the answer was not stored). Never an error to the client.",
		}, []string{"op"}),
	}
	// Alerted on at zero: exported from the start.
	f.storeErrors.WithLabelValues(CacheOpGet)
	f.storeErrors.WithLabelValues(CacheOpSet)
	return f
}

func (f cacheFamilies) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.requests, f.saved, f.storeErrors}
}

// CacheResult implements api.Observer: one request of a cached route.
func (m *Metrics) CacheResult(route, result string) {
	m.cache.requests.WithLabelValues(route, result).Inc()
}

// CacheSaved implements api.Observer: a hit's saving, by team.
func (m *Metrics) CacheSaved(team string, usd float64) {
	if usd > 0 {
		m.cache.saved.WithLabelValues(team).Add(usd)
	}
}

// CacheStoreError implements api.Observer: a store call taken as a miss.
func (m *Metrics) CacheStoreError(op string) { m.cache.storeErrors.WithLabelValues(op).Inc() }
