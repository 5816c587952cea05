package report

import (
	"context"
	"time"
)

// runBatcher is the single goroutine that moves records from the queue to
// Postgres or the spool. Being the only writer keeps ordering simple: the spool
// is replayed before the next batch is written, and nothing else touches the
// replay position. It exits after Close's final drain.
func (w *Writer) runBatcher() {
	batch := make([]record, 0, w.opts.BatchSize)
	carried := 0 // records at the head of batch that the last flush held back
	ticker := time.NewTicker(w.opts.FlushInterval)
	defer ticker.Stop()
	for {
		select {
		case <-w.queue.ready:
			batch, carried = w.flushFull(batch, carried)
		case <-ticker.C:
			batch, carried = w.flushFull(batch, carried)
			if len(batch) > 0 {
				batch, carried = w.flush(context.Background(), batch, carried)
			}
			w.housekeeping()
		case <-w.wake:
			w.housekeeping()
		case <-w.stop:
			w.finalDrain(batch, carried)
			return
		}
	}
}

// flushFull takes what waits in the queue and writes it a full batch at a
// time; a partial batch stays for the ticker.
func (w *Writer) flushFull(batch []record, carried int) ([]record, int) {
	for {
		batch = w.takeQueued(batch)
		if len(batch) < w.opts.BatchSize {
			return batch, carried
		}
		batch, carried = w.flush(context.Background(), batch, carried)
	}
}

// takeQueued appends queued records to batch without blocking, up to BatchSize.
func (w *Writer) takeQueued(batch []record) []record {
	return w.queue.take(batch, max(w.opts.BatchSize-len(batch), 0))
}

// housekeeping runs between batches: make overflow appends durable, and replay
// the spool once Postgres is healthy.
func (w *Writer) housekeeping() {
	if err := w.spool.syncIfDirty(); err != nil {
		w.log.Error("report spool fsync failed", "err", err)
	}
	if w.healthy.Load() && w.spool.hasData.Load() {
		if err := w.replay(context.Background()); err != nil {
			w.markUnhealthy(context.Background(), "replay", err)
		}
	}
}

// finalDrain writes what is left at Close, held records included. It does not
// start a spool replay (the next process will), so that shutdown spends its
// grace period on fresh records.
func (w *Writer) finalDrain(batch []record, carried int) {
	ctx := w.closeCtx
	for {
		batch = w.takeQueued(batch)
		if len(batch) == 0 {
			break
		}
		fresh := w.prepare(batch[carried:])
		w.write(ctx, batch[:carried+len(fresh)], false)
		batch, carried = batch[:0], 0
	}
	if err := w.spool.syncIfDirty(); err != nil {
		w.log.Error("report spool fsync failed", "err", err)
	}
}

// flush writes one batch taken from the queue, replaying the spool first. The
// first carried records of batch were held back by the previous flush and are
// prepared already. While Postgres is healthy, flush holds back the records of
// rows that may well finish by the next flush (see holder); it returns batch
// emptied but for those, and their count.
func (w *Writer) flush(ctx context.Context, batch []record, carried int) ([]record, int) {
	fresh := w.prepare(batch[carried:])
	recs := batch[:carried+len(fresh)]
	write := len(recs)
	if w.healthy.Load() && !w.noHold {
		write = w.holder.split(recs, carried)
	}
	w.write(ctx, recs[:write], true)
	held := copy(batch, recs[write:])
	clear(batch[held:len(recs)]) // release the written records' strings
	return batch[:held], held
}

// prepare sanitises the batch in place and removes records that can never be
// stored, counting them as dropped.
func (w *Writer) prepare(batch []record) []record {
	now := w.now()
	kept := batch[:0]
	for i := range batch {
		if reject := batch[i].sanitize(now, w.opts.Redactor); reject != "" {
			w.reject(1, reject)
			continue
		}
		kept = append(kept, batch[i])
	}
	clear(batch[len(kept):]) // release strings of rejected records
	return kept
}

// write stores prepared records: in Postgres when it is healthy (after replaying
// the spool when replayFirst), otherwise or on failure in the spool.
func (w *Writer) write(ctx context.Context, recs []record, replayFirst bool) {
	if len(recs) == 0 {
		return
	}
	if w.healthy.Load() && ctx.Err() == nil {
		var err error
		if replayFirst && w.spool.hasData.Load() {
			err = w.replay(ctx)
		}
		if err == nil {
			var rejected int
			rejected, err = w.upsert(ctx, recs)
			if err == nil {
				w.written.Add(uint64(len(recs) - rejected))
				return
			}
		}
		w.markUnhealthy(ctx, "write", err)
	}
	w.spoolBatch(recs)
}

// spoolBatch appends prepared records to the spool with one fsync.
func (w *Writer) spoolBatch(recs []record) {
	if len(recs) == 0 {
		return
	}
	if err := w.spool.append(recs, true); err != nil {
		w.drop(len(recs), "spool write failed: "+err.Error())
		return
	}
	w.spooled.Add(uint64(len(recs)))
}

// markUnhealthy switches writes to the spool and asks the connector to probe.
// ctx is the caller's outer context: when it has ended (Close's deadline), the
// failure says nothing about Postgres.
func (w *Writer) markUnhealthy(ctx context.Context, op string, err error) {
	if ctx.Err() != nil {
		return
	}
	if w.healthy.Swap(false) {
		w.log.Warn("report store unreachable, spooling", "op", op, "err", err)
	}
	select {
	case w.probe <- struct{}{}:
	default:
	}
}

// stopping reports whether Close has begun the final drain.
func (w *Writer) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}
