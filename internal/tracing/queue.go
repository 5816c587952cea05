package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// queue is the span processor between ended spans and the exporter: a
// bounded channel and one goroutine that exports in batches. The SDK's
// BatchSpanProcessor drops silently when full; this one counts every span
// it lets go (a full queue, a failed or timed-out export), so that a
// collector that is down or slow shows on the metrics while requests never
// wait for it.
type queue struct {
	exp     sdktrace.SpanExporter
	spans   chan sdktrace.ReadOnlySpan
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
	q := &queue{exp: exp, spans: make(chan sdktrace.ReadOnlySpan, size), flush: make(chan chan struct{}),
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
	select {
	case q.spans <- s:
	default:
		q.dropped(1)
	}
}

func (q *queue) run() {
	defer close(q.done)
	buf := make([]sdktrace.ReadOnlySpan, 0, q.batch)
	tick := time.NewTicker(q.delay)
	defer tick.Stop()
	for {
		select {
		case s := <-q.spans:
			if buf = append(buf, s); len(buf) >= q.batch {
				buf = q.export(buf)
			}
		case <-tick.C:
			buf = q.export(buf)
		case ack := <-q.flush:
			buf = q.export(q.drain(buf))
			close(ack)
		case <-q.stop:
			q.export(q.drain(buf))
			return
		}
	}
}

// drain takes every span queued now, exporting full batches on the way.
func (q *queue) drain(buf []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for {
		select {
		case s := <-q.spans:
			if buf = append(buf, s); len(buf) >= q.batch {
				buf = q.export(buf)
			}
		default:
			return buf
		}
	}
}

// export sends buf and returns it emptied; its spans are counted dropped
// when the export fails.
func (q *queue) export(buf []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(buf) == 0 {
		return buf
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	if err := q.exp.ExportSpans(ctx, buf); err != nil {
		q.dropped(len(buf))
	}
	cancel()
	clear(buf)
	return buf[:0]
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
