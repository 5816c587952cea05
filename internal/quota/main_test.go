package quota

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// redisURL is the Redis the tests use; each test works in its own
// namespace, so tests and packages running at once do not meet.
func redisURL(t *testing.T) string {
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
			t.Fatalf("no Redis at %s (CI must provide one: scripts/redis-local.sh): %v", url, err)
		}
		t.Skipf("no Redis at %s: install it with `apt-get install -y redis-server` (or run scripts/redis-local.sh): %v", url, err)
	}
	return url
}

func namespace(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test-" + hex.EncodeToString(b[:])
}

// newStore opens a store in ns; the test closes it (or kills it).
func newStore(t *testing.T, url, ns, replica string, ttl time.Duration) *Store {
	t.Helper()
	s, err := New(Options{URL: url, Replica: replica, TTL: ttl, Wake: 20 * time.Millisecond, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// slotCounts reads, straight from Redis, the unexpired members of every
// slot set of ns.
func slotCounts(t *testing.T, url, ns string) map[string]int {
	t.Helper()
	opts, _ := redis.ParseURL(url)
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	iter := c.Scan(ctx, 0, ns+":{q}:slots:*", 100).Iterator()
	for iter.Next(ctx) {
		n, err := c.ZCount(ctx, iter.Val(), "("+strconv.FormatInt(now.UnixMilli(), 10), "+inf").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out[iter.Val()] = int(n)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
