package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/routes"
)

func testPlanner(t testing.TB) *candidates.Planner {
	t.Helper()
	r, err := routes.Parse([]byte(`
providers:
  - { name: primary, base_url: "http://127.0.0.1:1/v1", api_keys: [k], max_concurrency: 2 }
models:
  - { name: m, candidates: [ { provider: primary } ] }
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	p, err := candidates.NewPlanner(r, candidates.PlannerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// observeRequest is the instrumentation of one successful request.
func observeRequest(m *Metrics, c *candidates.Candidate) {
	m.Planned(20 * time.Microsecond)
	m.AdmissionWait(c, time.Microsecond, nil)
	m.FirstByte(c, 30*time.Millisecond)
	m.GlobalHeld(30 * time.Millisecond)
	m.CandidateDone(c, "success", "", 500*time.Millisecond)
	m.Enqueued(100 * time.Nanosecond)
	m.RequestDone("m", "chat", "success", 200, 510*time.Millisecond)
}

// TestObservationsLandAndLint: each observation shows in its family, the
// admission gauges come from the scheduler itself, and the linter is clean.
func TestObservationsLandAndLint(t *testing.T) {
	p := testPlanner(t)
	sched := admission.New(admission.Config{GlobalLimit: 3})
	m := New(Sources{Planner: p, Admission: sched, HoldMode: "first_body"})
	plan, _ := p.Plan("m")
	observeRequest(m, &plan[0])
	m.AdmissionWait(&plan[0], time.Millisecond, &admission.TimeoutError{Gate: admission.TargetGate, Budget: time.Millisecond})
	m.AdmissionWait(&plan[0], 0, errors.New("other"))
	m.WatchdogFired(&plan[0], "first_byte")

	if got := testutil.ToFloat64(m.requests.WithLabelValues("m", "chat", "success", "200")); got != 1 {
		t.Fatalf("requests = %v", got)
	}
	if got := testutil.ToFloat64(m.admTimeouts.WithLabelValues(admission.TargetGate, "timeout")); got != 1 {
		t.Fatalf("admission timeouts = %v", got)
	}
	if got := testutil.ToFloat64(m.watchdog.WithLabelValues("primary", "first_byte")); got != 1 {
		t.Fatalf("watchdog = %v", got)
	}
	lease, err := sched.Acquire(t.Context(), admission.Request{Dimensions: []admission.Dimension{{Gate: admission.TargetGate, ID: "t", Label: "primary", Limit: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	err = testutil.GatherAndCompare(m.Registry, strings.NewReader(`
# HELP gateway_admission_active Slots in use, per gate (target gates summed per provider).
# TYPE gateway_admission_active gauge
gateway_admission_active{gate="gateway_upstream_execution",provider=""} 1
gateway_admission_active{gate="gateway_upstream_target",provider="primary"} 1
`), "gateway_admission_active")
	lease.Release()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint %s: %s", pr.Metric, pr.Text)
	}
}

// BenchmarkRequestInstrumentation: one request's observations must not
// allocate (label values resolved once or looked up without allocation).
func BenchmarkRequestInstrumentation(b *testing.B) {
	p := testPlanner(b)
	m := New(Sources{Planner: p, HoldMode: "first_body"})
	plan, _ := p.Plan("m")
	c := &plan[0]
	observeRequest(m, c)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		observeRequest(m, c)
	}
}

func TestRequestInstrumentationDoesNotAllocate(t *testing.T) {
	p := testPlanner(t)
	m := New(Sources{Planner: p, HoldMode: "first_body"})
	plan, _ := p.Plan("m")
	observeRequest(m, &plan[0])
	if n := testing.AllocsPerRun(200, func() { observeRequest(m, &plan[0]) }); n != 0 {
		t.Fatalf("instrumentation of one request allocates %v times", n)
	}
}

// TestNativeHistogramsAreOptIn: by default a scraped histogram has classic
// buckets only; GATEWAY_METRICS_NATIVE_HISTOGRAMS adds the sparse ones.
func TestNativeHistogramsAreOptIn(t *testing.T) {
	for _, native := range []bool{false, true} {
		p := testPlanner(t)
		m := New(Sources{Planner: p, HoldMode: "first_body", NativeHistograms: native})
		m.RequestDone("m", "chat", "success", 200, 510*time.Millisecond)
		mfs, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mf := range mfs {
			if mf.GetName() != "gateway_request_duration_seconds" {
				continue
			}
			h := mf.GetMetric()[0].GetHistogram()
			found = true
			if len(h.GetBucket()) != len(durationBuckets) {
				t.Errorf("native=%v: %d classic buckets, want %d", native, len(h.GetBucket()), len(durationBuckets))
			}
			if got := h.Schema != nil; got != native {
				t.Errorf("native=%v: histogram has a native schema: %v", native, got)
			}
		}
		if !found {
			t.Fatalf("native=%v: gateway_request_duration_seconds not gathered", native)
		}
	}
}
