package keys

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync/atomic"
	"time"
)

// Status is what a digest lookup found.
type Status uint8

const (
	Unknown Status = iota // no key has this digest
	Valid                 // a live key's current secret, or its previous one within the grace
	Revoked               // a revoked key's secret (current or previous)
	Expired               // a key past its expires_at, or a rotated-out secret past its grace
)

// Compile turns a key into the consumer's view of it (internal/api's
// client: limits, budget owners), once per key and set, at the key's first
// request rather than at load: most keys are idle at any time, and a view
// is a few small allocations the collector would trace for each.
type Compile func(*Key) any

// Set is one loaded generation of keys: immutable once built (but for the
// views, each filled in once), so the request path reads it without a
// lock. It holds per key only what the request path, the budgets and the
// snapshot need, as a pointer-free record (rec), with one map from each
// digest to the key's place.
type Set struct {
	byDigest map[[sha256.Size]byte]slot
	recs     []rec
	arena    arena
	tab      *tables
	// views[i] is recs[i]'s compiled view, nil until its first request.
	views   []atomic.Pointer[view]
	compile Compile
}

// view boxes a compiled view for an atomic pointer.
type view struct{ v any }

// slot is a digest's key: its index in recs, and whether the digest is
// the rotated-out secret's.
type slot struct {
	i        uint32
	previous bool
}

// Match is a lookup's answer. View is nil and the methods answer "" and
// nil unless Status is Valid.
type Match struct {
	Status Status
	View   any
	set    *Set
	i      uint32
}

// ID is the matched key's id (shared: the set's).
func (m *Match) ID() string {
	if m.set == nil {
		return ""
	}
	r := &m.set.recs[m.i]
	return m.set.arena.at(r.idOff, r.idLen)
}

// Name is the matched key's name (shared: the set's).
func (m *Match) Name() string {
	if m.set == nil {
		return ""
	}
	r := &m.set.recs[m.i]
	return m.set.arena.at(r.nameOff, r.nameLen)
}

// Models is the matched key's allowlist (shared: the set's); nil: every
// model.
func (m *Match) Models() []string {
	if m.set == nil {
		return nil
	}
	return m.set.tab.models[m.set.recs[m.i].models]
}

// Lookup finds the key whose secret has digest d: one map access and, but
// for a key's first request in this set, no allocation. A hash lookup
// needs no constant-time comparison: the digest of a guess says nothing
// of the digests stored (docs/keys.md).
func (s *Set) Lookup(d *[sha256.Size]byte, now time.Time) Match {
	if s == nil {
		return Match{}
	}
	e, ok := s.byDigest[*d]
	if !ok {
		return Match{}
	}
	r := &s.recs[e.i]
	t := now.UnixNano()
	switch {
	case r.revoked != 0:
		return Match{Status: Revoked}
	case r.expires != 0 && t >= r.expires:
		return Match{Status: Expired}
	case e.previous && (r.previousExpires == 0 || t >= r.previousExpires):
		return Match{Status: Expired}
	}
	m := Match{Status: Valid, set: s, i: e.i}
	if p := s.views[e.i].Load(); p != nil {
		m.View = p.v
	} else {
		m.View = s.view(e.i)
	}
	return m
}

// view is key i's compiled view, compiled now when this is its first
// request. Two first requests at once may both compile; one view wins and
// both use it (a view is a pure function of the record).
func (s *Set) view(i uint32) any {
	if s.compile == nil {
		return nil
	}
	if p := s.views[i].Load(); p != nil {
		return p.v
	}
	// Compile reads no digest: the map knows them, this key's record not.
	k := s.keyOf(&s.recs[i], digestPair{})
	// A view outlives its set when a change carries it into the next one;
	// its own copies keep it from holding this set's whole arena.
	k.ID, k.Name = strings.Clone(k.ID), strings.Clone(k.Name)
	p := &view{v: s.compile(&k)}
	if !s.views[i].CompareAndSwap(nil, p) {
		p = s.views[i].Load()
	}
	return p.v
}

// Len is the number of keys, revoked ones included.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.recs)
}

// Each calls fn with every key, slim (no hint, metadata or timestamps).
// k is reused: it is valid only during the call, and not to be changed.
func (s *Set) Each(fn func(k *Key)) {
	if s == nil {
		return
	}
	ds := s.digests()
	var k Key
	for i := range s.recs {
		k = s.keyOf(&s.recs[i], ds[i])
		fn(&k)
	}
}

// Get is the key id of the set (slim, as Each's), or nil. A scan: it is
// for the rare paths (a key deleted by hand), never a request's.
func (s *Set) Get(id string) *Key {
	if s == nil {
		return nil
	}
	for i := range s.recs {
		r := &s.recs[i]
		if s.arena.at(r.idOff, r.idLen) == id {
			var d digestPair
			for dg, e := range s.byDigest {
				if e.i == uint32(i) && e.previous {
					d.prev = dg
				} else if e.i == uint32(i) {
					d.cur = dg
				}
			}
			k := s.keyOf(r, d)
			return &k
		}
	}
	return nil
}

// NewSet builds a set from list with compile (nil: no views). The set
// keeps none of list: a caller may drop it.
func NewSet(list []Key, compile Compile) *Set {
	b := newSetBuilder(len(list), compile)
	for i := range list {
		b.add(&list[i])
	}
	return b.done()
}

// setBuilder builds a set one key at a time; done freezes it.
type setBuilder struct{ s *Set }

func newSetBuilder(n int, compile Compile) *setBuilder {
	return &setBuilder{s: &Set{byDigest: make(map[[sha256.Size]byte]slot, n+n/8), recs: make([]rec, 0, n),
		views: make([]atomic.Pointer[view], 0, n), arena: arena{b: make([]byte, 0, n*48)}, tab: newTables(),
		compile: compile}}
}

// add puts k in the set; the builder keeps none of k itself.
func (b *setBuilder) add(k *Key) {
	b.put(record(k, &b.s.arena, b.s.tab), digestPair{cur: k.Digest, prev: k.Previous}, nil)
}

// put appends r, whose strings are in the builder's arena and tables
// already, with its view (nil: none yet).
func (b *setBuilder) put(r rec, d digestPair, v *view) {
	s := b.s
	i := uint32(len(s.recs))
	s.recs = append(s.recs, r)
	s.byDigest[d.cur] = slot{i: i}
	if r.hasPrevious {
		s.byDigest[d.prev] = slot{i: i, previous: true}
	}
	b.viewsTo(len(s.recs))
	if v != nil {
		s.views[i].Store(v)
	}
}

// viewsTo makes views n long, its new places nil. An atomic value cannot
// be appended (that copies it: go vet's and the race detector's
// complaint), so views grow by reslicing into zeroed capacity, or into a
// larger slice the old pointers are moved into.
func (b *setBuilder) viewsTo(n int) {
	s := b.s
	if n <= cap(s.views) {
		s.views = s.views[:n]
		return
	}
	v := make([]atomic.Pointer[view], n, max(n, 2*cap(s.views)))
	for i := range s.views {
		v[i].Store(s.views[i].Load())
	}
	s.views = v
}

func (b *setBuilder) done() *Set {
	b.s.arena.freeze()
	return b.s
}

// with is s with k put in (replacing the key of the same id) or, when
// gone, the key id taken out; a copy: s itself never changes. The other
// keys keep their compiled views; k gets a fresh one at its next request.
func (s *Set) with(id string, k *Key) *Set {
	b := &setBuilder{s: &Set{byDigest: make(map[[sha256.Size]byte]slot, len(s.byDigest)+2),
		recs: make([]rec, 0, len(s.recs)+1), arena: arena{b: make([]byte, 0, len(s.arena.s)+64)},
		tab: s.tab.clone(), compile: s.compile}}
	b.s.views = make([]atomic.Pointer[view], 0, len(s.recs)+1)
	ds := s.digests()
	for i := range s.recs {
		r := s.recs[i]
		if s.arena.at(r.idOff, r.idLen) == id {
			continue
		}
		r.idOff, r.idLen = b.s.arena.add(s.arena.at(r.idOff, r.idLen))
		r.nameOff, r.nameLen = b.s.arena.add(s.arena.at(r.nameOff, r.nameLen))
		b.put(r, ds[i], s.views[i].Load())
	}
	if k != nil {
		b.add(k)
	}
	return b.done()
}

// Cache holds the current Set behind an atomic pointer: the request path
// loads it once per request; the Syncer swaps whole generations in.
type Cache struct {
	cur     atomic.Pointer[Set]
	compile Compile
	// loaded: a set from Postgres or the snapshot is in (before it, the
	// gateway does not know whether keys exist).
	loaded atomic.Bool
	// onChange is called with each new set, on the goroutine that stored
	// it; nil for none. Set before the Syncer starts.
	onChange func(*Set)
}

// NewCache returns an empty cache whose sets' views compile builds.
func NewCache(compile Compile) *Cache {
	c := &Cache{compile: compile}
	c.cur.Store(NewSet(nil, compile))
	return c
}

// OnChange makes f be called with every set stored from now on (the
// gateway's budgets follow the keys' this way). Call before Start.
func (c *Cache) OnChange(f func(*Set)) { c.onChange = f }

// Current is the set in service.
func (c *Cache) Current() *Set { return c.cur.Load() }

// Loaded reports whether a set from Postgres or the snapshot is in.
func (c *Cache) Loaded() bool { return c.loaded.Load() }

// replace stores a whole new set built from list.
func (c *Cache) replace(list []Key) *Set {
	s := NewSet(list, c.compile)
	c.store(s)
	return s
}

// load stores a whole new set read from q; n is the number of keys
// expected (a count read just before), so the set is allocated once at
// its size rather than grown by doubling (whose slack outlived the load).
func (c *Cache) load(ctx context.Context, q querier, n int) error {
	s, err := loadSet(ctx, q, n, c.compile)
	if err != nil {
		return err
	}
	c.store(s)
	return nil
}

// put stores the current set with key id replaced by k (nil: removed).
func (c *Cache) put(id string, k *Key) *Set {
	s := c.cur.Load().with(id, k)
	c.store(s)
	return s
}

func (c *Cache) store(s *Set) {
	c.cur.Store(s)
	c.loaded.Store(true)
	if c.onChange != nil {
		c.onChange(s)
	}
}
