package metrics

import (
	"errors"
	"strconv"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
)

var _ candidates.Observer = (*Metrics)(nil)

// AdmissionWait implements candidates.Observer. Admission is atomic over the
// global and target gates, so one wait covers both gate stages.
func (m *Metrics) AdmissionWait(c *candidates.Candidate, waited time.Duration, err error) {
	s := waited.Seconds()
	if po := (*m.prov.Load())[c.Target.Provider]; po != nil {
		po.admissionWait.Observe(s)
	}
	m.stage[stageExecutionGateWait].Observe(s)
	m.stage[stageTargetGateWait].Observe(s)
	if err == nil {
		return
	}
	var te *admission.TimeoutError
	switch {
	case errors.As(err, &te):
		m.admTimeouts.WithLabelValues(te.Gate, "timeout").Inc()
	case errors.Is(err, admission.ErrQueueFull):
		m.admTimeouts.WithLabelValues(admission.GlobalGate, "queue_full").Inc()
	}
}

// CandidateDone implements candidates.Observer.
func (m *Metrics) CandidateDone(c *candidates.Candidate, status, errorType string, d time.Duration) {
	m.attempts.WithLabelValues(c.Target.Provider.Name, c.Route, status, errorType).Inc()
	if d > 0 {
		m.stage[stageCandidateExecute].Observe(d.Seconds())
	}
}

// FirstByte implements candidates.Observer.
func (m *Metrics) FirstByte(c *candidates.Candidate, d time.Duration) {
	s := d.Seconds()
	if po := (*m.prov.Load())[c.Target.Provider]; po != nil {
		po.firstByte.Observe(s)
	}
	m.stage[stageFirstByte].Observe(s)
}

// GlobalHeld implements candidates.Observer.
func (m *Metrics) GlobalHeld(d time.Duration) { m.stage[stageExecutionGateHeld].Observe(d.Seconds()) }

// WatchdogFired implements candidates.Observer.
func (m *Metrics) WatchdogFired(c *candidates.Candidate, kind string) {
	m.watchdog.WithLabelValues(c.Target.Provider.Name, kind).Inc()
}

// codes caches the strings of the status codes the gateway answers with.
var codes = func() map[int]string {
	out := map[int]string{}
	for c := 100; c < 600; c++ {
		out[c] = strconv.Itoa(c)
	}
	return out
}()

// RequestDone implements candidates.Observer.
func (m *Metrics) RequestDone(model, route, status string, code int, d time.Duration) {
	cs, ok := codes[code]
	if !ok {
		cs = "other"
	}
	m.requests.WithLabelValues(model, route, status, cs).Inc()
	m.requestDuration.WithLabelValues(model, route, status).Observe(d.Seconds())
}

// Rejected counts an API request refused before planning (bad input, bad
// key, unknown model, draining) on the client route (chat, messages,
// embeddings, responses). Its model label is empty: an unknown model name is
// client text, never a label value.
func (m *Metrics) Rejected(route string, code int) {
	cs, ok := codes[code]
	if !ok {
		cs = "other"
	}
	m.requests.WithLabelValues("", route, "rejected", cs).Inc()
}

// Planned implements candidates.Observer.
func (m *Metrics) Planned(d time.Duration) { m.stage[stagePlan].Observe(d.Seconds()) }

// Enqueued implements candidates.Observer.
func (m *Metrics) Enqueued(d time.Duration) { m.stage[stageReportEnqueue].Observe(d.Seconds()) }

// RetryBudgetExhausted counts an attempt the retry budget refused.
func (m *Metrics) RetryBudgetExhausted(c *candidates.Candidate) {
	m.retryBudget.WithLabelValues(c.Target.Provider.Name).Inc()
}

// HedgeDone counts a hedge attempt's result (won, lost, failed).
func (m *Metrics) HedgeDone(c *candidates.Candidate, result string) {
	m.hedges.WithLabelValues(c.Target.Provider.Name, result).Inc()
}
