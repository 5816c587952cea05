package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/gateway/internal/admission"
)

var (
	admLimitDesc = prometheus.NewDesc("gateway_admission_limit",
		"Slots of an admission gate (target gates summed per provider).", []string{"gate", "provider"}, nil)
	admActiveDesc = prometheus.NewDesc("gateway_admission_active",
		"Slots in use, per gate (target gates summed per provider).", []string{"gate", "provider"}, nil)
	admPendingDesc = prometheus.NewDesc("gateway_admission_pending",
		"Attempts queued for a gate (target gates summed per provider).", []string{"gate", "provider"}, nil)
	admQueuedDesc = prometheus.NewDesc("gateway_admission_queue_depth",
		"Attempts queued for admission overall.", nil, nil)
)

// admissionCollector reads the scheduler's occupancy at scrape time, so the
// gauges are the scheduler's own numbers and never drift from them. It reads
// Usage rather than Stats: a scrape holds the scheduler's lock, which every
// Acquire and Release waits for, and Stats walks the whole queue under it.
type admissionCollector struct {
	s *admission.Scheduler

	mu  sync.Mutex            // serialises concurrent scrapes over buf
	buf []admission.GateUsage // reused, so a scrape allocates nothing under the scheduler's lock
}

func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- admLimitDesc
	ch <- admActiveDesc
	ch <- admPendingDesc
	ch <- admQueuedDesc
}

func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.s.Usage(c.buf)
	c.buf = u.Targets
	emit := func(gate, provider string, limit, active, pending int) {
		ch <- prometheus.MustNewConstMetric(admLimitDesc, prometheus.GaugeValue, float64(limit), gate, provider)
		ch <- prometheus.MustNewConstMetric(admActiveDesc, prometheus.GaugeValue, float64(active), gate, provider)
		ch <- prometheus.MustNewConstMetric(admPendingDesc, prometheus.GaugeValue, float64(pending), gate, provider)
	}
	g := u.Global
	emit(admission.GlobalGate, "", g.Limit, g.Active, g.Pending)
	type sum struct{ limit, active, pending int }
	per := map[[2]string]*sum{}
	for _, t := range u.Targets {
		k := [2]string{t.Gate, t.Label}
		s := per[k]
		if s == nil {
			s = &sum{}
			per[k] = s
		}
		s.limit += t.Limit
		s.active += t.Active
		s.pending += t.Pending
	}
	// The registry sorts each family by label values, so map order does not
	// reach the exposition.
	for k, s := range per {
		emit(k[0], k[1], s.limit, s.active, s.pending)
	}
	ch <- prometheus.MustNewConstMetric(admQueuedDesc, prometheus.GaugeValue, float64(u.Pending))
}

var (
	repDepthDesc = prometheus.NewDesc("gateway_report_queue_depth",
		"Records waiting in the in-memory queue of the report writer.", nil, nil)
	repWrittenDesc = prometheus.NewDesc("gateway_report_written_total",
		"Records written to Postgres.", nil, nil)
	repSpooledDesc = prometheus.NewDesc("gateway_report_spooled_total",
		"Records appended to the disk spool while Postgres was unreachable or the queue was full.", nil, nil)
	repReplayedDesc = prometheus.NewDesc("gateway_report_replayed_total",
		"Spooled records replayed into Postgres.", nil, nil)
	repDroppedDesc = prometheus.NewDesc("gateway_report_dropped_total",
		"Records lost because both the queue and the spool failed.", nil, nil)
)

// reportCollector reads the writer's counters at scrape time. With records
// off it still exports zeros, so alerts on drops have a series to watch.
type reportCollector struct{ r ReportStats }

func (c *reportCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- repDepthDesc
	ch <- repWrittenDesc
	ch <- repSpooledDesc
	ch <- repReplayedDesc
	ch <- repDroppedDesc
}

func (c *reportCollector) Collect(ch chan<- prometheus.Metric) {
	var depth int
	var written, spooled, replayed, dropped uint64
	if c.r != nil {
		s := c.r.Stats()
		depth, written, spooled, replayed, dropped = s.QueueDepth, s.Written, s.Spooled, s.Replayed, s.Dropped
	}
	ch <- prometheus.MustNewConstMetric(repDepthDesc, prometheus.GaugeValue, float64(depth))
	ch <- prometheus.MustNewConstMetric(repWrittenDesc, prometheus.CounterValue, float64(written))
	ch <- prometheus.MustNewConstMetric(repSpooledDesc, prometheus.CounterValue, float64(spooled))
	ch <- prometheus.MustNewConstMetric(repReplayedDesc, prometheus.CounterValue, float64(replayed))
	ch <- prometheus.MustNewConstMetric(repDroppedDesc, prometheus.CounterValue, float64(dropped))
}
