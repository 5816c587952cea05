package cache

import (
	"context"
	"sync"
)

// Flights collapses concurrent identical misses on one replica: the first
// request for a key leads (it calls the provider), the others wait for its
// answer. It starts no goroutine: the leader is its own request's handler,
// and each waiter waits on its own goroutine within its own context, so a
// waiter's deadline never depends on the leader's and every wait ends.
type Flights struct {
	mu sync.Mutex
	m  map[Key]*flight
}

type flight struct {
	done  chan struct{} // closed by the leader's Done
	entry Entry
	ok    bool // the leader stored an answer
}

// Flight is the leader's handle: it must call Done exactly once, with the
// answer it stored or ok false when it has none (it failed, was cut, or
// its answer is not storable), which sends the waiters their own way.
type Flight struct {
	fs  *Flights
	key Key
	f   *flight
}

// Join leads the flight for k, returning its handle, or, when another
// request leads, waits for that one. A waiter gets (nil, entry, true) with
// the leader's answer, or (nil, _, false) when the leader had none or ctx
// ended first: it then takes the normal path on its own.
func (fs *Flights) Join(ctx context.Context, k Key) (lead *Flight, e Entry, ok bool) {
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = map[Key]*flight{}
	}
	f, running := fs.m[k]
	if !running {
		f = &flight{done: make(chan struct{})}
		fs.m[k] = f
		fs.mu.Unlock()
		return &Flight{fs: fs, key: k, f: f}, Entry{}, false
	}
	fs.mu.Unlock()
	select {
	case <-f.done:
		return nil, f.entry, f.ok
	case <-ctx.Done():
		return nil, Entry{}, false
	}
}

// Done ends the flight: the waiters get e when ok.
func (fl *Flight) Done(e Entry, ok bool) {
	fl.fs.mu.Lock()
	if fl.fs.m[fl.key] == fl.f {
		delete(fl.fs.m, fl.key)
	}
	fl.fs.mu.Unlock()
	fl.f.entry, fl.f.ok = e, ok
	close(fl.f.done)
}
