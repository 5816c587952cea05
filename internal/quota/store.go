package quota

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultNamespace starts every key and channel name.
const DefaultNamespace = "llmgw"

// names are the store's keys and channels under one namespace.
type names struct {
	prefix, slots, replicas, freed, health string
}

// newNames names keys and channels. Keys are per database; pub/sub is not,
// so channels carry the database number: fleets on two databases of one
// Redis never hear each other's wake-ups or cooldowns.
func newNames(ns string, db int) names {
	p := ns + ":{q}:"
	ch := p + "db" + strconv.Itoa(db) + ":"
	return names{prefix: p, slots: p + "slots:", replicas: p + "replicas", freed: ch + "freed", health: ch + "health"}
}

const (

	// defaultOpTimeout bounds one Redis call on the request path: past it
	// the replica goes degraded rather than stall admission.
	defaultOpTimeout = 250 * time.Millisecond
	// probeEvery is how often a degraded replica asks whether Redis is back.
	probeEvery = 250 * time.Millisecond
)

// Options configures a Store.
type Options struct {
	URL       string        // redis://host:port/db (GATEWAY_REDIS_URL)
	Replica   string        // GATEWAY_REPLICA_ID
	TTL       time.Duration // GATEWAY_REDIS_LEASE_TTL
	Wake      time.Duration // GATEWAY_REDIS_WAKE (pub/sub is faster; see admission's retry)
	OpTimeout time.Duration // bound of one call on the request path; default 250ms
	// Namespace starts every key and channel; DefaultNamespace when empty.
	// Tests give each their own; gateways of different fleets sharing one
	// Redis would too.
	Namespace string
	Logger    *slog.Logger
}

// Hooks are what the Store tells the rest of the gateway. Each must return
// quickly and must not call back into the Store synchronously.
type Hooks struct {
	// Share is called with the replicas last seen alive when Redis stops
	// answering, and with 0 when it answers again (admission.SetShare).
	Share func(replicas int)
	// Wake is called when a slot of a gate was freed on some replica
	// (admission.WakeShared).
	Wake func(gate, id string)
	// Cooled is called when another replica cooled a health entry; entry
	// is what that replica passed to PublishCooled.
	Cooled func(entry string, until time.Time, reason string)
}

// Store is one replica's view of the shared limits.
type Store struct {
	rdb     *redis.Client
	n       names
	replica string
	nonce   string // tells this process's leases from an earlier one's with the same replica id
	ttl     time.Duration
	opTO    time.Duration
	log     *slog.Logger
	hooks   Hooks

	calls    callCounts
	shareMu  sync.Mutex // orders the Share hook's calls with the state they report
	degraded atomic.Bool
	replicas atomic.Int64 // last seen alive, this one included; at least 1
	handles  atomic.Uint64

	mu       sync.Mutex
	held     map[uint64]held // slots held by this replica, by handle
	releases []held          // slots given back, not yet removed in Redis; at most maxReleases
	// maxReleases bounds releases while Redis does not answer. A release
	// beyond it is dropped and counted: its lease expires by its TTL, as a
	// dead replica's do, so dropping costs a slot for one TTL at most.
	maxReleases int
	dropped     atomic.Uint64
	flushing    int // release calls on the wire
	// While a renewal is on the wire, slots given back are remembered so
	// that the renewal, which may re-add them, removes them again.
	renewing    bool
	renewedGone map[uint64]held

	// settleAt, when set, is when this replica, back from degraded mode,
	// returns to the whole limits. Only the renewal goroutine uses it.
	settleAt time.Time

	kick    chan struct{} // wakes the releaser
	cooling chan string   // cooldown messages to publish
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// held is one grant's slots: the slot set keys and the member in them.
type held struct {
	keys   []string
	limits []int // of each key: a release announces only a set that was full
	member string
}

// New connects lazily: a Redis that is down at start makes the replica
// start degraded, never fail.
func New(opts Options) (*Store, error) {
	ropts, err := redis.ParseURL(opts.URL)
	if err != nil {
		// The URL may hold a password: name the variable, not the value.
		return nil, errors.New("GATEWAY_REDIS_URL is not a valid redis:// URL")
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = defaultOpTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	// Every call carries its own deadline in its context: 250 ms on the
	// request path, longer for renewals and release batches. Socket
	// timeouts would cap them all at the shortest (go-redis takes the
	// earlier of the two), so they are off (-1).
	ropts.DialTimeout = opts.OpTimeout
	ropts.ReadTimeout = -1
	ropts.WriteTimeout = -1
	ropts.PoolTimeout = opts.OpTimeout
	ropts.ContextTimeoutEnabled = true
	ropts.MaxRetries = -1 // one try: a retry belongs to the next renewal or the next grant
	// One dial per call: five dials with backoff would hold a request for
	// over a second before the replica could go degraded.
	ropts.DialerRetries = 1
	quietRedis.Do(func() { redis.SetLogger(debugLogger{opts.Logger}) })
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	s := &Store{
		rdb:         redis.NewClient(ropts),
		n:           newNames(opts.Namespace, ropts.DB),
		replica:     opts.Replica,
		nonce:       hex.EncodeToString(nonce[:]),
		ttl:         opts.TTL,
		opTO:        opts.OpTimeout,
		log:         opts.Logger,
		held:        map[uint64]held{},
		renewedGone: map[uint64]held{},
		maxReleases: maxPendingReleases,
		kick:        make(chan struct{}, 1),
		cooling:     make(chan string, 64),
	}
	s.replicas.Store(1)
	return s, nil
}

// Start runs the store's goroutines until Close: renewal and heartbeat,
// the releaser, and the pub/sub listener. hooks must be set before.
func (s *Store) Start(hooks Hooks) {
	s.hooks = hooks
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	// Learn at once whether Redis answers, so that a replica started during
	// an outage is degraded from its first request.
	s.renew(ctx)
	ps := s.subscribe(ctx)
	s.wg.Go(func() { s.renewLoop(ctx) })
	s.wg.Go(func() { s.releaseLoop(ctx) })
	s.wg.Go(func() { s.listen(ctx, ps) })
	s.wg.Go(func() { s.publishLoop(ctx) })
}

// Close stops the goroutines, gives back every slot still held in one last
// call, and closes the connections.
func (s *Store) Close() {
	if s.stop != nil {
		s.stop()
		s.wg.Wait()
	}
	s.mu.Lock()
	for _, h := range s.held {
		s.releases = append(s.releases, h)
	}
	clear(s.held)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	s.flushReleases(ctx)
	cancel()
	_ = s.rdb.Close()
}

// Calls counts the store's Redis calls by kind since it started.
type Calls struct {
	Takes    uint64 // one per grant: the only call on the grant path
	Renewals uint64 // one per replica per renewal tick, however many slots it holds
	Releases uint64 // one per batch of slots given back
	Rates    uint64 // client rate windows: one per request of a client with rates, one per response with tokens
}

type callCounts struct {
	takes, renewals, releases, rates atomic.Uint64
}

// Calls returns the counts so far.
func (s *Store) Calls() Calls {
	return Calls{Takes: s.calls.takes.Load(), Renewals: s.calls.renewals.Load(),
		Releases: s.calls.releases.Load(), Rates: s.calls.rates.Load()}
}

// maxPendingReleases bounds the slots given back during an outage and not
// yet removed in Redis: about 10,000 requests' worth.
const maxPendingReleases = 10_000

// DroppedReleases counts the releases dropped because too many were
// pending while Redis did not answer; those slots came back by their TTL.
func (s *Store) DroppedReleases() uint64 { return s.dropped.Load() }

// Degraded reports that Redis is not answering and local shares apply.
func (s *Store) Degraded() bool { return s.degraded.Load() }

// Replicas is the number of replicas last seen alive, this one included.
func (s *Store) Replicas() int { return int(s.replicas.Load()) }

// Held is how many grants this replica holds slots for.
func (s *Store) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// Ping answers whether Redis answers now.
func (s *Store) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// Client is the store's Redis client, for the other shared state of the
// gateway (the budgets): the same pool, with every call bounded by its
// context's deadline and tried once, as the store's own. The store closes
// it.
func (s *Store) Client() *redis.Client { return s.rdb }

// opContext bounds a call on the request path.
func (s *Store) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opTO)
}

func (s *Store) enterDegraded(err error) {
	// shareMu makes "the state changed" and "the scheduler was told" one
	// step, so a Share(0) decided just before an outage cannot land after
	// this Share(n) and leave the limits whole while Redis is away.
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	if s.degraded.Swap(true) {
		return
	}
	n := s.Replicas()
	s.log.Warn("redis is not answering: enforcing this replica's share of every shared limit",
		"replicas_last_seen", n, "error", redactErr(err))
	if s.hooks.Share != nil {
		s.hooks.Share(n)
	}
}

// quietRedis routes go-redis's own log lines (one per failed dial during
// an outage) to debug: the store logs the outage once, at warn.
var quietRedis sync.Once

type debugLogger struct{ log *slog.Logger }

func (d debugLogger) Printf(ctx context.Context, format string, v ...any) {
	d.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// redactErr keeps an error's text without anything that could be the URL's
// password: go-redis errors name addresses at most, but an auth failure
// could echo more, so only the first line is kept.
func redactErr(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// slotKey is the key of a gate's slot set.
func (s *Store) slotKey(gate, id string) string { return s.n.slots + gate + ":" + id }

// parseSlotKey is slotKey's inverse; gate names never contain ':'.
func (s *Store) parseSlotKey(key string) (gate, id string, ok bool) {
	rest, found := strings.CutPrefix(key, s.n.slots)
	if !found {
		return "", "", false
	}
	return strings.Cut(rest, ":")
}
