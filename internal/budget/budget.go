package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultNamespace starts every key, as in internal/quota.
const DefaultNamespace = "llmgw"

// DefaultReservationTTL is how long a reservation holds budget when its
// request never settles (GATEWAY_BUDGET_RESERVATION_TTL).
const DefaultReservationTTL = 10 * time.Minute

const (
	// opTimeout bounds one Redis call on the request path: past it the
	// replica goes degraded rather than stall the request.
	opTimeout = 250 * time.Millisecond
	// probeEvery is how often a degraded replica asks whether Redis is back.
	probeEvery = 250 * time.Millisecond
	// recentKeep is how long this replica remembers its own settles for a
	// rebuild: the ledger has a record at most two report flush intervals
	// (default 100 ms) after it was settled; 5 s leaves room for a slow
	// Postgres.
	recentKeep = 5 * time.Second
	// maxPending bounds the settles kept for Redis while it is away.
	maxPending = 100_000
	// DefaultLedgerLag is Options.LedgerLag's default: a finished
	// request's record is in Postgres one or two report flush intervals
	// (100 ms by default) after it was handed over, and the request
	// settles after that.
	DefaultLedgerLag = 300 * time.Millisecond
)

// micro is one micro-dollar in USD.
const micro = 1e6

// Ledger is the truth the engine rebuilds a window's spend from
// (report.Writer.SpentSince: the sum of requests.cost_usd since a time).
type Ledger interface {
	SpentSince(ctx context.Context, owner, name string, since time.Time) (float64, error)
}

// Replicas counts the replicas last seen alive (quota.Store provides it).
type Replicas interface{ Alive() int }

// Options configures Budgets.
type Options struct {
	// Redis shares spend and reservations between replicas; nil keeps
	// them in this process only. Every call carries a 250 ms deadline in
	// its context; configure the client as internal/quota does
	// (ContextTimeoutEnabled, MaxRetries -1, DialerRetries 1, socket
	// timeouts off) so that deadline is what bounds it.
	Redis redis.UniversalClient
	// Namespace starts every key; DefaultNamespace when empty.
	Namespace string
	// ReservationTTL is GATEWAY_BUDGET_RESERVATION_TTL; default 10m.
	ReservationTTL time.Duration
	// Ledger rebuilds a window's spend; nil counts spend from zero.
	Ledger Ledger
	// LedgerLag bounds how long a settled request takes to reach the
	// ledger: a rebuild in Redis waits that long after finding a counter
	// missing, then trusts the ledger with every settle older than that
	// (DefaultLedgerLag when 0; negative: the ledger holds a settle at
	// once, as test doubles do).
	LedgerLag time.Duration
	// Replicas divides the remaining budget while Redis is away; nil is 1.
	// (quota.Store counts them as Replicas(); a one-line adapter fits.)
	Replicas Replicas
	// Now is the clock for windows and, when set, for reservation expiry
	// in Redis too (passed into the scripts instead of Redis TIME), so
	// tests can age reservations without sleeping. Production leaves it
	// nil: windows follow this host's clock, expiry Redis's.
	Now    func() time.Time
	Logger *slog.Logger
}

// Budgets decides whether a request's estimated cost fits its budgets.
type Budgets struct {
	opts  Options
	st    store
	redis bool
	fake  bool
	nonce string
	seq   atomic.Uint64

	mu     sync.Mutex
	limits map[budgetID]Limit
	known  map[string]figures // last figures seen per window (Redis mode)
	recent map[string][]recentSettle
	// recentSwept is when sweepRecentLocked last forgot old lists.
	recentSwept time.Time

	// degraded mode (Redis only)
	degraded  atomic.Bool
	share     map[string]int64          // this replica's share per window, fixed on entry
	live      map[*Reservation]struct{} // made on the shares and not settled yet
	used      map[string]int64          // reserved and settled against the share
	pending   []pendingSettle           // settles Redis has not seen
	lastProbe time.Time
	probing   sync.Mutex
}

type budgetID struct {
	owner Owner
	per   Per
}

type recentSettle struct {
	at   time.Time
	cost int64
}

type pendingSettle struct {
	ss   []slot
	id   string
	cost int64
	atMs int64 // when it settled: see settleScript
}

// New returns the engine; SetLimits gives it its budgets.
func New(opts Options) *Budgets {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.ReservationTTL <= 0 {
		opts.ReservationTTL = DefaultReservationTTL
	}
	if opts.LedgerLag == 0 {
		opts.LedgerLag = DefaultLedgerLag
	}
	opts.LedgerLag = max(opts.LedgerLag, 0)
	fake := opts.Now != nil
	if !fake {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	b := &Budgets{
		opts:   opts,
		fake:   fake,
		nonce:  hex.EncodeToString(nonce[:]),
		limits: map[budgetID]Limit{},
		known:  map[string]figures{},
		recent: map[string][]recentSettle{},
		share:  map[string]int64{},
		used:   map[string]int64{},
		live:   map[*Reservation]struct{}{},
	}
	if opts.Redis != nil {
		b.st = &redisStore{rdb: opts.Redis, prefix: opts.Namespace + ":{b}:"}
		b.redis = true
	} else {
		b.st = newMemStore()
	}
	return b
}

// limitMicros is a limit in micro-dollars, rounded down: rounding never
// lets spend pass the configured figure.
func limitMicros(usd float64) int64 {
	if usd <= 0 || math.IsNaN(usd) {
		return 0
	}
	return int64(math.Floor(usd*micro + 1e-6))
}

// spendMicros is ledger spend in micro-dollars, rounded up for the same
// reason.
func spendMicros(usd float64) int64 {
	if usd <= 0 || math.IsNaN(usd) {
		return 0
	}
	return int64(math.Ceil(usd*micro - 1e-6))
}

func usd(m int64) float64 { return float64(m) / micro }

func (b *Budgets) nowMs() int64 {
	if b.redis && !b.fakeClock() {
		return 0
	}
	return b.opts.Now().UnixMilli()
}

// fakeClock: Options.Now was set, so the scripts are told the time.
func (b *Budgets) fakeClock() bool { return b.fake }

// SetLimits replaces the budgets (at start and on routes reload). Spend
// lives per (owner, window), not per limit, so a changed figure keeps its
// spend; a budget new to this replica has its current window rebuilt from
// the ledger now (SET NX: a window other replicas already count is kept).
// The limits apply even when a rebuild fails; the error says which, and
// the rebuild is retried at the budget's next request.
func (b *Budgets) SetLimits(ctx context.Context, limits []Limit) error {
	next := map[budgetID]Limit{}
	var bad []error
	for _, l := range limits {
		if !l.Per.Valid() {
			bad = append(bad, fmt.Errorf("budget %s: unknown window %q", l.Owner, l.Per))
			continue
		}
		next[budgetID{l.Owner, l.Per}] = l
	}
	b.mu.Lock()
	var fresh []Limit
	for id, l := range next {
		if _, ok := b.limits[id]; !ok {
			fresh = append(fresh, l)
		}
	}
	b.limits = next
	b.mu.Unlock()
	now := b.opts.Now()
	readAt := time.Now().Add(b.opts.LedgerLag) // one wait for all of them
	for _, l := range fresh {
		if err := b.rebuild(ctx, b.slotOf(l, now), l, now, readAt); err != nil {
			bad = append(bad, err)
		}
	}
	return errors.Join(bad...)
}

func (b *Budgets) slotOf(l Limit, now time.Time) slot {
	return slot{base: baseKey(l.Owner, l.Per, now), limit: limitMicros(l.USD), expireAt: counterExpiry(l.Per, now)}
}

// rebuild seeds a window's missing counter from the ledger. Alone the
// ledger lags: the settles of the last moments, on every replica, are not
// in it yet. In Redis the rebuild therefore reads it only readAt
// (LedgerLag after the counter was found missing), when every settle
// made before the counter went missing is in it, and the counter's cut
// says the read holds every settle up to LedgerLag before the read. The
// settles that found the counter missing meanwhile were kept in Redis
// with their time; the seed adds those after the cut, and a settle
// replayed later (after an outage) is added only if it is after the cut.
// So each settle is counted once, but for those within LedgerLag of the
// read that the read already held (counted twice: towards refusing).
// In memory the counter is only ever missing for a budget or window new
// to this replica; this replica's settles of the last seconds are added
// (the ledger may not hold them yet).
func (b *Budgets) rebuild(ctx context.Context, s slot, l Limit, now, readAt time.Time) error {
	if b.redis {
		if err := b.awaitLedger(ctx, s, readAt); err != nil {
			return err
		}
	}
	cut := b.opts.Now().Add(-b.opts.LedgerLag).UnixMilli()
	spent, err := b.ledgerSpent(ctx, l, now)
	if err != nil {
		return err
	}
	if !b.redis {
		b.mu.Lock()
		spent += b.recentLocked(s.base, now)
		b.mu.Unlock()
	}
	octx, cancel := b.opContext(ctx)
	defer cancel()
	if err := b.st.seed(octx, s, spent, cut); err != nil {
		return b.storeErr(ctx, err)
	}
	return nil
}

// maxLedgerWait bounds how long a rebuild waits for the settles kept
// meanwhile to reach the ledger.
const maxLedgerWait = 2 * time.Second

// awaitLedger waits until readAt, then while a settle kept for the
// missing counter is younger than LedgerLag (the requests in flight when
// Redis lost it end in the first moments; until their records are in the
// ledger, a read might or might not hold them, and the seed would count
// them twice), at most maxLedgerWait in all.
func (b *Budgets) awaitLedger(ctx context.Context, s slot, readAt time.Time) error {
	deadline := readAt.Add(maxLedgerWait)
	for {
		if err := sleepUntil(ctx, readAt); err != nil {
			return err
		}
		octx, cancel := b.opContext(ctx)
		youngest, err := b.st.youngestKept(octx, s)
		cancel()
		if err != nil {
			return b.storeErr(ctx, err)
		}
		ready := time.UnixMilli(youngest).Add(b.opts.LedgerLag)
		if youngest == 0 || !b.opts.Now().Before(ready) || !time.Now().Before(deadline) {
			return nil
		}
		readAt = time.Now().Add(ready.Sub(b.opts.Now()))
		if readAt.After(deadline) {
			readAt = deadline
		}
	}
}

func sleepUntil(ctx context.Context, at time.Time) error {
	wait := time.Until(at)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (b *Budgets) ledgerSpent(ctx context.Context, l Limit, now time.Time) (int64, error) {
	if b.opts.Ledger == nil {
		return 0, nil
	}
	f, err := b.opts.Ledger.SpentSince(ctx, l.Owner.Kind, l.Owner.Name, l.Per.Start(now))
	if err != nil {
		return 0, &RebuildError{Limit: l, Err: err}
	}
	return spendMicros(f), nil
}

// recentLocked sums this replica's settles into base in the last
// recentKeep, forgetting older ones.
func (b *Budgets) recentLocked(base string, now time.Time) int64 {
	var sum int64
	rs := b.recent[base]
	keep := rs[:0]
	for _, r := range rs {
		if now.Sub(r.at) < recentKeep {
			keep = append(keep, r)
			sum += r.cost
		}
	}
	if len(keep) == 0 {
		delete(b.recent, base)
	} else {
		b.recent[base] = keep
	}
	return sum
}

// forgetLocked drops base's settles older than recentKeep from the front
// of its list (settles are appended in time order) and returns what is
// left: without it a budget settled steadily kept every settle it ever
// made, since only a rebuild or an outage read the list.
func (b *Budgets) forgetLocked(base string, now time.Time) []recentSettle {
	rs := b.recent[base]
	n := 0
	for n < len(rs) && now.Sub(rs[n].at) >= recentKeep {
		n++
	}
	if n == 0 {
		return rs
	}
	return append(rs[:0], rs[n:]...)
}

// sweepRecentLocked, at most once per recentKeep, forgets the lists of
// windows nobody settles into any more (a day that ended).
func (b *Budgets) sweepRecentLocked(now time.Time) {
	if now.Sub(b.recentSwept) < recentKeep {
		return
	}
	b.recentSwept = now
	for base := range b.recent {
		b.recentLocked(base, now)
	}
}

// RebuildError is a window whose spend could not be read from the ledger;
// the engine cannot decide for it until the ledger answers.
type RebuildError struct {
	Limit Limit
	Err   error
}

func (e *RebuildError) Error() string {
	return fmt.Sprintf("budget %s, %s: rebuild from the ledger: %v", e.Limit.Owner, e.Limit.Per, e.Err)
}

func (e *RebuildError) Unwrap() error { return e.Err }

// ExceededError is a refusal: the request's estimate does not fit Limit.
type ExceededError struct {
	Limit Limit
	// RetryAfter is the time to the window's end; 0 for Total.
	RetryAfter time.Duration
	// Remaining is what the budget has left (USD), at least 0.
	Remaining float64
}

func (e *ExceededError) Error() string {
	return "budget exceeded: " + e.Limit.Owner.String() + ", " + string(e.Limit.Per)
}

func (b *Budgets) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, opTimeout)
}

// storeErr turns a failed store call into the engine's view: a Redis that
// does not answer makes the replica degraded; a reply Redis gave (a script
// error) or the caller's own cancellation does not.
func (b *Budgets) storeErr(ctx context.Context, err error) error {
	if !b.redis || ctx.Err() != nil {
		return err
	}
	var re redis.Error
	if errors.As(err, &re) && !errors.Is(err, errShortReply) {
		return err
	}
	b.enterDegraded(err)
	return errDegraded
}

var (
	errShortReply = errors.New("budget: unexpected reply from redis")
	errDegraded   = errors.New("budget: redis is not answering")
)
