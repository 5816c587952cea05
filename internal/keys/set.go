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
// client: limits, budget owners), once per load rather than per request.
type Compile func(*Key) any

// Set is one loaded generation of keys: immutable once built, so the
// request path reads it without a lock. It holds per key only what the
// request path, the budgets and the snapshot need (slim: no hint, no
// metadata, no timestamps; the admin reads ask Postgres), in one slice,
// with one map from each digest to the key's place in it.
type Set struct {
	byDigest map[[sha256.Size]byte]slot
	keys     []Key // slim
	views    []any // views[i] is keys[i]'s compiled view
}

// slot is a digest's key: its index in keys, and whether the digest is
// the rotated-out secret's.
type slot struct {
	i        uint32
	previous bool
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
	k := &s.keys[e.i]
	switch {
	case k.RevokedAt != nil:
		return Match{Status: Revoked}
	case k.Expired(now):
		return Match{Status: Expired}
	case e.previous && (k.PreviousExpiresAt == nil || !now.Before(*k.PreviousExpiresAt)):
		return Match{Status: Expired}
	}
	return Match{Status: Valid, Key: k, View: s.views[e.i]}
}

// Len is the number of keys, revoked ones included.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// Keys returns the keys (shared: not to be changed), slim: no hint,
// metadata or timestamps.
func (s *Set) Keys() []*Key {
	if s == nil {
		return nil
	}
	out := make([]*Key, len(s.keys))
	for i := range s.keys {
		out[i] = &s.keys[i]
	}
	return out
}

// Get is the key id of the set (slim, as Keys), or nil. A scan: it is for
// the rare paths (a key deleted by hand), never a request's.
func (s *Set) Get(id string) *Key {
	if s == nil {
		return nil
	}
	for i := range s.keys {
		if s.keys[i].ID == id {
			return &s.keys[i]
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
	return b.s
}

// setBuilder builds a set one key at a time, sharing the strings keys
// have alike.
type setBuilder struct {
	s       *Set
	in      interner
	compile Compile
}

func newSetBuilder(n int, compile Compile) *setBuilder {
	return &setBuilder{s: newSet(n), in: interner{}, compile: compile}
}

// add puts k (slim) in the set; the builder keeps none of k itself.
func (b *setBuilder) add(k *Key) { b.s.add(k, b.compile, b.in) }

func newSet(n int) *Set {
	return &Set{byDigest: make(map[[sha256.Size]byte]slot, n+n/8), keys: make([]Key, 0, n), views: make([]any, 0, n)}
}

// interner shares the strings and model lists many keys have alike (the
// team, the priority, the allowlist): each row scanned has its own copy.
type interner map[string]any

func (in interner) str(v string) string {
	if v == "" {
		return ""
	}
	if x, ok := in[v]; ok {
		if s, ok := x.(string); ok {
			return s
		}
	}
	in[v] = v
	return v
}

func (in interner) models(m []string) []string {
	if len(m) == 0 {
		return nil
	}
	k := "\x00models\x00" + strings.Join(m, "\x00")
	if x, ok := in[k]; ok {
		return x.([]string)
	}
	c := make([]string, len(m))
	for i, v := range m {
		c[i] = in.str(v)
	}
	in[k] = c
	return c
}

// slim is what the set keeps of k: the fields the request path, the
// budgets and the snapshot read.
func slim(k *Key, in interner) Key {
	out := Key{ID: k.ID, Name: k.Name, Team: in.str(k.Team), Models: in.models(k.Models), Priority: in.str(k.Priority),
		MaxConcurrency: k.MaxConcurrency, RequestsPerMinute: k.RequestsPerMinute, TokensPerMinute: k.TokensPerMinute,
		CostInUsage: k.CostInUsage, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, PreviousExpiresAt: k.PreviousExpiresAt,
		Digest: k.Digest, Previous: k.Previous, HasPrevious: k.HasPrevious}
	if k.Budget != nil {
		b := *k.Budget
		b.Per = in.str(b.Per)
		out.Budget = &b
	}
	return out
}

// add appends k (slim) with its view compiled from the full record.
func (s *Set) add(k *Key, compile Compile, in interner) {
	var view any
	if compile != nil {
		view = compile(k)
	}
	s.put(slim(k, in), view)
}

// put appends k, already slim, and its view.
func (s *Set) put(k Key, view any) {
	i := uint32(len(s.keys))
	s.keys = append(s.keys, k)
	s.views = append(s.views, view)
	s.byDigest[k.Digest] = slot{i: i}
	if k.HasPrevious {
		s.byDigest[k.Previous] = slot{i: i, previous: true}
	}
}

// with is s with k put in (replacing the key of the same id) or, when
// gone, the key id taken out; a copy: s itself never changes.
func (s *Set) with(id string, k *Key, compile Compile) *Set {
	n := newSet(len(s.keys) + 1)
	for i := range s.keys {
		if s.keys[i].ID != id {
			n.put(s.keys[i], s.views[i])
		}
	}
	if k != nil {
		n.add(k, compile, interner{})
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

// load stores a whole new set read from q.
func (c *Cache) load(ctx context.Context, q querier) error {
	s, err := loadSet(ctx, q, c.cur.Load().Len(), c.compile)
	if err != nil {
		return err
	}
	c.store(s)
	return nil
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
