package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testRedisURL is the Redis the tests share; each test works in its own
// namespace, so tests and packages running at once never meet.
func testRedisURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("GATEWAY_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis at %s (CI must provide one): %v", url, err)
		}
		t.Skipf("no Redis at %s: install it with `apt-get install -y redis-server`: %v", url, err)
	}
	return url
}

// testRedis is a client of the test's own, with a switch that makes every
// command fail as a dead Redis would (no reply) and a count of commands.
type testRedis struct {
	*redis.Client
	ns    string
	down  atomic.Bool
	count atomic.Int64
}

func (r *testRedis) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *testRedis) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if r.down.Load() {
			err := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused (test)")}
			cmd.SetErr(err)
			return err
		}
		r.count.Add(1)
		return next(ctx, cmd)
	}
}

func (r *testRedis) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.count.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func newTestRedis(t testing.TB) *testRedis {
	t.Helper()
	opts, _ := redis.ParseURL(testRedisURL(t))
	var b [6]byte
	_, _ = rand.Read(b[:])
	r := &testRedis{Client: redis.NewClient(opts), ns: "test-" + hex.EncodeToString(b[:])}
	r.AddHook(r)
	t.Cleanup(func() {
		r.down.Store(false)
		r.flush(t)
		_ = r.Close()
	})
	return r
}

// flush deletes every key of the test's namespace: FLUSHALL as far as the
// engine can tell, without touching other tests sharing the Redis.
func (r *testRedis) flush(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	iter := r.Scan(ctx, 0, r.ns+":*", 500).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := r.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// ledger is a test double of the report writer's SpentSince: the spend
// settled so far per owner, every settle at once (no flush lag).
type ledger struct {
	mu    sync.Mutex
	spent map[string]float64
	calls atomic.Int64
	fail  atomic.Bool
}

func newLedger() *ledger { return &ledger{spent: map[string]float64{}} }

func (l *ledger) SpentSince(_ context.Context, owner, name string, _ time.Time) (float64, error) {
	l.calls.Add(1)
	if l.fail.Load() {
		return 0, errors.New("ledger down (test)")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spent[owner+" "+name], nil
}

func (l *ledger) add(o Owner, micros int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spent[o.String()] += float64(micros) / 1e6
}

// clock is a settable fake time.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

type replicas int

func (r replicas) Alive() int { return int(r) }

var (
	searchWeb = Owner{Client, "search-web"}
	search    = Owner{Team, "search"}
)

// dayStart is a fake "now" inside today's UTC day, an hour in, so tests
// that advance minutes stay in one window and counters' real expiry
// (EXPIREAT) stays in the future.
func dayStart() time.Time { return time.Now().UTC().Truncate(24 * time.Hour).Add(time.Hour) }
