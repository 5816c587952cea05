package keys

import (
	"io"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestSnapshotRoundTrip: the streamed snapshot reads back as the set's
// keys, digests and the rotated-out one's included.
func TestSnapshotRoundTrip(t *testing.T) {
	list := benchKeys(50)
	past := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	list[7].Previous, list[7].HasPrevious, list[7].PreviousExpiresAt = Digest("old-7"), true, &past
	// Every member, and strings encoding/json must escape.
	exp := time.Date(2027, 5, 6, 7, 8, 9, 123456789, time.UTC)
	list[8].Name, list[8].Team, list[8].Priority = "caf\u00e9 \"q\" \\ \x01", "t\u00ebam\n", "batch"
	list[8].Models, list[8].MaxConcurrency, list[8].TokensPerMinute = []string{"a\"b", "c*"}, 7, 12345
	list[8].Budget, list[8].CostInUsage, list[8].ExpiresAt, list[8].RevokedAt = &Budget{USD: 0.1 + 0.2, Per: "month"}, true, &exp, &exp
	list[9].Budget = nil
	path := filepath.Join(t.TempDir(), SnapshotFile)
	for _, s := range []*Set{NewSet(nil, nil), NewSet(list, nil)} {
		if err := writeSnapshot(path, s); err != nil {
			t.Fatal(err)
		}
		got, err := readSnapshot(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != s.Len() {
			t.Fatalf("%d keys read back, want %d", len(got), s.Len())
		}
		back := NewSet(got, nil)
		now := time.Now()
		for _, d := range [][32]byte{Digest("secret-3"), Digest("secret-49"), Digest("old-7")} {
			if s.Len() > 0 && back.Lookup(&d, now).Status != Valid {
				t.Fatalf("digest %x not valid after the round trip", d[:4])
			}
		}
		for i := range s.Len() {
			if want, got := s.Get(list[i].ID), back.Get(list[i].ID); !reflect.DeepEqual(got, want) {
				t.Fatalf("key %d read back as\n%+v\nwant\n%+v", i, got, want)
			}
		}
	}
}

// BenchmarkSnapshot100k is the CPU a snapshot of 100,000 keys costs, paid
// after each load that changed the set (docs/keys.md).
func BenchmarkSnapshot100k(b *testing.B) {
	s := NewSet(benchKeys(100_000), nil)
	b.ReportAllocs()
	for b.Loop() {
		if err := encodeSnapshot(io.Discard, s); err != nil {
			b.Fatal(err)
		}
	}
}
