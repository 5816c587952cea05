package report

import "sync"

// recordQueue holds records between Record* and the batcher: a slice behind
// a mutex rather than a channel. A record handed to a channel whose reader
// is parked wakes that reader, and on a stream's path that was a futex call
// and a thread handoff for each of its six records, taken from the cores
// that serve the stream's first chunk. The batcher needs no wake-up per
// record: it takes what waits on its ticker, and is signalled only when a
// whole batch is waiting.
type recordQueue struct {
	mu    sync.Mutex
	recs  []record // waiting, oldest first
	limit int      // most records waiting; push refuses beyond it
	batch int      // this many waiting signal ready
	ready chan struct{}
}

func newRecordQueue(limit, batch int) *recordQueue {
	return &recordQueue{limit: limit, batch: min(batch, limit), ready: make(chan struct{}, 1)}
}

// push appends rec unless the queue is full; it never blocks on the
// batcher.
func (q *recordQueue) push(rec *record) bool {
	q.mu.Lock()
	if len(q.recs) >= q.limit {
		q.mu.Unlock()
		return false
	}
	q.recs = append(q.recs, *rec)
	n := len(q.recs)
	q.mu.Unlock()
	if n == q.batch {
		select {
		case q.ready <- struct{}{}:
		default: // already signalled
		}
	}
	return true
}

// take appends up to n waiting records to dst, oldest first, and removes
// them from the queue.
func (q *recordQueue) take(dst []record, n int) []record {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, len(q.recs))
	dst = append(dst, q.recs[:n]...)
	rest := copy(q.recs, q.recs[n:])
	clear(q.recs[rest:]) // drop string references so the GC can reclaim them
	q.recs = q.recs[:rest]
	return dst
}

// len is the number of records waiting.
func (q *recordQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.recs)
}
