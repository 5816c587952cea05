package report

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The spool is a directory of append-only segment files named by a sequence
// number. Appends go to the active segment; replay takes segments oldest first
// and deletes each once all its records are in Postgres.
//
// Segments, rather than one file, are what make crash recovery simple: after a
// crash the last segment may end in a torn record, and appending after that
// tail would make every later record unreachable. So a new process treats every
// existing segment as sealed and starts a fresh one.
const (
	segmentExt      = ".spool"
	maxSegmentBytes = 64 << 20 // bounds how much one replay pass re-reads after a failure
)

var errSpoolClosed = errors.New("spool closed")

// segmentError is a failure to read a segment file (as opposed to a failure of
// whatever the caller does with its records).
type segmentError struct {
	path string
	err  error
}

func (e *segmentError) Error() string { return "read spool segment " + e.path + ": " + e.err.Error() }
func (e *segmentError) Unwrap() error { return e.err }

type spool struct {
	dir      string
	log      *slog.Logger
	unlockFn func() error

	mu         sync.Mutex
	closed     bool
	active     *os.File
	activeSeq  uint64
	activeSize int64
	nextSeq    uint64
	dirty      bool     // written since the last fsync
	sealed     []uint64 // ascending, not yet replayed
	buf        []byte

	// hasData is true while any record waits in the spool; read lock-free by
	// State and by the batcher's hot path.
	hasData atomic.Bool
}

func openSpool(dir string, log *slog.Logger) (*spool, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("report: create spool dir: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("report: lock spool dir %s: %w", dir, err)
	}
	s := &spool{dir: dir, log: log, unlockFn: unlock, nextSeq: 1}
	entries, err := os.ReadDir(dir)
	if err != nil {
		_ = unlock()
		return nil, fmt.Errorf("report: read spool dir: %w", err)
	}
	for _, e := range entries {
		seq, ok := parseSegmentName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		s.nextSeq = max(s.nextSeq, seq+1)
		if info, err := e.Info(); err == nil && info.Size() == 0 {
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		s.sealed = append(s.sealed, seq)
	}
	slices.Sort(s.sealed)
	s.updateHasData()
	return s, nil
}

func parseSegmentName(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, segmentExt)
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseUint(base, 10, 64)
	return seq, err == nil
}

func (s *spool) path(seq uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", seq, segmentExt))
}

func (s *spool) updateHasData() {
	s.hasData.Store(len(s.sealed) > 0 || s.activeSize > 0)
}

// append writes recs as one write to the active segment, fsyncing when sync is
// set. Overflow appends from Record* skip the fsync (the batcher syncs them
// within FlushInterval): a SIGKILL does not lose page-cache data, only a kernel
// crash would.
func (s *spool) append(recs []record, sync bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errSpoolClosed
	}
	s.buf = s.buf[:0]
	for i := range recs {
		s.buf = appendFrame(s.buf, &recs[i])
	}
	defer func() {
		if cap(s.buf) > 4<<20 {
			s.buf = nil // do not pin a large buffer after a large batch
		}
	}()
	if s.active == nil {
		if err := s.openActive(); err != nil {
			return err
		}
	}
	if _, err := s.active.Write(s.buf); err != nil {
		s.abandonActive()
		return fmt.Errorf("write spool segment: %w", err)
	}
	s.activeSize += int64(len(s.buf))
	s.dirty = true
	if sync {
		if err := s.active.Sync(); err != nil {
			// After a failed fsync the kernel may have dropped the pages; the
			// records cannot be trusted to be there.
			s.activeSize -= int64(len(s.buf))
			s.abandonActive()
			return fmt.Errorf("fsync spool segment: %w", err)
		}
		s.dirty = false
	}
	if s.activeSize >= maxSegmentBytes {
		if err := s.sealActive(); err != nil {
			s.log.Error("report spool: seal segment failed", "err", err)
		}
	}
	s.updateHasData()
	return nil
}

func (s *spool) openActive() error {
	seq := s.nextSeq
	f, err := os.OpenFile(s.path(seq), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("create spool segment: %w", err)
	}
	s.nextSeq++
	s.active, s.activeSeq, s.activeSize, s.dirty = f, seq, 0, false
	syncDir(s.dir) // make the new name durable with the data
	return nil
}

// abandonActive gives up on the active segment after a failed write: cut it back
// to its last good size (a partial frame would hide nothing, since the reader
// stops there anyway, but later appends would land behind it) and start a new
// segment on the next append.
func (s *spool) abandonActive() {
	_ = s.active.Truncate(s.activeSize)
	_ = s.active.Close()
	if s.activeSize > 0 {
		s.sealed = append(s.sealed, s.activeSeq)
	} else {
		_ = os.Remove(s.path(s.activeSeq))
	}
	s.active, s.activeSize, s.dirty = nil, 0, false
	s.updateHasData()
}

// sealActive closes the active segment and queues it for replay.
func (s *spool) sealActive() error {
	if s.active == nil {
		return nil
	}
	var err error
	if s.dirty {
		err = s.active.Sync()
	}
	if cerr := s.active.Close(); err == nil {
		err = cerr
	}
	if s.activeSize > 0 {
		s.sealed = append(s.sealed, s.activeSeq)
	} else {
		_ = os.Remove(s.path(s.activeSeq))
	}
	s.active, s.activeSize, s.dirty = nil, 0, false
	return err
}

// syncIfDirty fsyncs overflow appends that have not been synced yet.
func (s *spool) syncIfDirty() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil || !s.dirty {
		return nil
	}
	s.dirty = false
	return s.active.Sync()
}

// nextSegment returns the oldest segment to replay, sealing the active one when
// it is the only one left, so that replay never reads a file being appended to.
func (s *spool) nextSegment() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sealed) == 0 && s.activeSize > 0 {
		if err := s.sealActive(); err != nil {
			s.log.Error("report spool: seal segment failed", "err", err)
		}
	}
	s.updateHasData()
	if len(s.sealed) == 0 {
		return 0, false
	}
	return s.sealed[0], true
}

// removeSegment deletes a fully replayed segment. A failed delete is logged and
// otherwise ignored: the next process would replay it again, which the
// rank-guarded upserts make harmless.
func (s *spool) removeSegment(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(s.path(seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Error("report spool: remove replayed segment", "err", err)
	}
	s.sealed = slices.DeleteFunc(s.sealed, func(v uint64) bool { return v == seq })
	s.updateHasData()
}

// quarantine renames an unreadable segment to *.bad, out of the replay queue,
// and keeps it for an operator to inspect.
func (s *spool) quarantine(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.path(seq)
	if err := os.Rename(path, path+".bad"); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Error("report spool: set segment aside", "err", err)
	}
	s.sealed = slices.DeleteFunc(s.sealed, func(v uint64) bool { return v == seq })
	s.updateHasData()
}

// readSegment calls fn for every intact record from offset off on; end is the
// offset just past the record, so the caller can remember committed progress.
// A torn or corrupt tail ends the segment with a log line, never an error: it is
// what a crash mid-append leaves behind. I/O errors return as *segmentError;
// fn's errors return unchanged.
func (s *spool) readSegment(seq uint64, off int64, fn func(rec *record, end int64) error) error {
	path := s.path(seq)
	f, err := os.Open(path)
	if err != nil {
		return &segmentError{path, err}
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return &segmentError{path, err}
	}
	if off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return &segmentError{path, err}
		}
	}
	r := bufio.NewReaderSize(f, 256<<10)
	torn := func(pos int64, reason string) {
		s.log.Warn("report spool: torn or corrupt tail skipped",
			"segment", f.Name(), "offset", pos, "skipped_bytes", info.Size()-pos, "reason", reason)
	}
	var hdr [frameHeader]byte
	var payload []byte
	pos := off
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			switch {
			case errors.Is(err, io.EOF):
				return nil
			case errors.Is(err, io.ErrUnexpectedEOF):
				torn(pos, "truncated header")
				return nil
			default:
				return &segmentError{path, err}
			}
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		if n == 0 || n > maxSpoolRecord {
			torn(pos, "implausible record length")
			return nil
		}
		payload = slices.Grow(payload[:0], int(n))[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				torn(pos, "truncated record")
				return nil
			}
			return &segmentError{path, err}
		}
		if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(hdr[4:8]) {
			torn(pos, "checksum mismatch")
			return nil
		}
		end := pos + frameHeader + int64(n)
		var rec record
		if err := decodePayload(payload, &rec); err != nil {
			// Intact frame we cannot parse (another format version): skip just it.
			s.log.Error("report spool: undecodable record skipped", "segment", f.Name(), "offset", pos)
		} else if err := fn(&rec, end); err != nil {
			return err
		}
		pos = end
	}
}

// close fsyncs and closes the active segment and releases the directory lock.
func (s *spool) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.sealActive()
	if uerr := s.unlockFn(); err == nil {
		err = uerr
	}
	return err
}

// syncDir fsyncs a directory so a file created or removed in it survives a
// kernel crash. Best effort: not every platform supports it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
