package metrics

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
)

// Stages observed in gateway_stage_duration_seconds, indexes into
// Metrics.stage; stageNames holds their label values.
const (
	stagePlan = iota
	stageExecutionGateWait
	stageExecutionGateHeld
	stageTargetGateWait
	stageCandidateExecute
	stageFirstByte
	stageReportEnqueue
	numStages
)

var stageNames = [numStages]string{
	stagePlan:              "plan",
	stageExecutionGateWait: "upstream_execution_gate_wait",
	stageExecutionGateHeld: "upstream_execution_gate_held",
	stageTargetGateWait:    "upstream_target_gate_wait",
	stageCandidateExecute:  "candidate_execute",
	stageFirstByte:         "first_byte",
	stageReportEnqueue:     "report_enqueue",
}

// durationBuckets span 1 ms to 10 minutes: LLM calls range from cached
// answers to long generations.
var durationBuckets = []float64{
	.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

func histogram(native bool, name, help string, labels ...string) *prometheus.HistogramVec {
	opts := prometheus.HistogramOpts{Name: name, Help: help, Buckets: durationBuckets}
	if native {
		// Native histograms for Prometheus 2.40+, on top of the classic
		// buckets. Opt-in: each observation then also finds its sparse
		// bucket in a sync.Map, which cost about 1% of a stream's CPU in
		// perf (cache misses the micro-benchmark does not show).
		opts.NativeHistogramBucketFactor = 1.1
		opts.NativeHistogramMaxBucketNumber = 160
		opts.NativeHistogramMinResetDuration = time.Hour
	}
	return prometheus.NewHistogramVec(opts, labels)
}

// Metrics holds every collector of one gateway.
type Metrics struct {
	Registry *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	attempts        *prometheus.CounterVec
	firstByte       *prometheus.HistogramVec
	stages          *prometheus.HistogramVec
	admissionWait   *prometheus.HistogramVec
	admTimeouts     *prometheus.CounterVec
	watchdog        *prometheus.CounterVec
	panics          prometheus.Counter
	spansDropped    prometheus.Counter
	healthMoves     *prometheus.CounterVec
	retryBudget     *prometheus.CounterVec
	hedges          *prometheus.CounterVec
	reloads         *prometheus.CounterVec
	cost            costFamilies
	cache           cacheFamilies

	stage [numStages]prometheus.Observer // cached per stage
	// prov holds each provider's children, resolved in New and again by
	// SetProviders after a routes reload, keyed by the planner's *Provider,
	// so an observation costs one atomic load and one pointer-keyed map
	// lookup instead of hashing label values. A provider no planner of the
	// last two generations listed gets no per-provider observations.
	prov atomic.Pointer[map[*candidates.Provider]*providerObs]
	gen  uint64 // SetProviders calls so far
}

type providerObs struct {
	firstByte     prometheus.Observer
	admissionWait prometheus.Observer
	gen           uint64 // the SetProviders call that resolved it
}

// Sources are the components read at scrape time; Reports may be nil.
type Sources struct {
	Planner   *candidates.Planner
	Admission *admission.Scheduler
	Reports   ReportStats
	Health    *health.Tracker // nil: no health gauges
	HoldMode  string
	// NativeHistograms adds native-histogram buckets to every histogram
	// (GATEWAY_METRICS_NATIVE_HISTOGRAMS).
	NativeHistograms bool
}

// ReportStats is the report writer as metrics read it.
type ReportStats interface{ Stats() report.Stats }

// New registers every family. Families operators alert on at zero are
// initialised for every label value the configuration allows.
func New(src Sources) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_requests_total",
			Help: "API requests finished, by model route, client route (chat, messages, embeddings, responses), final status (success, failed, cancelled, or rejected before planning with an empty model) and HTTP status code.",
		}, []string{"model", "route", "status", "code"}),
		requestDuration: histogram(src.NativeHistograms, "gateway_request_duration_seconds",
			"Time from receiving an API request to its end, by model route, client route and final status.", "model", "route", "status"),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_candidate_attempts_total",
			Help: "Candidates settled, by provider, model route, candidate status and error type (empty on success).",
		}, []string{"provider", "model", "status", "error_type"}),
		firstByte: histogram(src.NativeHistograms, "gateway_upstream_first_byte_seconds",
			"Time from admission to the first forwarded event (streams) or to response headers (non-streaming), by provider.", "provider"),
		stages: histogram(src.NativeHistograms, "gateway_stage_duration_seconds",
			"Time spent in each stage of the request path.", "stage"),
		admissionWait: histogram(src.NativeHistograms, "gateway_admission_wait_seconds",
			"Time an attempt waited for its admission slots (granted or not), by provider.", "provider"),
		admTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_admission_timeouts_total",
			Help: "Attempts that failed admission, by the gate that had no room and reason (timeout, queue_full).",
		}, []string{"gate", "reason"}),
		watchdog: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_watchdog_timeouts_total",
			Help: "Watchdog firings, by provider and kind (first_byte, idle, total).",
		}, []string{"provider", "kind"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_panics_total", Help: "Panics recovered while serving requests.",
		}),
		spansDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_trace_spans_dropped_total",
			Help: "Trace spans let go instead of exported: the export queue was full, or an export failed or timed out (docs/tracing.md).",
		}),
		healthMoves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_health_transitions_total",
			Help: "Target health state changes, by provider and the state moved to (healthy, cooling, probing).",
		}, []string{"provider", "to"}),
		retryBudget: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_retry_budget_exhausted_total",
			Help: "Attempts beyond a request's first that the retry budget refused, by the provider of the refused candidate.",
		}, []string{"provider"}),
		hedges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_hedges_total",
			Help: "Hedge attempts (started because the running attempt was slow to commit), by provider and result: won (committed first), lost (another attempt settled the request), failed.",
		}, []string{"provider", "result"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_config_reloads_total",
			Help: "Routes file reloads (SIGHUP or a change of the file), by result: success, error (the old routes keep serving).",
		}, []string{"result"}),
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.requestDuration, m.attempts, m.firstByte, m.stages, m.admissionWait,
		m.admTimeouts, m.watchdog, m.panics, m.spansDropped, m.healthMoves, m.retryBudget, m.hedges, m.reloads,
	)
	m.cost = newCostFamilies()
	m.Registry.MustRegister(m.cost.collectors()...)
	m.cache = newCacheFamilies()
	m.Registry.MustRegister(m.cache.collectors()...)
	for _, r := range []string{ReloadSuccess, ReloadError} {
		m.reloads.WithLabelValues(r)
	}
	for i, s := range stageNames {
		m.stage[i] = m.stages.WithLabelValues(s)
	}
	for _, gate := range []string{admission.GlobalGate, admission.TargetGate} {
		for _, reason := range []string{"timeout", "queue_full"} {
			m.admTimeouts.WithLabelValues(gate, reason)
		}
	}
	m.prov.Store(&map[*candidates.Provider]*providerObs{})
	if src.Planner != nil {
		m.SetProviders(src.Planner.Providers())
	}
	if src.Admission != nil {
		m.Registry.MustRegister(&admissionCollector{s: src.Admission})
	}
	if src.Health != nil {
		m.Registry.MustRegister(healthCollector{t: src.Health})
	}
	if src.Reports != nil {
		m.Registry.MustRegister(&reportCollector{r: src.Reports})
	} else {
		m.Registry.MustRegister(&reportCollector{})
	}
	hold := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gateway_hold_mode_info", Help: "The configured stream hold mode of the execution gate (value 1).",
		ConstLabels: prometheus.Labels{"mode": src.HoldMode},
	})
	hold.Set(1)
	m.Registry.MustRegister(hold)
	return m
}

// Results of gateway_config_reloads_total.
const (
	ReloadSuccess = "success"
	ReloadError   = "error"
)

// SetProviders resolves the per-provider children of a planner's
// providers and initialises their families at zero; a routes reload calls
// it with the new planner's. The previous planner's providers stay
// resolved for one more generation, so requests planned before the reload
// still observe under their provider. Calls must not overlap.
func (m *Metrics) SetProviders(providers []*candidates.Provider) {
	m.gen++
	next := make(map[*candidates.Provider]*providerObs, 2*len(providers))
	for _, p := range providers {
		next[p] = &providerObs{
			firstByte:     m.firstByte.WithLabelValues(p.Name),
			admissionWait: m.admissionWait.WithLabelValues(p.Name),
			gen:           m.gen,
		}
		for _, kind := range []string{"first_byte", "idle", "total"} {
			m.watchdog.WithLabelValues(p.Name, kind)
		}
		for _, s := range health.States {
			m.healthMoves.WithLabelValues(p.Name, s.String())
		}
		m.retryBudget.WithLabelValues(p.Name)
		for _, r := range []string{candidates.HedgeWon, candidates.HedgeLost, candidates.HedgeFailed} {
			m.hedges.WithLabelValues(p.Name, r)
		}
	}
	if prev := m.prov.Load(); prev != nil {
		for p, po := range *prev {
			if po.gen == m.gen-1 {
				next[p] = po
			}
		}
	}
	m.prov.Store(&next)
}

// ConfigReload counts a routes reload by result (ReloadSuccess, ReloadError).
func (m *Metrics) ConfigReload(result string) { m.reloads.WithLabelValues(result).Inc() }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry, EnableOpenMetrics: true})
}

// Panic counts a recovered panic.
func (m *Metrics) Panic() { m.panics.Inc() }

// TraceSpansDropped counts n spans the trace export queue let go.
func (m *Metrics) TraceSpansDropped(n int) { m.spansDropped.Add(float64(n)) }
