package report

import (
	"context"
	"errors"
)

// errStopping ends a replay early when Close begins; the rest of the segment
// stays on disk for the next process.
var errStopping = errors.New("writer stopping")

// replay moves the spool into Postgres, oldest segment first, deleting each
// segment once all of it is committed. It runs on the batcher goroutine, after
// the connector has (re)connected and migrated and before the next batch, so
// replayed records land in the order they were spooled. Replaying a segment
// twice (a failure after a partial commit, or a crash before the delete) is
// harmless: the upserts are rank-guarded and idempotent.
//
// Only database errors are returned (the caller treats them as an outage). A
// segment that cannot be read is set aside, so one bad file never blocks the
// writer or makes a healthy Postgres look unreachable.
func (w *Writer) replay(ctx context.Context) error {
	for !w.stopping() {
		seq, ok := w.spool.nextSegment()
		if !ok {
			return nil
		}
		err := w.replaySegment(ctx, seq)
		var segErr *segmentError
		switch {
		case errors.Is(err, errStopping):
			return nil
		case errors.As(err, &segErr):
			w.log.Error("report spool: unreadable segment set aside", "err", err)
			w.spool.quarantine(seq)
		case err != nil:
			return err
		default:
			w.spool.removeSegment(seq)
		}
		w.replaySeq, w.replayOff = 0, 0
	}
	return nil
}

// replaySegment upserts one segment in BatchSize chunks, resuming after the last
// chunk committed by an earlier, interrupted attempt of this process.
func (w *Writer) replaySegment(ctx context.Context, seq uint64) error {
	if w.replaySeq != seq {
		w.replaySeq, w.replayOff = seq, 0
	}
	// A buffer of its own: the batch that triggered the replay is still held by
	// the caller.
	batch := make([]record, 0, w.opts.BatchSize)
	var batchEnd int64
	commit := func() error {
		if len(batch) == 0 {
			return nil
		}
		recs := w.prepare(batch)
		rejected, err := w.upsert(ctx, recs)
		if err != nil {
			return err
		}
		n := uint64(len(recs) - rejected)
		w.written.Add(n)
		w.replayed.Add(n)
		w.replayOff = batchEnd
		clear(batch)
		batch = batch[:0]
		return nil
	}
	err := w.spool.readSegment(seq, w.replayOff, func(rec *record, end int64) error {
		batch = append(batch, *rec)
		batchEnd = end
		if len(batch) < w.opts.BatchSize {
			return nil
		}
		if w.stopping() {
			return errStopping
		}
		return commit()
	})
	if err != nil {
		return err
	}
	return commit()
}
