package keys

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// The keys are encoded one at a time into a buffered writer: the file of
// 100,000 keys is tens of MB, which neither the keys' copies nor the
// whole encoding need to be in memory for.
func writeSnapshot(path string, s *Set) error {
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
	err = encodeSnapshot(f, s)
	if err == nil {
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

// encodeSnapshot writes the snapshot document of s to w, the JSON a
// snapshot value would marshal to, key by key.
func encodeSnapshot(w io.Writer, s *Set) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	head, err := json.Marshal(snapshot{Version: snapshotVersion, WrittenAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	// head ends in "keys":null}: the keys go in its place.
	if !bytes.HasSuffix(head, []byte(`"keys":null}`)) {
		return fmt.Errorf("keys: snapshot head %s", head)
	}
	head = head[:len(head)-len("null}")]
	if _, err := bw.Write(head); err != nil {
		return err
	}
	_ = bw.WriteByte('[')
	enc := json.NewEncoder(bw)
	var encErr error
	i := 0
	s.Each(func(k *Key) {
		if encErr != nil {
			return
		}
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		i++
		sk := snapKey{Key: *k, SHA256: hex.EncodeToString(k.Digest[:])}
		if k.HasPrevious {
			sk.PreviousSHA256 = hex.EncodeToString(k.Previous[:])
		}
		encErr = enc.Encode(sk)
	})
	if encErr != nil {
		return encErr
	}
	_, _ = bw.WriteString("]}")
	return bw.Flush()
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
