package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// scrape reads /metrics and returns the value of every series as
// "name{l1=v1,...}" -> value (histograms: their _count).
func (g *gateway) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	code, body := g.get(t, "/metrics", false)
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			key := name + labelKey(m.Label)
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

func labelKey(ls []*dto.LabelPair) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// delta asserts after-before for each series.
func delta(t *testing.T, before, after map[string]float64, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		if got := after[k] - before[k]; got != w {
			t.Errorf("%s: delta %v, want %v", k, got, w)
		}
	}
}

// TestMetricsScenarios asserts exact counter deltas for each kind of outcome.
func TestMetricsScenarios(t *testing.T) {
	g := start(t, setup{routes: oneSlotRoutes})
	const (
		reqOK       = "gateway_requests_total{code=200,model=gpt-4o-mini,route=chat,status=success}"
		primOK      = "gateway_candidate_attempts_total{error_type=,model=gpt-4o-mini,provider=primary,status=success}"
		backOK      = "gateway_candidate_attempts_total{error_type=,model=gpt-4o-mini,provider=backup,status=success}"
		primUnused  = "gateway_candidate_attempts_total{error_type=,model=gpt-4o-mini,provider=primary,status=unused}"
		backUnused  = "gateway_candidate_attempts_total{error_type=,model=gpt-4o-mini,provider=backup,status=unused}"
		primHTTP    = "gateway_candidate_attempts_total{error_type=upstream_http_error,model=gpt-4o-mini,provider=primary,status=failed}"
		primFB      = "gateway_candidate_attempts_total{error_type=stream_first_byte_timeout,model=gpt-4o-mini,provider=primary,status=failed}"
		primAdm     = "gateway_candidate_attempts_total{error_type=gateway_admission_timeout,model=gpt-4o-mini,provider=primary,status=failed}"
		primCancel  = "gateway_candidate_attempts_total{error_type=client_cancelled,model=gpt-4o-mini,provider=primary,status=cancelled}"
		wdFB        = "gateway_watchdog_timeouts_total{kind=first_byte,provider=primary}"
		admTimeout  = "gateway_admission_timeouts_total{gate=gateway_upstream_target,reason=timeout}"
		reqCancel   = "gateway_requests_total{code=499,model=gpt-4o-mini,route=chat,status=cancelled}"
		firstBytePr = "gateway_upstream_first_byte_seconds{provider=primary}"
	)
	// Zero-valued alert series exist from the start.
	m0 := g.scrape(t)
	for _, k := range []string{wdFB, admTimeout, "gateway_report_dropped_total{}", "gateway_admission_timeouts_total{gate=gateway_upstream_execution,reason=queue_full}"} {
		if v, ok := m0[k]; !ok || v != 0 {
			t.Fatalf("%s not exported at zero from start (%v, %v)", k, v, ok)
		}
	}

	// Success.
	before := g.scrape(t)
	g.post(t, chatBody(false))
	delta(t, before, g.scrape(t), map[string]float64{reqOK: 1, primOK: 1, backUnused: 1, firstBytePr: 1})

	// Failover after a 500.
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Status: 500})
	before = g.scrape(t)
	g.post(t, chatBody(false))
	delta(t, before, g.scrape(t), map[string]float64{reqOK: 1, primHTTP: 1, backOK: 1})

	// Watchdog: the routes have no first_byte, so use a stalled stream with
	// the provider default of the gateway (set per test below).
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary"})

	// Admission timeout.
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Latency: 600 * time.Millisecond})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); g.post(t, chatBody(false)) }()
	eventually(t, 5*time.Second, "the primary busy with one request", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1, fmt.Sprintf("%+v", g.Primary.Stats())
	})
	before = g.scrape(t)
	if before["gateway_admission_active{gate=gateway_upstream_target,provider=primary}"] != 1 {
		t.Fatalf("target gauge does not show the busy slot: %v", before["gateway_admission_active{gate=gateway_upstream_target,provider=primary}"])
	}
	g.post(t, chatBody(false))
	delta(t, before, g.scrape(t), map[string]float64{primAdm: 1, backOK: 1, admTimeout: 1})
	wg.Wait()

	// Client cancel.
	before = g.scrape(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(false)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r, err := g.client.Do(req); err == nil {
			r.Body.Close()
		}
	}()
	eventually(t, 5*time.Second, "the primary busy with one request", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1, fmt.Sprintf("%+v", g.Primary.Stats())
	})
	cancel()
	<-done
	eventually(t, 5*time.Second, "the cancelled request counted", func() (bool, string) {
		n := g.scrape(t)[reqCancel] - before[reqCancel]
		return n == 1, fmt.Sprint(n, " counted")
	})
	delta(t, before, g.scrape(t), map[string]float64{primCancel: 1, backUnused: 1})

	// Requests refused before planning are counted without a model label.
	before = g.scrape(t)
	g.post(t, `{"model":"no-such-model","messages":[]}`)
	g.post(t, `{"model":`)
	delta(t, before, g.scrape(t), map[string]float64{
		"gateway_requests_total{code=404,model=,route=chat,status=rejected}": 1,
		"gateway_requests_total{code=400,model=,route=chat,status=rejected}": 1,
	})

	// Gate gauges return to zero at idle.
	g.assertIdle(t)
	after := g.scrape(t)
	for k, v := range after {
		if (strings.HasPrefix(k, "gateway_admission_active") || strings.HasPrefix(k, "gateway_admission_pending")) && v != 0 {
			t.Fatalf("%s = %v at idle", k, v)
		}
	}
	_ = primUnused

	// Watchdog counter, on a gateway whose primary has a first-byte deadline.
	g2 := start(t, setup{routes: watchRoutes, primary: mockupstream.Behavior{StallAfterHeaders: true}})
	before = g2.scrape(t)
	g2.post(t, chatBody(true))
	delta(t, before, g2.scrape(t), map[string]float64{wdFB: 1, primFB: 1, backOK: 1})
}

// TestMetricsLint: every family passes client_golang's linter.
func TestMetricsLint(t *testing.T) {
	g := start(t, setup{})
	g.post(t, chatBody(true))
	problems, err := testutil.GatherAndLint(g.Metrics.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

// TestNoSecretsInMetrics: keys and client tokens never reach /metrics,
// whatever path a request takes.
func TestNoSecretsInMetrics(t *testing.T) {
	g := start(t, setup{routes: clientRoutes, primary: mockupstream.Behavior{Status: 500}})
	g.post(t, chatBody(false), "Authorization", "Bearer app-1-SENTINEL-token")
	g.post(t, chatBody(true), "Authorization", "Bearer app-1-SENTINEL-token")
	g.post(t, chatBody(false), "Authorization", "Bearer wrong-SENTINEL-token")
	g.post(t, `{"model":"SENTINEL-model","messages":[]}`, "Authorization", "Bearer app-1-SENTINEL-token")
	_, body := g.get(t, "/metrics", false)
	if strings.Contains(string(body), "SENTINEL") || strings.Contains(string(body), "/v1") {
		t.Fatal("a secret, free text or URL path appears in /metrics")
	}
	if !strings.Contains(string(body), "gateway_candidate_attempts_total") {
		t.Fatal("scrape looks empty")
	}
}
