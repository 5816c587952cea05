package keys

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// SnapshotFile is the snapshot's name in GATEWAY_SPOOL_DIR. The report
// spool there reads only its own segment names, so the two can share it.
const SnapshotFile = "api-keys.snapshot.json"

// snapshot is the file's content: every key with its digests, never a
// secret (none is ever known past the answer that issued it).
type snapshot struct {
	Version   int       `json:"version"`
	WrittenAt time.Time `json:"written_at"`
	Keys      []snapKey `json:"keys"`
}

type snapKey struct {
	Key
	SHA256         string `json:"key_sha256"`
	PreviousSHA256 string `json:"previous_key_sha256,omitempty"`
}

const snapshotVersion = 1

// writeSnapshot writes s's keys to path atomically: a temporary file in
// the same directory, synced, renamed over the old one, and the directory
// synced, so a crash leaves the old snapshot or the new, never half of one.
func writeSnapshot(path string, s *Set) error {
	snap := snapshot{Version: snapshotVersion, WrittenAt: time.Now().UTC(), Keys: make([]snapKey, 0, s.Len())}
	for _, k := range s.Keys() {
		sk := snapKey{Key: *k, SHA256: hex.EncodeToString(k.Digest[:])}
		if k.HasPrevious {
			sk.PreviousSHA256 = hex.EncodeToString(k.Previous[:])
		}
		snap.Keys = append(snap.Keys, sk)
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".api-keys-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // a no-op once renamed
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// readSnapshot reads the keys of the snapshot at path; an absent file is
// (nil, nil): a first start.
func readSnapshot(path string) ([]Key, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, fmt.Errorf("keys: snapshot %s: %w", path, err)
	}
	if snap.Version != snapshotVersion {
		return nil, fmt.Errorf("keys: snapshot %s: version %d, want %d", path, snap.Version, snapshotVersion)
	}
	out := make([]Key, 0, len(snap.Keys))
	for _, sk := range snap.Keys {
		k := sk.Key
		if n, err := hex.Decode(k.Digest[:], []byte(sk.SHA256)); err != nil || n != len(k.Digest) {
			return nil, fmt.Errorf("keys: snapshot %s: key %s has a bad key_sha256", path, k.ID)
		}
		if sk.PreviousSHA256 != "" {
			if n, err := hex.Decode(k.Previous[:], []byte(sk.PreviousSHA256)); err != nil || n != len(k.Previous) {
				return nil, fmt.Errorf("keys: snapshot %s: key %s has a bad previous_key_sha256", path, k.ID)
			}
			k.HasPrevious = true
		}
		out = append(out, k)
	}
	return out, nil
}
