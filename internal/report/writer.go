package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/internal/secret"
)

// Store states reported by Writer.State (and shown in /readyz).
const (
	StateOK         = "ok"         // records go to Postgres and the spool is empty
	StateSpooling   = "spooling"   // records wait in the spool for Postgres
	StateConnecting = "connecting" // Postgres not reachable yet; nothing spooled so far
)

// Defaults for zero Options fields.
const (
	DefaultSpoolDir      = "./data/spool"
	DefaultQueueSize     = 8192
	DefaultBatchSize     = 1000
	DefaultFlushInterval = 100 * time.Millisecond
	DefaultWriteTimeout  = 5 * time.Second
)

// Options configures a Writer. Zero fields take the documented defaults.
type Options struct {
	// DatabaseURL is the Postgres DSN (required). It is parsed by NewWriter, but
	// Postgres does not need to be up for NewWriter or Start. It is a secret
	// because it usually carries the password, and Options may be printed.
	DatabaseURL secret.String
	// SpoolDir holds the spool segments while Postgres is unreachable.
	// Default ./data/spool. One process per directory (it is locked).
	SpoolDir string
	// AutoMigrate applies the embedded migrations (goose up) every time the
	// connection to Postgres is (re)established, before the spool is replayed.
	AutoMigrate bool
	// QueueSize bounds the in-memory queue between Record* and the batcher.
	// Default 8192 (about 4 MiB, allocated up front). When full, Record* appends to the spool itself.
	QueueSize int
	// BatchSize is the most records written in one statement. Default 1000
	// (DefaultBatchSize): the single statement writes 80,000 rows/s or more
	// at this size (BENCHMARKS.md), and every buffer it needs (the column
	// arrays, pgx's encoded message) grows to the largest batch and stays, so
	// 5000 cost the gateway's peak RSS a few MiB for no throughput it needs.
	BatchSize int
	// FlushInterval is the longest a record waits in a partial batch: the bound
	// on how stale the ledger is under light traffic. Records of a request
	// still in flight may wait one interval more (see holder), so that a
	// request finishing by then is written once. Default 100ms.
	FlushInterval time.Duration
	// WriteTimeout bounds one batch transaction; past it Postgres counts as
	// unreachable and the batch goes to the spool. Default 5s.
	WriteTimeout time.Duration
	// Retention deletes rows whose created_at is older than this, in small
	// batches; 0 keeps everything. (The config layer's default is 720h.)
	Retention time.Duration
	// Replica names this process (GATEWAY_REPLICA_ID). RecordRequest stamps
	// it on every request record that does not name one, so a record spooled
	// during an outage and replayed later, even by another process reading
	// this spool, keeps the replica that served it.
	Replica string
	// Logger receives the writer's logs; nil means slog.Default().
	Logger *slog.Logger
	// Redactor holds the secrets the gateway knows (provider keys, its
	// tokens and passwords). Every text column is cleaned of them before a
	// record is written or spooled, error_message above all: providers echo
	// keys in their error bodies. Nil: only the shape rules apply.
	Redactor *secret.Redactor
}

// Stats are cumulative row counts since NewWriter, plus the current queue depth.
//
// Every record accepted by Record* ends in exactly one of Written (directly),
// Spooled or Dropped; Replayed counts records later moved from the spool into
// Postgres (also from a previous process's spool), and they are included in
// Written too. Counts are of records as recorded, before the batch merge.
type Stats struct {
	QueueDepth int
	Written    uint64
	Spooled    uint64
	Replayed   uint64
	Dropped    uint64
}

// ErrNotFound is returned by Timeline when there is no such request.
var ErrNotFound = errors.New("report: request not found")

// ErrUnavailable is returned by reads while Postgres has not been reached yet.
var ErrUnavailable = errors.New("report: store not connected")

// Writer persists request and candidate records to Postgres without ever making
// the request path wait on I/O; see the package documentation.
type Writer struct {
	opts    Options
	log     *slog.Logger
	poolCfg *pgxpool.Config
	queue   *recordQueue
	spool   *spool
	now     func() time.Time // injected clock, for retention and CreatedAt defaults

	// mu orders Record* against Close: Record* holds it shared while it hands a
	// record to the queue or the spool, Close takes it exclusively to stop
	// accepting, so no record can slip in after the final drain.
	mu      sync.RWMutex
	closed  bool
	started bool

	pool    atomic.Pointer[pgxpool.Pool]
	healthy atomic.Bool   // Postgres answered and the schema is there
	probe   chan struct{} // batcher -> connector: writing failed, check again
	wake    chan struct{} // connector -> batcher: healthy again, replay now

	written  atomic.Uint64
	spooled  atomic.Uint64
	replayed atomic.Uint64
	dropped  atomic.Uint64

	cancel      context.CancelFunc // stops connector and retention
	bg          sync.WaitGroup     // connector and retention
	stop        chan struct{}      // closed by Close: batcher drains and exits
	batcherDone chan struct{}
	closeCtx    context.Context // set before stop is closed
	closeOnce   sync.Once
	closeErr    error

	// Tunables; tests shorten them before Start.
	backoffMin     time.Duration
	backoffMax     time.Duration
	migrateTimeout time.Duration
	retentionFirst time.Duration
	retentionEvery time.Duration
	retentionBatch int
	noHold         bool // write every record at its first flush (see holder)

	stats statsCache // settled buckets of the provider statistics

	dropLog   logLimiter
	connLog   logLimiter
	rejectLog logLimiter

	// Owned by the batcher goroutine.
	merger    *merger
	args      *batchArgs
	holder    *holder
	replaySeq uint64 // segment being replayed and how far it is committed,
	replayOff int64  // so a retry after an outage does not re-count rows
}

// NewWriter validates opts and opens (creating if needed) the spool directory.
// It does not contact Postgres; Start does, in the background.
func NewWriter(opts Options) (*Writer, error) {
	if opts.DatabaseURL.Empty() {
		return nil, errors.New("report: DatabaseURL is required")
	}
	poolCfg, err := pgxpool.ParseConfig(opts.DatabaseURL.Reveal())
	if err != nil {
		// pgconn redacts the password in its parse errors.
		return nil, fmt.Errorf("report: parse database url: %w", err)
	}
	// A few connections suffice: one for the batcher, one for retention, the rest
	// for admin reads. Nothing is dialled until the first use.
	poolCfg.MaxConns = 4
	poolCfg.MinConns = 0
	// No parallel query on the gateway's sessions: its writes never use it,
	// and its admin reads are short index walks whose parallel plans spend
	// more starting workers than they save (BENCHMARKS.md, "Admin reads").
	// A DSN that sets it otherwise wins.
	if _, set := poolCfg.ConnConfig.RuntimeParams["max_parallel_workers_per_gather"]; !set {
		poolCfg.ConnConfig.RuntimeParams["max_parallel_workers_per_gather"] = "0"
	}
	if poolCfg.ConnConfig.ConnectTimeout == 0 {
		poolCfg.ConnConfig.ConnectTimeout = DefaultWriteTimeout
	}
	if opts.SpoolDir == "" {
		opts.SpoolDir = DefaultSpoolDir
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("report: negative Retention %s", opts.Retention)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "report")
	sp, err := openSpool(opts.SpoolDir, log)
	if err != nil {
		return nil, err
	}
	w := &Writer{
		opts:           opts,
		log:            log,
		poolCfg:        poolCfg,
		queue:          newRecordQueue(opts.QueueSize, opts.BatchSize),
		spool:          sp,
		now:            time.Now,
		probe:          make(chan struct{}, 1),
		wake:           make(chan struct{}, 1),
		stop:           make(chan struct{}),
		batcherDone:    make(chan struct{}),
		backoffMin:     100 * time.Millisecond,
		backoffMax:     10 * time.Second,
		migrateTimeout: time.Minute,
		retentionFirst: 30 * time.Second,
		retentionEvery: 10 * time.Minute,
		retentionBatch: 1000,
		dropLog:        logLimiter{every: 10 * time.Second},
		connLog:        logLimiter{every: 30 * time.Second},
		rejectLog:      logLimiter{every: 10 * time.Second},
		merger:         newMerger(opts.BatchSize),
		args:           &batchArgs{},
		holder:         newHolder(),
	}
	return w, nil
}

// Start launches the connector (dial with backoff, migrate, then signal the
// batcher), the batcher and the retention job. It never blocks on Postgres.
//
// ctx supplies values only: its cancellation does not stop the writer, because
// records produced during a graceful shutdown (after the signal context is
// cancelled) must still be written. The goroutines stop in Close.
func (w *Writer) Start(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.closed {
		return
	}
	w.started = true
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	w.bg.Add(2)
	go func() {
		defer w.bg.Done()
		w.runConnector(bg)
	}()
	go func() {
		defer w.bg.Done()
		w.runRetention(bg)
	}()
	go func() {
		defer close(w.batcherDone)
		w.runBatcher()
	}()
}

// RecordRequest hands r to the writer. It never waits on I/O unless the queue is
// full, in which case it appends r to the spool file (no database I/O).
func (w *Writer) RecordRequest(r Request) {
	if r.Replica == "" {
		r.Replica = w.opts.Replica
	}
	w.enqueue(record{kind: kindRequest, req: r})
}

// RecordCandidate hands c to the writer; see RecordRequest.
func (w *Writer) RecordCandidate(c Candidate) {
	w.enqueue(record{kind: kindCandidate, cand: c})
}

func (w *Writer) enqueue(rec record) {
	// The read lock orders the push with Close (nothing is queued once it
	// drains) and covers no I/O: a spool write held under it would stall
	// Close, and behind Close's pending lock every request's record.
	w.mu.RLock()
	closed := w.closed
	queued := !closed && w.queue.push(&rec)
	w.mu.RUnlock()
	if closed {
		w.drop(1, "writer closed")
		return
	}
	if queued {
		return
	}
	// Queue full: Postgres is slow or down and the batcher is behind. Spool the
	// record here rather than block the request or lose it. A Close racing
	// this write may close the spool first: the record is then dropped and
	// counted, as one arriving after Close is.
	if reject := rec.sanitize(w.now(), w.opts.Redactor); reject != "" {
		w.reject(1, reject)
		return
	}
	if err := w.spool.append([]record{rec}, false); err != nil {
		w.drop(1, "queue full and spool write failed: "+err.Error())
		return
	}
	w.spooled.Add(1)
}

// drop counts lost records and logs, at most once per interval.
func (w *Writer) drop(n int, why string) {
	w.dropped.Add(uint64(n))
	if ok, suppressed := w.dropLog.allow(time.Now()); ok {
		w.log.Error("report records dropped", "count", n, "reason", why,
			"suppressed_logs", suppressed, "dropped_total", w.dropped.Load())
	}
}

// reject counts a record that can never be stored (a caller bug such as an
// unknown status) as dropped; writing it would fail its whole batch forever.
func (w *Writer) reject(n int, why string) {
	w.dropped.Add(uint64(n))
	if ok, suppressed := w.rejectLog.allow(time.Now()); ok {
		w.log.Error("report record rejected", "count", n, "reason", why, "suppressed_logs", suppressed)
	}
}

// State reports where records currently go: StateOK, StateSpooling or
// StateConnecting.
func (w *Writer) State() string {
	switch {
	case w.spool.hasData.Load():
		return StateSpooling
	case w.healthy.Load():
		return StateOK
	default:
		return StateConnecting
	}
}

// Stats returns the counters; cheap enough for every metrics scrape.
func (w *Writer) Stats() Stats {
	return Stats{
		QueueDepth: w.queue.len(),
		Written:    w.written.Load(),
		Spooled:    w.spooled.Load(),
		Replayed:   w.replayed.Load(),
		Dropped:    w.dropped.Load(),
	}
}

// Close stops accepting records, drains the queue to Postgres (or, when that
// fails or ctx ends, to the spool), stops every goroutine and releases the pool
// and the spool. Records recorded after Close are counted as dropped. Close is
// idempotent; later calls return the first call's result.
func (w *Writer) Close(ctx context.Context) error {
	w.closeOnce.Do(func() { w.closeErr = w.close(ctx) })
	return w.closeErr
}

func (w *Writer) close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	started := w.started
	w.mu.Unlock()

	if started {
		w.cancel()
		w.bg.Wait()
		w.closeCtx = ctx
		close(w.stop)
		<-w.batcherDone
	} else {
		// Never started: nothing can reach Postgres, keep the queue on disk.
		w.drainToSpool()
	}
	if p := w.pool.Load(); p != nil {
		p.Close()
	}
	if err := w.spool.close(); err != nil {
		return fmt.Errorf("report: close spool: %w", err)
	}
	return nil
}

// drainToSpool moves everything queued to the spool (used when never started).
func (w *Writer) drainToSpool() {
	batch := make([]record, 0, w.opts.BatchSize)
	for {
		batch = w.takeQueued(batch[:0])
		if len(batch) == 0 {
			return
		}
		w.spoolBatch(w.prepare(batch))
	}
}
