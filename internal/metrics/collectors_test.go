package metrics

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/admission"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestAdmissionGauges protects the admission gauges, a contract with
// dashboards and alerts: the global gate as is, target gates summed per
// provider (queued attempts included, idle gates that kept their counters
// at zero), and the overall queue depth.
func TestAdmissionGauges(t *testing.T) {
	sched := admission.New(admission.Config{GlobalLimit: 4})
	dim := func(provider, id string, limit int) admission.Request {
		return admission.Request{Budget: time.Hour, Dimensions: []admission.Dimension{
			{Gate: admission.TargetGate, ID: id, Label: provider, Limit: limit},
		}}
	}
	var held []*admission.Lease
	for _, r := range []admission.Request{dim("a", "a1", 2), dim("a", "a2", 1), dim("b", "b1", 1), dim("c", "c1", 5)} {
		l, err := sched.Acquire(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	held[3].Release() // c1 goes idle and keeps its gate

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, r := range []admission.Request{dim("a", "a2", 1), dim("a", "a2", 1), dim("a", "a2", 1), dim("b", "b1", 1)} {
		wg.Go(func() {
			if _, err := sched.Acquire(ctx, r); !errors.Is(err, context.Canceled) {
				t.Errorf("queued Acquire ended with %v, want cancelled", err)
			}
		})
	}
	defer func() {
		cancel()
		wg.Wait()
		for _, l := range held {
			l.Release()
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); sched.Stats().Pending != 4; {
		if time.Now().After(deadline) {
			t.Fatalf("pending = %d, want 4", sched.Stats().Pending)
		}
		time.Sleep(100 * time.Microsecond)
	}

	m := New(Sources{Admission: sched, HoldMode: "first_body"})
	err := testutil.GatherAndCompare(m.Registry, strings.NewReader(`
# HELP gateway_admission_limit Slots of an admission gate (target gates summed per provider).
# TYPE gateway_admission_limit gauge
gateway_admission_limit{gate="gateway_upstream_execution",provider=""} 4
gateway_admission_limit{gate="gateway_upstream_target",provider="a"} 3
gateway_admission_limit{gate="gateway_upstream_target",provider="b"} 1
gateway_admission_limit{gate="gateway_upstream_target",provider="c"} 5
# HELP gateway_admission_active Slots in use, per gate (target gates summed per provider).
# TYPE gateway_admission_active gauge
gateway_admission_active{gate="gateway_upstream_execution",provider=""} 3
gateway_admission_active{gate="gateway_upstream_target",provider="a"} 2
gateway_admission_active{gate="gateway_upstream_target",provider="b"} 1
gateway_admission_active{gate="gateway_upstream_target",provider="c"} 0
# HELP gateway_admission_pending Attempts queued for a gate (target gates summed per provider).
# TYPE gateway_admission_pending gauge
gateway_admission_pending{gate="gateway_upstream_execution",provider=""} 4
gateway_admission_pending{gate="gateway_upstream_target",provider="a"} 3
gateway_admission_pending{gate="gateway_upstream_target",provider="b"} 1
gateway_admission_pending{gate="gateway_upstream_target",provider="c"} 0
# HELP gateway_admission_queue_depth Attempts queued for admission overall.
# TYPE gateway_admission_queue_depth gauge
gateway_admission_queue_depth 4
`), "gateway_admission_limit", "gateway_admission_active", "gateway_admission_pending", "gateway_admission_queue_depth")
	if err != nil {
		t.Fatal(err)
	}
}
