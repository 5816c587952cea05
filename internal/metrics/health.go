package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/gateway/internal/health"
)

var targetHealthDesc = prometheus.NewDesc("gateway_target_health",
	"Health entries (one per key: provider + origin + key) of each provider and upstream model in each health state.",
	[]string{"provider", "model", "state"}, nil)

// healthCollector reads the targets' states at scrape time from the health
// tracker, which keeps them without a lock shared by requests.
type healthCollector struct{ t *health.Tracker }

func (c healthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- targetHealthDesc }

func (c healthCollector) Collect(ch chan<- prometheus.Metric) {
	for pm, states := range c.t.Counts() {
		for state, n := range states {
			ch <- prometheus.MustNewConstMetric(targetHealthDesc, prometheus.GaugeValue, float64(n), pm.Provider, pm.Model, state.String())
		}
	}
}

// HealthTransition counts one target's change of health state; it is the
// health tracker's notify hook (with the log line).
func (m *Metrics) HealthTransition(tr health.Transition) {
	m.healthMoves.WithLabelValues(tr.Provider, tr.To.String()).Inc()
}
