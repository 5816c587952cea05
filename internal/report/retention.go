package report

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Retention deletes expired rows a few at a time: one statement per
// retentionBatch rows, each picking its victims through the created_at index and
// deleting them by ctid. Small statements keep locks and WAL bursts short, so the
// writer's upserts are never stuck behind a long DELETE.
const (
	deleteCandidatesSQL = `DELETE FROM request_candidates WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM request_candidates WHERE created_at < $1 LIMIT $2))`
	deleteRequestsSQL = `DELETE FROM requests WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM requests WHERE created_at < $1 LIMIT $2))`
	// retentionPause separates two delete statements of one run.
	retentionPause = 10 * time.Millisecond
)

// runRetention runs deleteExpired shortly after start and then periodically,
// while the store is healthy. It does nothing when Retention is 0.
func (w *Writer) runRetention(ctx context.Context) {
	if w.opts.Retention <= 0 {
		return
	}
	t := time.NewTimer(w.retentionFirst)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.healthy.Load() {
			cutoff := w.now().Add(-w.opts.Retention)
			reqs, cands, err := w.deleteExpired(ctx, cutoff)
			switch {
			case err != nil && ctx.Err() == nil:
				w.log.Warn("report retention failed", "err", err, "requests_deleted", reqs, "candidates_deleted", cands)
			case reqs > 0 || cands > 0:
				w.log.Info("report retention", "cutoff", cutoff, "requests_deleted", reqs, "candidates_deleted", cands)
			}
		}
		t.Reset(w.retentionEvery)
	}
}

// deleteExpired deletes rows created before cutoff from both tables.
func (w *Writer) deleteExpired(ctx context.Context, cutoff time.Time) (reqs, cands int64, err error) {
	pool := w.pool.Load()
	if pool == nil {
		return 0, 0, ErrUnavailable
	}
	cands, err = w.deleteInBatches(ctx, pool, deleteCandidatesSQL, cutoff)
	if err != nil {
		return 0, cands, fmt.Errorf("delete expired candidates: %w", err)
	}
	reqs, err = w.deleteInBatches(ctx, pool, deleteRequestsSQL, cutoff)
	if err != nil {
		return reqs, cands, fmt.Errorf("delete expired requests: %w", err)
	}
	return reqs, cands, nil
}

func (w *Writer) deleteInBatches(ctx context.Context, pool *pgxpool.Pool, sql string, cutoff time.Time) (int64, error) {
	var total int64
	for {
		sctx, cancel := context.WithTimeout(ctx, w.opts.WriteTimeout)
		tag, err := pool.Exec(sctx, sql, cutoff, w.retentionBatch)
		cancel()
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(w.retentionBatch) {
			return total, nil
		}
		if !sleepCtx(ctx, retentionPause) {
			return total, ctx.Err()
		}
	}
}
