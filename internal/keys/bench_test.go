package keys

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// benchKeys are n keys shaped like real ones: a team, two model globs, a
// budget and a little metadata.
func benchKeys(n int) []Key {
	out := make([]Key, n)
	now := time.Now()
	for i := range out {
		out[i] = Key{ID: fmt.Sprintf("0190c0de-0000-7000-8000-%012d", i), Name: fmt.Sprintf("client-%06d", i),
			Team: "team-" + fmt.Sprint(i%50), Hint: "sk-gw-AbCd…wxYz", Models: []string{"gpt-4o*", "claude-*"},
			RequestsPerMinute: 600, Budget: &Budget{USD: 20, Per: "day"}, Metadata: map[string]string{"owner": "ana"},
			CreatedAt: now, UpdatedAt: now, Digest: Digest(fmt.Sprintf("secret-%d", i))}
	}
	return out
}

// BenchmarkLookup is the request path's cost of an API key: one map
// access by digest in a set of 100,000 keys, no allocation.
func BenchmarkLookup(b *testing.B) {
	s := NewSet(benchKeys(100_000), func(k *Key) any { return k })
	d := Digest("secret-4242")
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if s.Lookup(&d, now).Status != Valid {
			b.Fatal("not found")
		}
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	s := NewSet(benchKeys(1000), func(k *Key) any { return k })
	d := Digest("secret-42")
	miss := Digest("nope")
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() {
		_ = s.Lookup(&d, now)
		_ = s.Lookup(&miss, now)
	}); n != 0 {
		t.Fatalf("Lookup allocates %.1f times", n)
	}
}

// BenchmarkLoad100k builds the set of 100,000 keys, as a full reload does
// once the rows are read, and reports the heap it holds per key
// (docs/keys.md, "Memory and load time").
func BenchmarkLoad100k(b *testing.B) {
	const n = 100_000
	list := benchKeys(n)
	b.ReportAllocs()
	for b.Loop() {
		_ = NewSet(list, func(k *Key) any { return k })
	}
	b.StopTimer()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// The rows are garbage once the set is built, unless it keeps them.
	// No view is compiled at load: a key's is at its first request.
	s := NewSet(benchKeys(n), func(k *Key) any { return &struct{ a, b, c int }{} })
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/key")
	runtime.KeepAlive(s)
}

// BenchmarkChange100k is one key's change reaching a set of 100,000 keys
// (a notification): the set is copied with the key replaced, the other
// keys' views carried over.
func BenchmarkChange100k(b *testing.B) {
	list := benchKeys(100_000)
	s := NewSet(list, func(k *Key) any { return k.Name })
	k := list[4242]
	k.Team = "moved"
	b.ReportAllocs()
	for b.Loop() {
		if s.with(k.ID, &k).Len() != len(list) {
			b.Fatal("lost a key")
		}
	}
}

// BenchmarkGCWith100k is a full collection with a set of 100,000 keys
// live, one in ten with its view compiled: what the keys add to every
// collection of the gateway (docs/keys.md). The records, the map and the
// arena hold no pointer, so the collector does not scan them.
func BenchmarkGCWith100k(b *testing.B) {
	type view struct {
		limits [4]int
		team   string
		owners []string
	}
	s := NewSet(benchKeys(100_000), func(k *Key) any {
		return &view{limits: [4]int{1, 2, 3, 4}, team: k.Team, owners: []string{k.Name, k.Team}}
	})
	now := time.Now()
	for i := 0; i < 100_000; i += 10 {
		d := Digest(fmt.Sprintf("secret-%d", i))
		if s.Lookup(&d, now).View == nil {
			b.Fatal("no view")
		}
	}
	runtime.GC()
	for b.Loop() {
		runtime.GC()
	}
	runtime.KeepAlive(s)
}
