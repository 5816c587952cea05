// Package gcfloor keeps the garbage collector from running on a small heap.
//
// With GOGC=100 the runtime collects when the heap has doubled since the last
// collection. The gateway's live heap under steady load is a few MiB, so it
// collected about three times a second at 500 streams/s; each cycle took a
// processor for a few milliseconds of marking, which on a 2-CPU machine was
// what the slowest first chunks waited behind, and about 4% of the CPU a
// stream cost. A floor on the heap goal spaces the cycles out where the heap
// is small and changes nothing where it is large: after every collection the
// GC percentage is set so that the next goal is the larger of the floor and
// what GOGC alone would give. The price is memory the heap may grow into
// before it is collected, at most the floor.
//
// It owns only the GC percentage of the process; it does not set a memory
// limit (GOMEMLIMIT still applies on top) and leaves GOGC=off alone.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the percentage a tiny live heap would ask for.
const maxPercent = 10000

// liveMetric is the heap the last collection found live.
const liveMetric = "/gc/heap/live:bytes"

// Floor holds the heap goal at or above a number of bytes.
type Floor struct {
	floor uint64
	base  int // the GC percentage the process started with (GOGC)

	mu      sync.Mutex // orders adjustments with Stop
	stopped bool
	current int
	sample  []metrics.Sample
}

// Start keeps the heap goal at or above floor bytes until Stop. It returns
// nil, and changes nothing, when floor is 0 or the collector is off
// (GOGC=off).
func Start(floor uint64) *Floor {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if floor == 0 || base < 0 {
		return nil
	}
	f := &Floor{floor: floor, base: base, current: base,
		sample: []metrics.Sample{{Name: liveMetric}}}
	f.adjust()
	f.arm()
	return f
}

// Percent is the GC percentage in force now.
func (f *Floor) Percent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current
}

// Stop puts the process's own GC percentage back; safe on nil and more than
// once.
func (f *Floor) Stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.stopped = true
	debug.SetGCPercent(f.base)
	f.current = f.base
}

// sentinel is an object whose only purpose is to be collected: its
// finalizer runs after each collection that finds it unreachable, on the
// runtime's finalizer goroutine, and arms the next one. Its pointer field
// keeps it out of the tiny allocator, whose blocks are freed (and finalized)
// only with their neighbours.
type sentinel struct{ _ *int }

func (f *Floor) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if f.adjust() {
			f.arm()
		}
	})
}

// adjust sets the GC percentage for the heap the last collection left live;
// false once stopped.
func (f *Floor) adjust() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	metrics.Read(f.sample)
	if f.sample[0].Value.Kind() != metrics.KindUint64 {
		return false // the runtime no longer reports it: leave GOGC alone
	}
	p := percentFor(f.sample[0].Value.Uint64(), f.floor, f.base)
	if p != f.current {
		debug.SetGCPercent(p)
		f.current = p
	}
	return true
}

// percentFor is the GC percentage whose goal for a live heap is the larger
// of floor and what base gives.
func percentFor(live, floor uint64, base int) int {
	if live == 0 || live+live*uint64(base)/100 >= floor {
		return base
	}
	return min(int(floor*100/live)-100, maxPercent)
}
