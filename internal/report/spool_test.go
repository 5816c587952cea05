package report

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func testSpool(t *testing.T, dir string) (*spool, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	s, err := openSpool(dir, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatalf("openSpool: %v", err)
	}
	t.Cleanup(func() { _ = s.close() })
	return s, logs
}

// readAll drains the spool in replay order, removing segments like replay does.
func readAll(t *testing.T, s *spool) []record {
	t.Helper()
	var out []record
	for {
		seq, ok := s.nextSegment()
		if !ok {
			return out
		}
		err := s.readSegment(seq, 0, func(rec *record, _ int64) error {
			out = append(out, *rec)
			return nil
		})
		if err != nil {
			t.Fatalf("readSegment: %v", err)
		}
		s.removeSegment(seq)
	}
}

func numbered(n int) []record {
	id := uuid.New()
	recs := make([]record, n)
	for i := range recs {
		recs[i] = record{kind: kindCandidate, cand: Candidate{RequestID: id, Index: i, Status: CandidatePending, CreatedAt: baseTime}}
	}
	return recs
}

func indexes(recs []record) []int {
	out := make([]int, len(recs))
	for i, r := range recs {
		out[i] = r.cand.Index
	}
	return out
}

// TestCodecRoundTrip: every field, including zero times (NULL) and the usage
// flag, survives the spool encoding.
func TestCodecRoundTrip(t *testing.T) {
	recs := []record{
		{kind: kindRequest, req: Request{ID: uuid.New(), ClientRequestID: "c-1", CreatedAt: baseTime, Model: "m",
			Stream: true, Client: "app", Priority: "background", Status: RequestSuccess, StatusCode: 200,
			ErrorType: "x", Latency: 3 * time.Second, FirstByte: time.Millisecond, CandidateCount: 4,
			HasUsage: true, PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, FinishedAt: baseTime.Add(time.Second),
			Route: "responses", Replica: "gw-2"}},
		{kind: kindRequest, req: Request{ID: uuid.New(), CreatedAt: baseTime, Status: RequestSuccess, Team: "t",
			HasCost: true, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Cache: CacheHit, HasSaved: true, SavedUSD: 0.0125}},
		{kind: kindRequest, req: Request{ID: uuid.New(), Status: RequestPending}},
		{kind: kindCandidate, cand: Candidate{RequestID: uuid.New(), Index: 7, RetryIndex: 2, Provider: "p",
			Endpoint: "http://h", KeyID: "k", Model: "m", Status: CandidateFailed, SkipReason: "s", StatusCode: -5,
			ErrorType: "e", ErrorMessage: "héllo", Latency: -time.Second, FirstByte: 9, StartedAt: baseTime,
			FinishedAt: baseTime.Add(time.Nanosecond), CreatedAt: baseTime}},
		{kind: kindCandidate, cand: Candidate{RequestID: uuid.New(), Index: 1, Status: CandidateSuccess,
			CreatedAt: baseTime, Resumed: true, ResumedFrom: 0}},
	}
	for _, want := range recs {
		buf := appendFrame(nil, &want)
		var got record
		if err := decodePayload(buf[frameHeader:], &got); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
		// A request frame cut just before its replica, or its route and
		// replica, is a frame of an older version (TestCodecOldFrames).
		olderEnds := map[int]bool{}
		if want.kind == kindRequest {
			end := len(buf) - len(appendString(nil, want.req.Replica))
			olderEnds[end] = true
			olderEnds[end-len(appendString(nil, want.req.Route))] = true
		}
		if want.kind == kindCandidate && want.cand.Resumed {
			// Without resumed_from: a frame of a version before resumes.
			olderEnds[len(buf)-len(binary.AppendVarint(nil, int64(want.cand.ResumedFrom)))] = true
		}
		for cut := frameHeader; cut < len(buf); cut++ {
			if err := decodePayload(buf[frameHeader:cut], &got); err == nil && !olderEnds[cut] {
				t.Fatalf("decoding a payload cut at %d succeeded", cut)
			}
		}
	}
}

// TestSpoolOrderAcrossSegments: records come back in append order, across
// segments and a restart, and the spool reports empty only once all is read.
func TestSpoolOrderAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	recs := numbered(10)
	s, _ := testSpool(t, dir)
	if err := s.append(recs[:3], true); err != nil {
		t.Fatal(err)
	}
	if err := s.append(recs[3:4], false); err != nil { // overflow style, no fsync
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s, _ = testSpool(t, dir) // a restart: must start a new segment
	if !s.hasData.Load() {
		t.Fatal("reopened spool reports no data")
	}
	if err := s.append(recs[4:], true); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	if len(segs) != 2 {
		t.Errorf("%d segments after a restart, want 2", len(segs))
	}
	if got := indexes(readAll(t, s)); !reflect.DeepEqual(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("replay order %v, want 0..9", got)
	}
	if s.hasData.Load() {
		t.Error("spool reports data after everything was read")
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt)); len(segs) != 0 {
		t.Errorf("segments left after replay: %v", segs)
	}
}

// TestSpoolTornTail protects crash recovery: whatever a crash leaves at the end
// of a segment is detected, logged and skipped, and every intact record before
// it is still delivered.
func TestSpoolTornTail(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(t *testing.T, path string, size int64, lastStart int64)
		want    int
	}{
		{"record cut mid-payload", func(t *testing.T, p string, size, _ int64) { truncate(t, p, size-3) }, 4},
		{"record cut mid-header", func(t *testing.T, p string, _, last int64) { truncate(t, p, last+5) }, 4},
		{"checksum mismatch", func(t *testing.T, p string, size, _ int64) { flipByte(t, p, size-2) }, 4},
		{"zero-filled tail", func(t *testing.T, p string, _, _ int64) { appendBytes(t, p, make([]byte, 4096)) }, 5},
		{"garbage length", func(t *testing.T, p string, _, _ int64) {
			appendBytes(t, p, []byte{0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5})
		}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, _ := testSpool(t, dir)
			recs := numbered(5)
			if err := s.append(recs[:4], true); err != nil {
				t.Fatal(err)
			}
			lastStart := s.activeSize
			if err := s.append(recs[4:], true); err != nil {
				t.Fatal(err)
			}
			path, size := s.path(s.activeSeq), s.activeSize
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			tt.corrupt(t, path, size, lastStart)

			s, logs := testSpool(t, dir)
			got := readAll(t, s)
			if len(got) != tt.want {
				t.Errorf("read %d records, want %d", len(got), tt.want)
			}
			if !strings.Contains(logs.String(), "torn or corrupt tail skipped") {
				t.Errorf("no log line about the torn tail; logs:\n%s", logs.String())
			}
		})
	}
}

// TestSpoolLocked: a second process on the same directory is refused.
func TestSpoolLocked(t *testing.T) {
	dir := t.TempDir()
	testSpool(t, dir)
	if s, err := openSpool(dir, slog.New(slog.DiscardHandler)); err == nil {
		_ = s.close()
		t.Fatal("second openSpool on a locked directory succeeded")
	}
}

// TestSpoolClosedRefusesAppends keeps late appends from writing after Close.
func TestSpoolClosedRefusesAppends(t *testing.T) {
	s, _ := testSpool(t, t.TempDir())
	_ = s.close()
	if err := s.append(numbered(1), true); !errors.Is(err, errSpoolClosed) {
		t.Errorf("append after close: %v, want errSpoolClosed", err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0xff
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path string, extra []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(extra); err != nil {
		t.Fatal(err)
	}
}

// TestReplaySetsAsideUnreadableSegment: a segment that cannot be read is renamed
// out of the way and the rest of the spool still replays; it must not be taken
// for a database outage, which would stall the writer forever.
func TestReplaySetsAsideUnreadableSegment(t *testing.T) {
	dsn := migratedURL(t)
	w := connectedWriter(t, dsn)
	recs := numbered(3)
	for i := range recs {
		if err := w.spool.append(recs[i:i+1], true); err != nil {
			t.Fatal(err)
		}
		w.spool.mu.Lock()
		_ = w.spool.sealActive()
		w.spool.mu.Unlock()
	}
	bad := w.spool.path(w.spool.sealed[1])
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(bad, 0o700); err != nil { // open works, read fails
		t.Fatal(err)
	}
	if err := w.replay(t.Context()); err != nil {
		t.Fatalf("replay: %v, want the bad segment skipped", err)
	}
	if got := w.Stats().Replayed; got != 2 {
		t.Errorf("Replayed = %d, want 2", got)
	}
	if _, err := os.Stat(bad + ".bad"); err != nil {
		t.Errorf("bad segment not set aside: %v", err)
	}
	if w.spool.hasData.Load() {
		t.Error("spool still reports data")
	}
}
