package keys

import (
	"crypto/sha256"
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
// client: limits, budget owners), once per load rather than per request.
type Compile func(*Key) any

// Set is one loaded generation of keys: immutable once built, so the
// request path reads it without a lock.
type Set struct {
	byDigest map[[sha256.Size]byte]entry
	keys     map[string]*Key // by id
	views    map[string]any  // by id: the compiled views
}

type entry struct {
	key      *Key
	view     any
	previous bool // the digest is the rotated-out secret's
}

// Match is a lookup's answer. Key and View are nil unless Status is Valid.
type Match struct {
	Status Status
	Key    *Key
	View   any
}

// Lookup finds the key whose secret has digest d: one map access, no
// allocation. A hash lookup needs no constant-time comparison: the
// digest of a guess says nothing of the digests stored (docs/keys.md).
func (s *Set) Lookup(d *[sha256.Size]byte, now time.Time) Match {
	if s == nil {
		return Match{}
	}
	e, ok := s.byDigest[*d]
	if !ok {
		return Match{}
	}
	k := e.key
	switch {
	case k.RevokedAt != nil:
		return Match{Status: Revoked}
	case k.Expired(now):
		return Match{Status: Expired}
	case e.previous && (k.PreviousExpiresAt == nil || !now.Before(*k.PreviousExpiresAt)):
		return Match{Status: Expired}
	}
	return Match{Status: Valid, Key: k, View: e.view}
}

// Len is the number of keys, revoked ones included.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// Keys returns the keys (shared: not to be changed).
func (s *Set) Keys() []*Key {
	if s == nil {
		return nil
	}
	out := make([]*Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, k)
	}
	return out
}

// Get is the key id of the set, or nil.
func (s *Set) Get(id string) *Key {
	if s == nil {
		return nil
	}
	return s.keys[id]
}

// NewSet builds a set from list with compile (nil: no views).
func NewSet(list []Key, compile Compile) *Set {
	s := &Set{byDigest: make(map[[sha256.Size]byte]entry, len(list)), keys: make(map[string]*Key, len(list)),
		views: make(map[string]any, len(list))}
	for i := range list {
		s.add(&list[i], compile)
	}
	return s
}

func (s *Set) add(k *Key, compile Compile) {
	var view any
	if compile != nil {
		view = compile(k)
	}
	s.keys[k.ID] = k
	s.views[k.ID] = view
	s.byDigest[k.Digest] = entry{key: k, view: view}
	if k.HasPrevious {
		s.byDigest[k.Previous] = entry{key: k, view: view, previous: true}
	}
}

// with is s with k put in (replacing the key of the same id) or, when
// gone, the key id taken out; a copy: s itself never changes.
func (s *Set) with(id string, k *Key, compile Compile) *Set {
	n := &Set{byDigest: make(map[[sha256.Size]byte]entry, len(s.byDigest)+2), keys: make(map[string]*Key, len(s.keys)+1),
		views: make(map[string]any, len(s.keys)+1)}
	for kid, old := range s.keys {
		if kid == id {
			continue
		}
		n.keys[kid] = old
		n.views[kid] = s.views[kid]
		n.byDigest[old.Digest] = entry{key: old, view: s.views[kid]}
		if old.HasPrevious {
			n.byDigest[old.Previous] = entry{key: old, view: s.views[kid], previous: true}
		}
	}
	if k != nil {
		n.add(k, compile)
	}
	return n
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

// put stores the current set with key id replaced by k (nil: removed).
func (c *Cache) put(id string, k *Key) *Set {
	s := c.cur.Load().with(id, k, c.compile)
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
