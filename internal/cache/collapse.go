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
	m  map[Key]*Flight
}

// Flight is one key's flight; its leader holds it and must call Done
// exactly once, with the answer it stored or ok false when it has none (it
// failed, was cut, or its answer is not storable), which sends the waiters
// their own way.
type Flight struct {
	fs  *Flights
	key Key
	// done is made by the first waiter, under fs.mu: most flights have
	// none, and cost then one allocation. Closed by Done.
	done  chan struct{}
	entry Entry
	ok    bool // the leader stored an answer
}

// Join leads the flight for k, returning its handle, or, when another
// request leads, waits for that one. A waiter gets (nil, entry, true) with
// the leader's answer, or (nil, _, false) when the leader had none or ctx
// ended first: it then takes the normal path on its own.
func (fs *Flights) Join(ctx context.Context, k Key) (lead *Flight, e Entry, ok bool) {
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = map[Key]*Flight{}
	}
	f, running := fs.m[k]
	if !running {
		f = &Flight{fs: fs, key: k}
		fs.m[k] = f
		fs.mu.Unlock()
		return f, Entry{}, false
	}
	if f.done == nil {
		f.done = make(chan struct{})
	}
	done := f.done
	fs.mu.Unlock()
	select {
	case <-done:
		return nil, f.entry, f.ok
	case <-ctx.Done():
		return nil, Entry{}, false
	}
}

// Done ends the flight: the waiters get e when ok. Once it left the map
// no waiter can join, so a flight without done by then has none.
func (f *Flight) Done(e Entry, ok bool) {
	f.fs.mu.Lock()
	if f.fs.m[f.key] == f {
		delete(f.fs.m, f.key)
	}
	done := f.done
	f.fs.mu.Unlock()
	f.entry, f.ok = e, ok
	if done != nil {
		close(done)
	}
}
