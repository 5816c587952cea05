package keys

import (
	"crypto/sha256"
	"maps"
	"math"
	"slices"
	"time"
)

// rec is one key as a Set keeps it: what the request path, the budgets and
// the snapshot need, with no pointer in it. The id and name are spans of
// the set's string arena, the team, priority, budget window and model list
// indices into its tables, the times Unix nanoseconds (0: none). A slice
// of recs is therefore one allocation the collector never scans, however
// many keys it holds (docs/keys.md, "Memory and load time"). The digests
// are not in it: they are the keys of the set's map already (digests).
type rec struct {
	expires, revoked, previousExpires int64 // Unix ns; 0: none

	budgetUSD float64

	idOff, nameOff uint32 // in the arena
	idLen, nameLen uint16

	team, priority, per, models uint32 // table indices; 0: "" / no list

	maxConcurrency, requestsPerMinute, tokensPerMinute int32

	hasPrevious, hasBudget, costInUsage bool
}

// tables are the values many keys share (teams, priorities, budget
// windows, model lists), each kept once; index 0 is the empty value.
type tables struct {
	strs   []string
	models [][]string
	strIx  map[string]uint32
	listIx map[string]uint32 // a list's entries, each ended by NUL
	join   []byte            // list's scratch
}

func newTables() *tables {
	return &tables{strs: []string{""}, models: [][]string{nil}, strIx: map[string]uint32{"": 0}, listIx: map[string]uint32{}}
}

// str is v's index, adding it when new.
func (t *tables) str(v string) uint32 {
	if i, ok := t.strIx[v]; ok {
		return i
	}
	i := uint32(len(t.strs))
	t.strs = append(t.strs, v)
	t.strIx[v] = i
	return i
}

// list is m's index, adding it when new; empty and nil are both 0.
func (t *tables) list(m []string) uint32 {
	if len(m) == 0 {
		return 0
	}
	t.join = t.join[:0]
	for _, v := range m {
		t.join = append(append(t.join, v...), 0)
	}
	if i, ok := t.listIx[string(t.join)]; ok { // no allocation: the compiler reads t.join in place
		return i
	}
	c := make([]string, len(m))
	for j, v := range m {
		c[j] = t.strs[t.str(v)]
	}
	i := uint32(len(t.models))
	t.models = append(t.models, c)
	t.listIx[string(t.join)] = i
	return i
}

// clone is a copy of t a new set can add to while t's set is in use.
func (t *tables) clone() *tables {
	return &tables{strs: slices.Clone(t.strs), models: slices.Clone(t.models),
		strIx: maps.Clone(t.strIx), listIx: maps.Clone(t.listIx)}
}

// arena holds the ids and names of a set's keys end to end: one string
// rather than two small allocations per key for the collector to trace.
// Built in a byte slice, frozen into a string when the set is complete.
type arena struct {
	b []byte
	s string // frozen
}

func (a *arena) add(v string) (off uint32, n uint16) {
	if len(v) > math.MaxUint16 {
		v = v[:math.MaxUint16] // ids are UUIDs, names at most 200 bytes (body.go)
	}
	off = uint32(len(a.b))
	a.b = append(a.b, v...)
	return off, uint16(len(v))
}

func (a *arena) freeze() { a.s, a.b = string(a.b), nil }

func (a *arena) at(off uint32, n uint16) string { return a.s[off : off+uint32(n)] }

func nanos(t *time.Time) int64 {
	switch {
	case t == nil:
		return 0
	case t.After(maxNanosTime):
		// UnixNano wraps past 2262: a key that expires in 9999 (a
		// common "never") would read as expired in 1816.
		return math.MaxInt64
	case t.Before(minNanosTime):
		return math.MinInt64
	}
	return t.UnixNano()
}

// maxNanosTime and minNanosTime bound the times nanos can hold.
var (
	maxNanosTime = time.Unix(0, math.MaxInt64)
	minNanosTime = time.Unix(0, math.MinInt64)
)

func timeOf(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}

// record turns k into a rec, its strings into the arena and tables.
func record(k *Key, a *arena, t *tables) rec {
	r := rec{hasPrevious: k.HasPrevious,
		expires: nanos(k.ExpiresAt), revoked: nanos(k.RevokedAt), previousExpires: nanos(k.PreviousExpiresAt),
		team: t.str(k.Team), priority: t.str(k.Priority), models: t.list(k.Models),
		maxConcurrency: clamp32(k.MaxConcurrency), requestsPerMinute: clamp32(k.RequestsPerMinute),
		tokensPerMinute: clamp32(k.TokensPerMinute), costInUsage: k.CostInUsage}
	r.idOff, r.idLen = a.add(k.ID)
	r.nameOff, r.nameLen = a.add(k.Name)
	if k.Budget != nil {
		r.hasBudget, r.budgetUSD, r.per = true, k.Budget.USD, t.str(k.Budget.Per)
	}
	return r
}

// clamp32: the columns are Postgres integers, so a value from a row
// always fits; one built in a test is kept in range rather than wrapped.
func clamp32(v int) int32 { return int32(max(min(v, math.MaxInt32), math.MinInt32)) }

// keyOf is the slim Key of r (no hint, metadata or timestamps) with the
// digests d; its strings and model list are the set's, shared.
func (s *Set) keyOf(r *rec, d digestPair) Key {
	k := Key{ID: s.arena.at(r.idOff, r.idLen), Name: s.arena.at(r.nameOff, r.nameLen),
		Team: s.tab.strs[r.team], Priority: s.tab.strs[r.priority], Models: s.tab.models[r.models],
		MaxConcurrency: int(r.maxConcurrency), RequestsPerMinute: int(r.requestsPerMinute),
		TokensPerMinute: int(r.tokensPerMinute), CostInUsage: r.costInUsage,
		ExpiresAt: timeOf(r.expires), RevokedAt: timeOf(r.revoked), PreviousExpiresAt: timeOf(r.previousExpires),
		Digest: d.cur, Previous: d.prev, HasPrevious: r.hasPrevious}
	if r.hasBudget {
		k.Budget = &Budget{USD: r.budgetUSD, Per: s.tab.strs[r.per]}
	}
	return k
}

// digestPair is a key's digests: its current secret's and its previous
// one's (zero when it has none).
type digestPair struct{ cur, prev [sha256.Size]byte }

// digests are every key's digests, by index: the map's keys turned
// around, for the rare paths that need them (Each, Get, a change, the
// snapshot), so that the records need not hold 64 bytes each for them.
func (s *Set) digests() []digestPair {
	out := make([]digestPair, len(s.recs))
	for d, e := range s.byDigest {
		if e.previous {
			out[e.i].prev = d
		} else {
			out[e.i].cur = d
		}
	}
	return out
}
