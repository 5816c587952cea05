package keys

import (
	"path/filepath"
	"testing"
	"time"
)

// TestSnapshotRoundTrip: the streamed snapshot reads back as the set's
// keys, digests and the rotated-out one's included.
func TestSnapshotRoundTrip(t *testing.T) {
	list := benchKeys(50)
	past := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	list[7].Previous, list[7].HasPrevious, list[7].PreviousExpiresAt = Digest("old-7"), true, &past
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
		if s.Len() > 0 && back.Get(list[7].ID).Team != list[7].Team {
			t.Fatal("team lost in the round trip")
		}
	}
}
