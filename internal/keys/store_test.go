package keys

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/pgtest"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/secret"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgx pools close their background health checks asynchronously.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	)
}

// migrated is a fresh database with the gateway's migrations applied.
func migrated(t *testing.T) secret.String { return pgMigrated(t) }

func pgMigrated(t testing.TB) secret.String {
	t.Helper()
	dsn := pgtest.DatabaseURL(t)
	if err := report.Migrate(context.Background(), secret.New(dsn), "up", io.Discard); err != nil {
		t.Fatal(err)
	}
	return secret.New(dsn)
}

// replica is one gateway's keys: a cache and its syncer.
type replica struct {
	cache  *Cache
	syncer *Syncer
}

func startReplica(t *testing.T, dsn secret.String, snapshot string, refresh time.Duration) *replica {
	t.Helper()
	r := &replica{cache: NewCache(func(k *Key) any { return k.Name })}
	r.syncer = NewSyncer(r.cache, SyncOptions{DatabaseURL: dsn, SnapshotPath: snapshot, Refresh: refresh,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.syncer.Start(context.Background())
	t.Cleanup(r.syncer.Close)
	return r
}

func (r *replica) status(secret string) Status {
	d := Digest(secret)
	return r.cache.Current().Lookup(&d, time.Now()).Status
}

// waitStatus waits up to within for the replica to see secret as want and
// returns how long that took.
func (r *replica) waitStatus(t *testing.T, secret string, want Status, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if r.status(secret) == want {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("after %s the key is %v, want %v", within, r.status(secret), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func openStore(t *testing.T, dsn secret.String) *Store {
	t.Helper()
	st, err := Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

func name(s string) Change { return Change{Name: &s} }

// TestLifecycleAcrossReplicas: two replicas' sets on one database; every
// change made through the store reaches the other within a second, by
// NOTIFY (the full reload is set far off so it cannot be what delivers it).
func TestLifecycleAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	dsn := migrated(t)
	st := openStore(t, dsn)
	a := startReplica(t, dsn, "", time.Hour)
	b := startReplica(t, dsn, "", time.Hour)
	for _, r := range []*replica{a, b} {
		for !r.cache.Loaded() {
			time.Sleep(5 * time.Millisecond)
		}
	}
	var secrets []string

	k, sec, err := st.Create(ctx, "admin:test", name("web"))
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, sec)
	b.waitStatus(t, sec, Valid, time.Second)
	if b.cache.Current().Lookup(ptr(Digest(sec)), time.Now()).View != "web" {
		t.Fatal("the view is not the key's")
	}

	// Rotation with a 2s grace: both work, then only the new one.
	k2, sec2, err := st.Rotate(ctx, "admin:test", k.ID, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, sec2)
	if k2.Hint == k.Hint || k2.PreviousExpiresAt == nil {
		t.Fatalf("rotated record: %+v", k2)
	}
	b.waitStatus(t, sec2, Valid, time.Second)
	if b.status(sec) != Valid {
		t.Fatal("the old secret stopped before its grace")
	}
	b.waitStatus(t, sec, Expired, 3*time.Second)
	if b.status(sec2) != Valid {
		t.Fatal("the new secret stopped with the old one")
	}

	// Rotation with 0s: the old secret ends at once.
	_, sec3, err := st.Rotate(ctx, "admin:test", k.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, sec3)
	b.waitStatus(t, sec3, Valid, time.Second)
	if s := b.status(sec2); s != Unknown {
		t.Fatalf("the secret rotated out with 0s grace is %v", s)
	}

	// PATCH reaches B; a name is unique among live keys.
	team := "search"
	if _, err := st.Update(ctx, "admin:test", k.ID, Change{Team: &team}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for b.cache.Current().Get(k.ID).Team != team {
		if time.Now().After(deadline) {
			t.Fatal("the patch did not reach B within 1s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, _, err := st.Create(ctx, "admin:test", name("web")); !errors.Is(err, ErrNameTaken) {
		t.Fatalf("a second live 'web': %v", err)
	}

	// Revocations: p99 of the time until the other replica refuses.
	const n = 100
	ids := make([]string, n)
	secs := make([]string, n)
	for i := range n {
		k, s, err := st.Create(ctx, "admin:test", name("bulk-"+string(rune('a'+i/26))+string(rune('a'+i%26))))
		if err != nil {
			t.Fatal(err)
		}
		ids[i], secs[i] = k.ID, s
	}
	b.waitStatus(t, secs[n-1], Valid, time.Second)
	took := make([]time.Duration, n)
	for i := range n {
		start := time.Now()
		if _, err := st.Revoke(ctx, "admin:test", ids[i]); err != nil {
			t.Fatal(err)
		}
		b.waitStatus(t, secs[i], Revoked, time.Second)
		took[i] = time.Since(start)
	}
	slices.Sort(took)
	t.Logf("revocation reaching the other replica over %d revocations: p50 %s, p99 %s, max %s",
		n, took[n/2], took[n*99/100-1], took[n-1])
	if took[n*99/100-1] > time.Second {
		t.Fatalf("p99 %s, want under 1s", took[n*99/100-1])
	}
	if _, err := st.Revoke(ctx, "admin:test", ids[0]); err != nil {
		t.Fatalf("revoking twice: %v", err)
	}
	if _, err := st.Update(ctx, "admin:test", ids[0], name("x")); !errors.Is(err, ErrRevoked) {
		t.Fatalf("patching a revoked key: %v", err)
	}
	if _, err := st.Get(ctx, "not-a-uuid"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get a bad id: %v", err)
	}

	// The audit holds every write, newest first, and no secret.
	audit, err := st.Audit(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + 2 + 1 + n + n; len(audit) != want {
		t.Fatalf("%d audit rows, want %d", len(audit), want)
	}
	if audit[0].Action != "revoke" || audit[len(audit)-1].Action != "create" || audit[0].Actor != "admin:test" {
		t.Fatalf("audit order or actor: first %+v, last %+v", audit[0], audit[len(audit)-1])
	}
	list, err := st.List(ctx, Filter{Revoked: ptr(false)})
	if err != nil || len(list) != 1 || list[0].ID != k.ID {
		t.Fatalf("live keys: %v %v", list, err)
	}
	// Paging: newest first, each page older than the last one's end.
	seen := map[string]bool{}
	before := ""
	for page := 0; ; page++ {
		got, err := st.List(ctx, Filter{Limit: 30, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range got {
			if seen[k.ID] || (before != "" && k.ID >= before) {
				t.Fatalf("page %d: %s out of order or twice", page, k.ID)
			}
			seen[k.ID] = true
		}
		if len(got) < 30 {
			break
		}
		before = got[len(got)-1].ID
	}
	if len(seen) != n+1 {
		t.Fatalf("paging saw %d keys, want %d", len(seen), n+1)
	}
	if _, err := st.List(ctx, Filter{Before: "x"}); !errors.As(err, new(*FieldError)) {
		t.Fatalf("a bad cursor: %v", err)
	}
	blob, _ := json.Marshal(map[string]any{"audit": audit, "list": list})
	for _, s := range append(secrets, secs...) {
		if bytes.Contains(blob, []byte(s)) {
			t.Fatal("a secret is in the audit or a record")
		}
	}
}

func ptr[T any](v T) *T { return &v }

// closedPort is a loopback DSN nothing listens on.
func closedPort(t *testing.T) secret.String {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return secret.New("postgres://postgres@" + addr + "/none?sslmode=disable&connect_timeout=1")
}

// TestWritesWhilePostgresDown: every write is ErrUnavailable.
func TestWritesWhilePostgresDown(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, closedPort(t))
	if _, _, err := st.Create(ctx, "admin:test", name("web")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("create: %v", err)
	}
	id := "0190c0de-0000-7000-8000-000000000001"
	if _, err := st.Revoke(ctx, "admin:test", id); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("revoke: %v", err)
	}
	if _, _, err := st.Rotate(ctx, "admin:test", id, 0); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("rotate: %v", err)
	}
	if _, err := st.List(ctx, Filter{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("list: %v", err)
	}
}

// TestSnapshotServesWhilePostgresDown: a replica started with Postgres
// down serves the keys of the snapshot the last run wrote, refusing the
// revoked ones; the snapshot holds no secret.
func TestSnapshotServesWhilePostgresDown(t *testing.T) {
	ctx := context.Background()
	dsn := migrated(t)
	st := openStore(t, dsn)
	snap := filepath.Join(t.TempDir(), SnapshotFile)
	live, liveSec, err := st.Create(ctx, "admin:test", name("live"))
	if err != nil {
		t.Fatal(err)
	}
	gone, goneSec, err := st.Create(ctx, "admin:test", name("gone"))
	if err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, dsn, snap, time.Hour)
	a.waitStatus(t, goneSec, Valid, time.Second)
	if _, err := st.Revoke(ctx, "admin:test", gone.ID); err != nil {
		t.Fatal(err)
	}
	a.waitStatus(t, goneSec, Revoked, time.Second)
	if st := a.syncer.State(); st != "ok" {
		t.Fatalf("state following Postgres: %s", st)
	}
	a.syncer.Close() // writes what the debounce still held

	b, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(liveSec)) || bytes.Contains(b, []byte(goneSec)) {
		t.Fatal("the snapshot holds a secret")
	}
	down := startReplica(t, closedPort(t), snap, time.Hour)
	if !down.cache.Loaded() || down.syncer.State() != "snapshot" {
		t.Fatalf("the snapshot was not loaded at start (%s)", down.syncer.State())
	}
	if s := down.status(liveSec); s != Valid {
		t.Fatalf("live key from the snapshot: %v", s)
	}
	if s := down.status(goneSec); s != Revoked {
		t.Fatalf("revoked key from the snapshot: %v", s)
	}
	if down.cache.Current().Get(live.ID) == nil {
		t.Fatal("the record is not in the set")
	}
}

// TestFullReloadBackstop: a change made behind the store's back (no
// NOTIFY) is picked up by the periodic full reload.
func TestFullReloadBackstop(t *testing.T) {
	ctx := context.Background()
	dsn := migrated(t)
	st := openStore(t, dsn)
	k, sec, err := st.Create(ctx, "admin:test", name("web"))
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), SnapshotFile)
	r := startReplica(t, dsn, snap, 300*time.Millisecond)
	r.waitStatus(t, sec, Valid, time.Second)
	// Nothing changes: the reloads find the table as it was and keep the
	// set (and the snapshot) rather than build the same again.
	unchanged := func() {
		t.Helper()
		time.Sleep(1200 * time.Millisecond) // the first snapshot is written within a second
		set, before := r.cache.Current(), statSnapshot(t, snap)
		time.Sleep(1200 * time.Millisecond) // four refresh periods
		if r.cache.Current() != set || !statSnapshot(t, snap).Equal(before) {
			t.Fatal("a full reload rebuilt an unchanged set")
		}
	}
	unchanged()
	// A row changed by hand, without updated_at and without a NOTIFY.
	if _, err := st.pool.Exec(ctx, "UPDATE api_keys SET revoked_at = now() WHERE id = $1", k.ID); err != nil {
		t.Fatal(err)
	}
	r.waitStatus(t, sec, Revoked, 2*time.Second)
	unchanged()
	if _, err := st.pool.Exec(ctx, "DELETE FROM api_keys WHERE id = $1", k.ID); err != nil {
		t.Fatal(err)
	}
	r.waitStatus(t, sec, Unknown, 2*time.Second)
}

func statSnapshot(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

// TestRotationEdges: a rotation during a grace ends the older secret at
// once (a key has at most two), and a revocation ends both.
func TestRotationEdges(t *testing.T) {
	ctx := context.Background()
	dsn := migrated(t)
	st := openStore(t, dsn)
	r := startReplica(t, dsn, "", time.Hour)
	k, s1, err := st.Create(ctx, "admin:test", name("web"))
	if err != nil {
		t.Fatal(err)
	}
	_, s2, err := st.Rotate(ctx, "admin:test", k.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(t, s2, Valid, 5*time.Second)
	if r.status(s1) != Valid {
		t.Fatal("s1 within its grace is refused")
	}
	_, s3, err := st.Rotate(ctx, "admin:test", k.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(t, s3, Valid, time.Second)
	if r.status(s1) != Unknown || r.status(s2) != Valid {
		t.Fatalf("after a second rotation: s1 %v (want unknown), s2 %v (want valid)", r.status(s1), r.status(s2))
	}
	if _, err := st.Revoke(ctx, "admin:test", k.ID); err != nil {
		t.Fatal(err)
	}
	r.waitStatus(t, s3, Revoked, time.Second)
	if r.status(s2) != Revoked {
		t.Fatalf("the secret in its grace after a revocation: %v", r.status(s2))
	}
	if _, _, err := st.Rotate(ctx, "admin:test", k.ID, 0); !errors.Is(err, ErrRevoked) {
		t.Fatalf("rotating a revoked key: %v", err)
	}
}

// TestReconnectAfterOutage: the listening connection is cut; a revocation
// made meanwhile (by another replica, whose Postgres is fine) takes effect
// once the syncer is back, by the full reload that follows a reconnection.
func TestReconnectAfterOutage(t *testing.T) {
	ctx := context.Background()
	dsn := migrated(t)
	st := openStore(t, dsn)
	proxy := pgtest.NewProxy(t, pgtest.TargetOf(t, dsn.Reveal()))
	proxy.Up()
	r := startReplica(t, secret.New(pgtest.ViaProxy(t, dsn.Reveal(), proxy)), "", time.Hour)
	k, sec, err := st.Create(ctx, "admin:test", name("web"))
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(t, sec, Valid, 5*time.Second)
	proxy.Down()
	deadline := time.Now().Add(5 * time.Second)
	for r.syncer.State() != "stale" {
		if time.Now().After(deadline) {
			t.Fatalf("state %s after the outage, want stale", r.syncer.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := st.Revoke(ctx, "admin:test", k.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if r.status(sec) != Valid {
		t.Fatal("the cut replica saw the revocation without a connection")
	}
	proxy.Up()
	took := r.waitStatus(t, sec, Revoked, 8*time.Second)
	t.Logf("revocation applied %s after Postgres came back", took)
	if r.syncer.State() != "ok" {
		t.Fatalf("state %s once back", r.syncer.State())
	}
}
