package server

import (
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/api"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/quota"
)

// openQuota connects the shared limits when GATEWAY_REDIS_URL is set; it
// does not wait for Redis (a replica started during an outage starts
// degraded). The rates are local without Redis.
func (g *Gateway) openQuota() (*quota.Rates, error) {
	if g.Config.RedisURL.Empty() {
		return quota.NewRates(nil), nil
	}
	st, err := quota.New(quota.Options{
		URL: g.Config.RedisURL.Reveal(), Replica: g.Config.ReplicaID,
		TTL: g.Config.RedisLeaseTTL, Wake: g.Config.RedisWake, Logger: g.Log,
	})
	if err != nil {
		return nil, err
	}
	g.Quota = st
	return quota.NewRates(st), nil
}

// sharedSlots is the scheduler's shared store: nil (an untyped nil
// interface) without Redis.
func (g *Gateway) sharedSlots() admission.SharedStore {
	if g.Quota == nil {
		return nil
	}
	return g.Quota
}

// startQuota connects the store's signals to the scheduler and health, and
// exports gateway_quota_degraded and the store's counters.
func (g *Gateway) startQuota() {
	if g.Quota == nil {
		return
	}
	st := g.Quota
	st.Start(quota.Hooks{
		Share: g.Scheduler.SetShare,
		Wake:  g.Scheduler.WakeShared,
		Cooled: func(entry string, until time.Time, _ string) {
			if key, err := url.PathUnescape(entry); err == nil {
				g.Health.CoolShared(key, until)
			}
		},
	})
	g.Metrics.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gateway_quota_degraded",
			Help: "1 while Redis does not answer and each replica enforces its share of every shared limit; 0 while shared limits hold.",
		}, func() float64 {
			if st.Degraded() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_quota_redis_takes_total",
			Help: "Redis calls on the grant path: one per shared grant.",
		}, func() float64 { return float64(st.Calls().Takes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_quota_redis_renewals_total",
			Help: "Redis renewal calls: one per replica per third of GATEWAY_REDIS_LEASE_TTL, whatever it holds.",
		}, func() float64 { return float64(st.Calls().Renewals) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_quota_releases_dropped_total",
			Help: "Slot releases not kept for Redis because too many were pending during an outage; those slots come back when their leases expire.",
		}, func() float64 { return float64(st.DroppedReleases()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gateway_quota_replicas",
			Help: "Replicas last seen alive through Redis, this one included; shares in degraded mode divide by it.",
		}, func() float64 { return float64(st.Replicas()) }),
	)
}

// quotaState is what /readyz reports: nil (local limits) without Redis.
func (g *Gateway) quotaState() api.QuotaState {
	if g.Quota == nil {
		return nil
	}
	return g.Quota
}

// shareCooldown tells the other replicas that this one cooled a target.
// Cooldowns learnt from them are not passed on again.
func (g *Gateway) shareCooldown(tr health.Transition) {
	if g.Quota != nil && tr.To == health.Cooling && tr.Reason != health.ReasonPeer {
		// The entry's key holds the upstream model, which the message's
		// space-separated fields must not split.
		g.Quota.PublishCooled(url.PathEscape(tr.Key()), tr.Until, tr.Reason)
	}
}
