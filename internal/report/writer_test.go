package report

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/pgtest"
	"github.com/llmgw/gateway/internal/secret"
)

// recordTerminal records n distinct candidates, each as pending then success,
// and returns how many records that was.
func recordTerminal(w *Writer, id uuid.UUID, from, n int) int {
	for i := from; i < from+n; i++ {
		c := lifecycle(id, i)
		w.RecordCandidate(c[1])
		w.RecordCandidate(c[3])
	}
	return 2 * n
}

// TestNewWriterValidates: configuration errors surface at construction, without
// touching Postgres.
func TestNewWriterValidates(t *testing.T) {
	if _, err := NewWriter(Options{}); err == nil {
		t.Error("missing DatabaseURL accepted")
	}
	if _, err := NewWriter(Options{DatabaseURL: secret.New("postgres://u:secretpw@h:notaport/db"), SpoolDir: t.TempDir()}); err == nil {
		t.Error("malformed DatabaseURL accepted")
	} else if strings.Contains(err.Error(), "secretpw") {
		t.Errorf("error leaks the password: %v", err)
	}
	if _, err := NewWriter(Options{DatabaseURL: secret.New("postgres://h/db"), SpoolDir: t.TempDir(), Retention: -time.Hour}); err == nil {
		t.Error("negative Retention accepted")
	}
}

// TestOptionsHideThePassword: the DSN usually carries the database password;
// a writer's options printed or logged whole (a debug line, a panic value)
// must not show it.
func TestOptionsHideThePassword(t *testing.T) {
	const password = "pw-SENTINEL-71c2"
	w, err := NewWriter(Options{DatabaseURL: secret.New("postgres://u:" + password + "@127.0.0.1:1/db"),
		SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("writer", "options", w.opts)
	for _, out := range []string{fmt.Sprintf("%v %+v %#v", w.opts, w.opts, w.opts), logged.String()} {
		if strings.Contains(out, password) {
			t.Fatalf("the password is printed: %s", out)
		}
	}
}

// TestWriteAndCloseDrains: records reach Postgres, and Close flushes what is
// still queued instead of losing it.
func TestWriteAndCloseDrains(t *testing.T) {
	dsn := migratedURL(t)
	w, _ := newTestWriter(t, dsn, func(o *Options) { o.FlushInterval = time.Hour }) // only Close flushes
	w.Start(context.Background())
	waitFor(t, "state ok", 10*time.Second, func() bool { return w.State() == StateOK })
	id := uuid.New()
	n := recordTerminal(w, id, 0, 300)
	w.RecordRequest(Request{ID: id, Status: RequestSuccess, StatusCode: 200})
	if err := w.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := w.Stats()
	if st.Written != uint64(n+1) || st.Spooled != 0 || st.Dropped != 0 || st.QueueDepth != 0 {
		t.Errorf("stats %+v, want %d written and nothing else", st, n+1)
	}
	if got := queryInt(t, dsn, "SELECT count(*) FROM request_candidates WHERE status = 'success'"); got != 300 {
		t.Errorf("%d success rows, want 300", got)
	}
	w.RecordCandidate(lifecycle(id, 999)[0])
	if got := w.Stats().Dropped; got != 1 {
		t.Errorf("record after Close: Dropped = %d, want 1", got)
	}
}

// TestOutageSpoolsAndReplaysExactlyOnce protects the central promise: the
// gateway starts while Postgres is unreachable, records go to the spool, and
// when Postgres answers again (twice over) every row is there exactly once.
func TestOutageSpoolsAndReplaysExactlyOnce(t *testing.T) {
	dsn := pgtest.DatabaseURL(t) // not migrated: AutoMigrate must do it on connect
	proxy := pgtest.NewProxy(t, pgtest.TargetOf(t, dsn))
	w, _ := newTestWriter(t, pgtest.ViaProxy(t, dsn, proxy), func(o *Options) {
		o.AutoMigrate = true
		o.WriteTimeout = time.Second
	})

	start := time.Now()
	w.Start(context.Background())
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Start took %s with Postgres down; it must not block", d)
	}
	if got := w.State(); got != StateConnecting {
		t.Errorf("state %q before anything was recorded, want %q", got, StateConnecting)
	}

	id := uuid.New()
	sent := recordTerminal(w, id, 0, 500)
	waitFor(t, "first outage spooled", 10*time.Second, func() bool { return w.Stats().Spooled == uint64(sent) })
	if got := w.State(); got != StateSpooling {
		t.Errorf("state %q while spooling, want %q", got, StateSpooling)
	}

	proxy.Up()
	waitFor(t, "first replay", 15*time.Second, func() bool {
		return w.Stats().Replayed == uint64(sent) && w.State() == StateOK
	})
	if got := queryInt(t, dsn, "SELECT count(*) FROM request_candidates"); got != 500 {
		t.Fatalf("after first replay: %d rows, want 500", got)
	}

	// Second outage while running: the connections die under the writer.
	proxy.Down()
	sent += recordTerminal(w, id, 500, 500)
	waitFor(t, "second outage spooled", 15*time.Second, func() bool { return w.Stats().Spooled == uint64(sent) })
	proxy.Up()
	waitFor(t, "second replay", 15*time.Second, func() bool {
		return w.Stats().Replayed == uint64(sent) && w.State() == StateOK
	})
	if err := w.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := queryInt(t, dsn, "SELECT count(*) FROM request_candidates"); got != 1000 {
		t.Errorf("after second replay: %d rows, want 1000", got)
	}
	if got := queryInt(t, dsn, "SELECT count(*) FROM request_candidates WHERE status <> 'success'"); got != 0 {
		t.Errorf("%d rows not success, want 0", got)
	}
	st := w.Stats()
	if st.Written != uint64(sent) || st.Dropped != 0 {
		t.Errorf("stats %+v, want written %d, dropped 0", st, sent)
	}
	if segs, _ := filepath.Glob(filepath.Join(w.opts.SpoolDir, "*"+segmentExt)); len(segs) != 0 {
		t.Errorf("spool segments left after replay: %v", segs)
	}
}

// TestSchemaMissingWaitsForMigration: without AutoMigrate, a database without
// the tables is not treated as healthy (every batch would fail); records wait in
// the spool, the log says what to do, and they are replayed once the schema
// appears.
func TestSchemaMissingWaitsForMigration(t *testing.T) {
	dsn := pgtest.DatabaseURL(t)
	w, logs := newTestWriter(t, dsn, nil)
	w.Start(context.Background())
	n := recordTerminal(w, uuid.New(), 0, 10)
	waitFor(t, "spooled", 10*time.Second, func() bool { return w.Stats().Spooled == uint64(n) })
	if got := w.State(); got != StateSpooling {
		t.Errorf("state %q, want %q", got, StateSpooling)
	}
	waitFor(t, "a log telling the operator to migrate", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "migrate up")
	})
	if err := Migrate(context.Background(), secret.New(dsn), "up", io.Discard); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replayed", 10*time.Second, func() bool { return w.Stats().Replayed == uint64(n) && w.State() == StateOK })
}

// TestQueueFullSpoolsThenReplays: with the queue full, Record* spools the record
// itself; a later process replays the spool.
func TestQueueFullSpoolsThenReplays(t *testing.T) {
	dsn := migratedURL(t)
	spoolDir := t.TempDir()
	w, _ := newTestWriter(t, dsn, func(o *Options) { o.QueueSize = 4; o.SpoolDir = spoolDir })
	id := uuid.New()
	for i := range 10 { // not started: nothing drains the queue
		w.RecordCandidate(lifecycle(id, i)[3])
	}
	if st := w.Stats(); st.QueueDepth != 4 || st.Spooled != 6 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want 4 queued, 6 spooled", st)
	}
	if err := w.Close(context.Background()); err != nil { // never started: queue goes to the spool
		t.Fatalf("Close: %v", err)
	}
	if st := w.Stats(); st.Spooled != 10 || st.QueueDepth != 0 {
		t.Fatalf("after Close: %+v, want all 10 spooled", st)
	}

	w2, _ := newTestWriter(t, dsn, func(o *Options) { o.SpoolDir = spoolDir })
	w2.Start(context.Background())
	waitFor(t, "replay", 10*time.Second, func() bool { return w2.Stats().Replayed == 10 })
	if got := queryInt(t, dsn, "SELECT count(*) FROM request_candidates"); got != 10 {
		t.Errorf("%d rows, want 10", got)
	}
}

// TestQueueFullSpoolBrokenDrops: when the spool cannot be written either, the
// record is dropped, counted and logged, and Record* still returns.
func TestQueueFullSpoolBrokenDrops(t *testing.T) {
	spoolDir := filepath.Join(t.TempDir(), "spool")
	w, logs := newTestWriter(t, "postgres://postgres@127.0.0.1:1/x", func(o *Options) { o.QueueSize = 2; o.SpoolDir = spoolDir })
	// Replace the directory by a file: every segment create now fails.
	if err := os.RemoveAll(spoolDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spoolDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	for i := range 5 {
		w.RecordCandidate(lifecycle(id, i)[0])
	}
	if st := w.Stats(); st.QueueDepth != 2 || st.Dropped != 3 || st.Spooled != 0 {
		t.Errorf("stats %+v, want 2 queued, 3 dropped", st)
	}
	if !strings.Contains(logs.String(), "report records dropped") {
		t.Errorf("no drop log; logs:\n%s", logs.String())
	}
	_ = w.Close(context.Background())
	if st := w.Stats(); st.Dropped != 5 {
		t.Errorf("after Close: Dropped = %d, want 5", st.Dropped)
	}
}

// TestCloseSpoolsWhenDown: Close with Postgres unreachable keeps every queued
// record in the spool, within the deadline it was given.
func TestCloseSpoolsWhenDown(t *testing.T) {
	w, _ := newTestWriter(t, "postgres://postgres@127.0.0.1:1/x?connect_timeout=1", func(o *Options) { o.FlushInterval = time.Hour })
	w.Start(context.Background())
	n := recordTerminal(w, uuid.New(), 0, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := w.Stats(); st.Spooled != uint64(n) || st.Dropped != 0 {
		t.Errorf("stats %+v, want %d spooled", st, n)
	}
}

// TestCloseWithExpiredContextSpools: once Close's deadline has passed nothing
// waits on Postgres any more; what is queued goes to the spool.
func TestCloseWithExpiredContextSpools(t *testing.T) {
	w, _ := newTestWriter(t, migratedURL(t), func(o *Options) { o.FlushInterval = time.Hour })
	w.Start(context.Background())
	waitFor(t, "state ok", 10*time.Second, func() bool { return w.State() == StateOK })
	n := recordTerminal(w, uuid.New(), 0, 100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := w.Stats(); st.Spooled != uint64(n) || st.Written != 0 {
		t.Errorf("stats %+v, want %d spooled, 0 written", st, n)
	}
}

// TestCrashLosesOnlyUnspooled protects the SIGKILL promise with a real kill: a
// child process spools records while Postgres is down and is killed; a new
// writer on the same directory replays every one of them.
func TestCrashLosesOnlyUnspooled(t *testing.T) {
	if dir := os.Getenv("REPORT_CRASH_CHILD_DIR"); dir != "" {
		crashChild(dir)
		return
	}
	dsn := migratedURL(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashLosesOnlyUnspooled$")
	cmd.Env = append(os.Environ(), "REPORT_CRASH_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if sc.Text() == "spooled" {
			ready = true
			break
		}
	}
	_ = cmd.Process.Kill() // SIGKILL: no Close, no deferred flush
	_ = cmd.Wait()
	if !ready {
		t.Fatal("child never reported its records spooled")
	}
	w, _ := newTestWriter(t, dsn, func(o *Options) { o.SpoolDir = dir })
	w.Start(context.Background())
	waitFor(t, "replay after crash", 10*time.Second, func() bool { return w.Stats().Replayed == 400 })
	if got := queryInt(t, dsn, "SELECT count(*) FROM request_candidates"); got != 200 {
		t.Errorf("%d rows after crash recovery, want 200", got)
	}
}

// crashChild runs in the child process of TestCrashLosesOnlyUnspooled.
func crashChild(dir string) {
	w, err := NewWriter(Options{DatabaseURL: secret.New("postgres://postgres@127.0.0.1:1/x?connect_timeout=1"),
		SpoolDir: dir, FlushInterval: 5 * time.Millisecond})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	w.Start(context.Background())
	n := recordTerminal(w, uuid.New(), 0, 200)
	for w.Stats().Spooled < uint64(n) {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("spooled")
	time.Sleep(time.Minute) // wait to be killed
}

// TestRecordDuringCloseWhileSpoolIsSlow: a record handed over while Close
// runs and the spool's disk is slow returns at once (dropped and counted,
// the writer closing): it does not queue behind the spool write of another
// record, which Close would otherwise wait for under the writer's lock.
// Every record ends spooled or dropped.
func TestRecordDuringCloseWhileSpoolIsSlow(t *testing.T) {
	w, _ := newTestWriter(t, "postgres://postgres@127.0.0.1:1/x", func(o *Options) { o.QueueSize = 1 })
	id := uuid.New()
	w.RecordCandidate(lifecycle(id, 0)[0]) // fills the queue
	w.spool.mu.Lock()                      // the disk is slow: every spool write waits
	unblock := sync.OnceFunc(w.spool.mu.Unlock)
	defer unblock() // a failing test must not leave the writer's Close hanging
	slow := make(chan struct{})
	go func() { defer close(slow); w.RecordCandidate(lifecycle(id, 1)[0]) }() // to the spool
	// Give the spooling record a moment to take the writer's lock, if
	// enqueue holds it across its spool write (bounded: the fixed code
	// never holds it long).
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		if !w.mu.TryLock() {
			break
		}
		w.mu.Unlock()
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- w.Close(context.Background()) }()
	waitFor(t, "Close marked the writer closed", 2*time.Second, func() bool {
		if !w.mu.TryRLock() {
			return false
		}
		defer w.mu.RUnlock()
		return w.closed
	})
	late := make(chan struct{})
	go func() { defer close(late); w.RecordCandidate(lifecycle(id, 2)[0]) }()
	select {
	case <-late:
	case <-time.After(time.Second):
		t.Error("a record during Close waited for another record's spool write")
	}
	unblock()
	<-slow
	<-late
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := w.Stats(); st.Spooled+st.Dropped != 3 || st.QueueDepth != 0 {
		t.Fatalf("stats %+v, want the 3 records spooled or dropped", st)
	}
}
