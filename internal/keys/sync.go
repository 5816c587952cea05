package keys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/llmgw/gateway/internal/secret"
)

// SyncOptions configure a Syncer.
type SyncOptions struct {
	DatabaseURL secret.String
	// Refresh is the full reload's period, the backstop for a lost
	// notification (GATEWAY_KEYS_REFRESH); 0 means DefaultRefresh.
	Refresh time.Duration
	// SnapshotPath is where the last loaded set is kept; "" for nowhere.
	SnapshotPath string
	Logger       *slog.Logger
}

// syncState is what State reports.
type syncState int32

const (
	stateLoading  syncState = iota // nothing loaded: no snapshot, Postgres not reached yet
	stateSnapshot                  // serving the snapshot; Postgres not reached yet
	stateOK                        // following Postgres
	stateStale                     // Postgres lost after a load: serving the last set
)

var stateNames = [...]string{stateLoading: "loading", stateSnapshot: "snapshot", stateOK: "ok", stateStale: "stale"}

// State is the key set's source, for /readyz: "loading", "snapshot",
// "ok" or "stale". None of them makes the gateway unready: a replica
// serving its last set still authenticates every key it knew.
func (s *Syncer) State() string { return stateNames[s.state.Load()] }

// DefaultRefresh is GATEWAY_KEYS_REFRESH's default.
const DefaultRefresh = 60 * time.Second

const (
	// snapshotEvery bounds how often a run of changes rewrites the
	// snapshot (100,000 keys are ~30 MB of JSON).
	snapshotEvery = time.Second
	minBackoff    = 100 * time.Millisecond
	maxBackoff    = 5 * time.Second
	// loadTimeout bounds one load on the listening connection.
	loadTimeout = 30 * time.Second
	// pingEvery and pingTimeout bound how long a silently dead listening
	// connection goes unnoticed: about 7 s, after which the syncer
	// reconnects and reloads everything.
	pingEvery   = 5 * time.Second
	pingTimeout = 2 * time.Second
)

// Syncer keeps a Cache current: a dedicated connection LISTENs on
// Channel and reloads each key named by a notification; a full reload
// follows every (re)connection and every Refresh, so a notification lost
// while disconnected is made up for. It owns one goroutine, from Start to
// Close.
type Syncer struct {
	cache  *Cache
	opts   SyncOptions
	cancel context.CancelFunc
	done   chan struct{}

	state atomic.Int32 // a syncState

	// owned by the goroutine
	dirty      bool
	lastWrite  time.Time
	failing    bool
	loadedOnce bool
	// mark is api_keys' tableMark at the last full load, "" when a
	// notification has changed the set since (or none was loaded).
	mark string
}

// NewSyncer returns a syncer for cache; Start runs it.
func NewSyncer(cache *Cache, opts SyncOptions) *Syncer {
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Syncer{cache: cache, opts: opts}
}

// Start loads the snapshot, when there is one, so that the keys known at
// the last run are served (and the revoked ones refused) before Postgres
// answers, then starts the goroutine that follows Postgres.
func (s *Syncer) Start(ctx context.Context) {
	if s.opts.SnapshotPath != "" {
		list, err := readSnapshot(s.opts.SnapshotPath)
		switch {
		case err != nil:
			s.opts.Logger.Warn("api keys: snapshot unreadable; waiting for Postgres", "err", err)
		case list != nil:
			s.cache.replace(list)
			s.state.Store(int32(stateSnapshot))
			s.opts.Logger.Info("api keys: snapshot loaded", "keys", len(list))
		}
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.run(ctx)
}

// Close stops the goroutine and waits for it; the snapshot is written
// first if a change is not in it yet.
func (s *Syncer) Close() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
}

func (s *Syncer) run(ctx context.Context) {
	defer close(s.done)
	defer s.flush(true)
	backoff := minBackoff
	for {
		loaded, err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if loaded {
			backoff = minBackoff
		}
		s.state.CompareAndSwap(int32(stateOK), int32(stateStale))
		if !s.failing {
			s.opts.Logger.Warn("api keys: Postgres unavailable (or not migrated yet); serving the keys loaded last and retrying", "err", err)
			s.failing = true
		} else {
			s.opts.Logger.Debug("api keys: Postgres still unavailable", "err", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// session connects, listens, loads everything and then follows the
// notifications until the connection fails or ctx ends. loaded: the full
// load succeeded.
func (s *Syncer) session(ctx context.Context) (loaded bool, err error) {
	cfg, err := pgx.ParseConfig(s.opts.DatabaseURL.Reveal())
	if err != nil {
		return false, fmt.Errorf("parse database url: %w", err)
	}
	cfg.ConnectTimeout = 5 * time.Second
	// A wait that times out sets the socket's deadline rather than sending
	// Postgres a cancel request (a new connection each time), and a
	// timeout leaves the connection usable.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		cancel()
	}()
	// LISTEN before the load: a change committed in between is both in
	// the load and notified, never in neither.
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return false, err
	}
	start := time.Now()
	if err := s.loadAll(ctx, conn); err != nil {
		return false, err
	}
	s.state.Store(int32(stateOK))
	if s.failing || !s.loadedOnce {
		s.opts.Logger.Info("api keys: loaded from Postgres", "keys", s.cache.Current().Len(),
			"took_ms", time.Since(start).Milliseconds())
		s.failing, s.loadedOnce = false, true
	}
	nextFull := time.Now().Add(s.opts.Refresh)
	nextPing := time.Now().Add(pingEvery)
	for {
		deadline := minTime(nextFull, nextPing)
		if s.dirty {
			deadline = minTime(deadline, s.lastWrite.Add(snapshotEvery))
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return true, ctx.Err()
		case err != nil && wctx.Err() != nil && !conn.IsClosed():
			// The wait's own deadline: time for a ping, a snapshot or a reload.
			if !time.Now().Before(nextFull) {
				if err := s.loadAll(ctx, conn); err != nil {
					return true, err
				}
				nextFull = time.Now().Add(s.opts.Refresh)
			}
			if !time.Now().Before(nextPing) {
				if err := s.ping(ctx, conn); err != nil {
					return true, err
				}
				nextPing = time.Now().Add(pingEvery)
			}
			s.flush(false)
			continue
		case err != nil:
			return true, err
		}
		if err := s.loadKey(ctx, conn, n.Payload); err != nil {
			return true, err
		}
		s.flush(false)
	}
}

// ping checks the listening connection: one that died without a word (a
// partition, a failover that kept the socket) would otherwise miss every
// change until the next full reload timed out.
func (s *Syncer) ping(ctx context.Context, conn *pgx.Conn) error {
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// loadAll replaces the set with every key read anew, unless the table's
// mark says nothing changed since the last full load and no notification
// changed the set since: then the set is the table's already, and a
// rebuild (with its garbage, a snapshot and the budgets' refresh) would
// change nothing.
func (s *Syncer) loadAll(ctx context.Context, conn *pgx.Conn) error {
	lctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	// The mark is read before the rows: a change between the two is in
	// the set, and makes the next mark differ (a reload too many, never
	// one too few).
	mark, n, err := tableMark(lctx, conn)
	if err != nil {
		return fmt.Errorf("load keys: %w", err)
	}
	if mark == s.mark {
		return nil
	}
	if err := s.cache.load(lctx, conn, n+n/64); err != nil { // room for a few written meanwhile
		return fmt.Errorf("load keys: %w", err)
	}
	s.mark = mark
	s.dirty = true
	return nil
}

// loadKey reloads the key a notification named (or every key, for a
// payload that is not a key id: a hand-made NOTIFY).
func (s *Syncer) loadKey(ctx context.Context, conn *pgx.Conn, id string) error {
	lctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	k, err := loadOne(lctx, conn, id)
	switch {
	case errors.Is(err, ErrNotFound) && s.cache.Current().Get(id) != nil:
		s.cache.put(id, nil) // deleted by hand
	case errors.Is(err, ErrNotFound):
		return s.loadAll(ctx, conn)
	case err != nil:
		return fmt.Errorf("load key: %w", err)
	default:
		s.cache.put(id, &k)
	}
	s.mark = "" // the set is no longer the last full load's
	s.dirty = true
	return nil
}

// flush writes the snapshot when it is behind and snapshotEvery has
// passed since the last write (or always, when final).
func (s *Syncer) flush(final bool) {
	if s.opts.SnapshotPath == "" {
		s.dirty = false // nowhere to write: never behind
		return
	}
	if !s.dirty {
		return
	}
	if !final && time.Since(s.lastWrite) < snapshotEvery {
		return
	}
	s.dirty = false
	s.lastWrite = time.Now()
	if err := writeSnapshot(s.opts.SnapshotPath, s.cache.Current()); err != nil {
		s.opts.Logger.Warn("api keys: snapshot not written", "path", s.opts.SnapshotPath, "err", err)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
