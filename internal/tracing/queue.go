package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// queue is the span processor between ended spans and the exporter: a
// bounded buffer and one goroutine that exports in batches. The SDK's
// BatchSpanProcessor drops silently when full; this one counts every span
// it lets go (a full queue, a failed or timed-out export), so that a
// collector that is down or slow shows on the metrics while requests never
// wait for it.
//
// Ended spans wait in a mutex-guarded slice, not a channel: a send to the
// exporting goroutine parked on a channel wakes it, one futex hand-off and
// context switch per span (two spans a request), while the slice is taken
// on the export tick, or at once when a batch is full.
type queue struct {
	exp     sdktrace.SpanExporter
	mu      sync.Mutex
	pending []sdktrace.ReadOnlySpan // ended spans not yet taken; at most size
	spare   []sdktrace.ReadOnlySpan // the run goroutine's: the last taken slice, emptied
	size    int
	full    chan struct{} // a batch is pending: export now (cap 1)
	flush   chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	stopped atomic.Bool
	once    sync.Once
	batch   int
	delay   time.Duration
	timeout time.Duration
	dropped func(n int)
}

var _ sdktrace.SpanProcessor = (*queue)(nil)

func newQueue(exp sdktrace.SpanExporter, size, batch int, delay, timeout time.Duration, dropped func(int)) *queue {
	if size <= 0 {
		size = 2048
	}
	if batch <= 0 || batch > size {
		batch = min(512, size)
	}
	if delay <= 0 {
		delay = time.Second
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if dropped == nil {
		dropped = func(int) {}
	}
	q := &queue{exp: exp, size: size, full: make(chan struct{}, 1), flush: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}), batch: batch, delay: delay, timeout: timeout, dropped: dropped}
	go q.run()
	return q
}

func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, or drops it when the queue is full: the
// request that ended it never waits.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if q.stopped.Load() {
		q.dropped(1)
		return
	}
	q.mu.Lock()
	n := len(q.pending)
	if n >= q.size {
		q.mu.Unlock()
		q.dropped(1)
		return
	}
	q.pending = append(q.pending, s)
	q.mu.Unlock()
	if n+1 == q.batch {
		select {
		case q.full <- struct{}{}:
		default: // already told
		}
	}
}

func (q *queue) run() {
	defer close(q.done)
	tick := time.NewTicker(q.delay)
	defer tick.Stop()
	for {
		select {
		case <-q.full:
			q.exportPending()
		case <-tick.C:
			q.exportPending()
		case ack := <-q.flush:
			q.exportPending()
			close(ack)
		case <-q.stop:
			q.exportPending()
			return
		}
	}
}

// exportPending takes every span ended so far and exports them in batches.
// Taking swaps the pending slice for the emptied spare one, so neither is
// reallocated once grown.
func (q *queue) exportPending() {
	q.mu.Lock()
	taken := q.pending
	q.pending = q.spare[:0]
	q.mu.Unlock()
	for rest := taken; len(rest) > 0; {
		n := min(len(rest), q.batch)
		q.export(rest[:n])
		rest = rest[n:]
	}
	clear(taken) // the spans are the exporter's now: keep no reference
	q.spare = taken[:0]
}

// export sends buf; its spans are counted dropped when the export fails.
func (q *queue) export(buf []sdktrace.ReadOnlySpan) {
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	if err := q.exp.ExportSpans(ctx, buf); err != nil {
		q.dropped(len(buf))
	}
	cancel()
}

// ForceFlush exports what is queued now, within ctx.
func (q *queue) ForceFlush(ctx context.Context) error {
	if q.stopped.Load() {
		return nil
	}
	ack := make(chan struct{})
	select {
	case q.flush <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Shutdown exports what is queued, stops the goroutine and shuts the
// exporter down. A ctx that ends first returns its error; the goroutine
// still ends within one export's timeout.
func (q *queue) Shutdown(ctx context.Context) error {
	q.once.Do(func() {
		q.stopped.Store(true)
		close(q.stop)
	})
	select {
	case <-q.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return q.exp.Shutdown(ctx)
}
