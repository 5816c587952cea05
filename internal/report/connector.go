package report

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// errSchemaMissing means Postgres answers but the tables are not there.
var errSchemaMissing = errors.New("report tables missing: run `gateway migrate up` or set GATEWAY_AUTO_MIGRATE=true")

// runConnector owns the transition to healthy: it dials (with capped, jittered
// exponential backoff), migrates when AutoMigrate is set, checks the schema,
// then marks the store healthy and wakes the batcher to replay the spool. After
// that it sleeps until the batcher reports a failed write.
func (w *Writer) runConnector(ctx context.Context) {
	backoff := w.backoffMin
	for {
		if !w.healthy.Load() {
			err := w.connect(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if ok, suppressed := w.connLog.allow(time.Now()); ok {
					w.log.Warn("report store not reachable; records go to the spool",
						"err", err, "retry_in", backoff, "suppressed_logs", suppressed)
				}
				if !sleepCtx(ctx, jitter(backoff)) {
					return
				}
				backoff = min(backoff*2, w.backoffMax)
				continue
			}
			backoff = w.backoffMin
			w.connLog.reset()
			w.healthy.Store(true)
			w.log.Info("report store connected")
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.probe:
			// Give a struggling server a moment before the first probe, so a
			// slow-but-up Postgres does not flap between states on every batch.
			if !sleepCtx(ctx, jitter(w.backoffMin)) {
				return
			}
		}
	}
}

// connect creates the pool on first use (pgxpool dials lazily), pings, migrates
// and verifies the schema.
func (w *Writer) connect(ctx context.Context) error {
	pool := w.pool.Load()
	if pool == nil {
		var err error
		pool, err = pgxpool.NewWithConfig(ctx, w.poolCfg)
		if err != nil {
			return fmt.Errorf("create pool: %w", err)
		}
		w.pool.Store(pool)
	}
	pctx, cancel := context.WithTimeout(ctx, w.opts.WriteTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if w.opts.AutoMigrate {
		mctx, mcancel := context.WithTimeout(ctx, w.migrateTimeout)
		err := migrateUp(mctx, w.poolCfg.ConnConfig.Copy(), w.log)
		mcancel()
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	// A fresh deadline: the migration above may have used up pctx's.
	sctx, scancel := context.WithTimeout(ctx, w.opts.WriteTimeout)
	defer scancel()
	var ok bool
	err := pool.QueryRow(sctx, `SELECT to_regclass('requests') IS NOT NULL
		AND to_regclass('request_candidates') IS NOT NULL`).Scan(&ok)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if !ok {
		return errSchemaMissing
	}
	return nil
}

// jitter spreads d by ±20% so that replicas restarted together do not retry in
// lockstep.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	spread := d / 5
	return d - spread + rand.N(2*spread+1)
}

// sleepCtx waits d or until ctx ends; it reports whether the full wait elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
