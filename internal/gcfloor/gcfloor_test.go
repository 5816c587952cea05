package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		base, want  int
	}{
		{0, 32 * mib, 100, 100},           // nothing collected yet
		{4 * mib, 32 * mib, 100, 700},     // goal 32 MiB, not 8
		{16 * mib, 32 * mib, 100, 100},    // GOGC already reaches the floor
		{80 * mib, 32 * mib, 100, 100},    // large heaps keep GOGC
		{8 * mib, 32 * mib, 200, 300},     // a GOGC of 200 is the base
		{1024, 32 * mib, 100, maxPercent}, // bounded
	} {
		if got := percentFor(tc.live, tc.floor, tc.base); got != tc.want {
			t.Errorf("percentFor(%d, %d, %d) = %d, want %d", tc.live, tc.floor, tc.base, got, tc.want)
		}
	}
}

// TestFloorFollowsCollections: on a small heap the percentage rises after a
// collection, the heap goal the runtime reports reaches the floor, and Stop
// puts GOGC back.
func TestFloorFollowsCollections(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	const floor = 64 << 20
	f := Start(floor)
	if f == nil {
		t.Fatal("Start returned nil with GOGC on")
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.Percent() == 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the finalizer runs after the cycle
	}
	if p := f.Percent(); p <= 100 {
		t.Fatalf("percentage %d after collections of a small heap, want above 100", p)
	}
	var ms runtime.MemStats
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	runtime.ReadMemStats(&ms)
	s := []metrics.Sample{{Name: liveMetric}}
	metrics.Read(s)
	// The floor, unless the live heap is so small that maxPercent binds.
	want := min(uint64(floor), s[0].Value.Uint64()*(100+maxPercent)/100)
	if ms.NextGC < want*9/10 {
		t.Errorf("next GC at %d bytes, want about %d (floor %d, live %d)", ms.NextGC, want, floor, s[0].Value.Uint64())
	}
	f.Stop()
	f.Stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Stop the percentage is %d, want the process's 100", got)
	}
	// A stopped floor stops re-arming: more collections change nothing.
	debug.SetGCPercent(100)
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("a stopped floor changed the percentage to %d", got)
	}
}

func TestOffWhenAskedOrGCOff(t *testing.T) {
	if f := Start(0); f != nil {
		t.Error("Start(0) returned a floor")
	}
	base := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(base)
	if f := Start(32 << 20); f != nil {
		t.Error("Start with GOGC=off returned a floor")
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GOGC=off became %d", got)
	}
	var f *Floor
	f.Stop() // nil-safe
}
