package api

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/upstream"
)

// accessLog writes one info line per API request. The line is formatted and
// written by its own goroutine, not the request's: a log write is a syscall,
// and on a non-streaming answer it would otherwise sit between the handler's
// last write and net/http sending the response. When the writer falls
// behind, lines are dropped (and the drop counted in the log) rather than
// slowing requests down.
type accessLog struct {
	log     *slog.Logger
	lines   chan accessLine
	stop    chan struct{}
	done    chan struct{}
	dropped atomic.Uint64
	once    sync.Once
}

// accessLine is one request's line, held by value so that queueing it
// allocates nothing.
type accessLine struct {
	id         uuid.UUID
	client     string
	model      string
	route      string
	status     string
	code       int
	errorType  string
	tried      int
	stream     bool
	duration   time.Duration
	firstByte  time.Duration
	hasFirstBy bool
	traceID    string // "" untraced: the attribute is left out
}

// accessLogQueue bounds the lines waiting for the writer.
const accessLogQueue = 4096

// newAccessLog starts the writer; nil (access log off) is a valid *accessLog
// whose methods do nothing.
func newAccessLog(log *slog.Logger) *accessLog {
	a := &accessLog{log: log, lines: make(chan accessLine, accessLogQueue),
		stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	return a
}

// request queues the line of a planned request once its outcome is known.
func (a *accessLog) request(req *candidates.Request, out *candidates.Outcome) {
	if a == nil {
		return
	}
	a.put(accessLine{
		id: req.ID, client: req.Client, model: req.Model, route: req.Route.String(), status: out.Status,
		code: out.StatusCode, errorType: out.ErrorType, tried: out.Tried, stream: req.Stream,
		duration: time.Since(req.Received), firstByte: out.FirstByte, hasFirstBy: out.FirstByte > 0,
		traceID: out.TraceID,
	})
}

// rejected queues the line of a request refused before planning; traceID
// is its trace, "" untraced.
func (a *accessLog) rejected(id uuid.UUID, traceID string, route upstream.Route, status int, code string, received time.Time) {
	if a == nil {
		return
	}
	a.put(accessLine{id: id, route: route.String(), status: "rejected", code: status, errorType: code,
		duration: time.Since(received), traceID: traceID})
}

func (a *accessLog) put(l accessLine) {
	select {
	case a.lines <- l:
	default:
		a.dropped.Add(1)
	}
}

// accessLogTick is how often the writer drains the queue. Waking per line
// cost every request a goroutine wake-up (a futex call and a context
// switch, tens of microseconds on a small VM, measured as a tenth of a
// stream's CPU); lines now reach the log at most this late.
const accessLogTick = 50 * time.Millisecond

func (a *accessLog) run() {
	defer close(a.done)
	var reported uint64
	tick := time.NewTicker(accessLogTick)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-a.stop:
			a.drain()
			a.reportDropped(&reported)
			return
		}
		a.drain()
		a.reportDropped(&reported)
	}
}

// logHold is a log handler whose output can be held, so that lines
// written together go out in one write (logsink.Handler).
type logHold interface {
	Hold()
	Release() error
}

// drain writes the lines queued now: in one write when the logger's
// output can be held, rather than a system call per request.
func (a *accessLog) drain() {
	if h, ok := a.log.Handler().(logHold); ok && len(a.lines) > 0 {
		h.Hold()
		defer func() { _ = h.Release() }()
	}
	for {
		select {
		case l := <-a.lines:
			a.write(l)
		default:
			return
		}
	}
}

func (a *accessLog) reportDropped(reported *uint64) {
	if n := a.dropped.Load(); n > *reported {
		a.log.Warn("access log fell behind; lines dropped", "dropped", n-*reported)
		*reported = n
	}
}

func (a *accessLog) write(l accessLine) {
	attrs := [...]slog.Attr{
		{}, // trace_id, when there is one
		slog.String("request_id", l.id.String()),
		slog.String("client", l.client),
		slog.String("model", l.model),
		slog.String("route", l.route),
		slog.Bool("stream", l.stream),
		slog.String("status", l.status),
		slog.Int("code", l.code),
		slog.String("error_type", l.errorType),
		slog.Int("candidates_tried", l.tried),
		slog.Float64("duration_ms", ms(l.duration)),
		slog.Any("first_byte_ms", nil),
	}
	if l.hasFirstBy {
		attrs[len(attrs)-1] = slog.Float64("first_byte_ms", ms(l.firstByte))
	}
	line := attrs[1:]
	if l.traceID != "" {
		attrs[0] = slog.String("trace_id", l.traceID)
		line = attrs[:]
	}
	a.log.LogAttrs(context.Background(), slog.LevelInfo, "request", line...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// close flushes the queued lines and stops the writer. Lines that arrive
// later are dropped; safe to call more than once.
func (a *accessLog) close() {
	if a == nil {
		return
	}
	a.once.Do(func() { close(a.stop) })
	<-a.done
}
