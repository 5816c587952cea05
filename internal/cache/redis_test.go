package cache

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testRedis connects to the test Redis (GATEWAY_TEST_REDIS_URL, else
// 127.0.0.1:6379/0) with the options the gateway uses (each call bounded
// by its context, tried once) and returns a namespace of the test's own,
// whose keys it deletes at the end.
func testRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	url := os.Getenv("GATEWAY_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := newGatewayLikeClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis at %s (CI must provide one): %v", url, err)
		}
		t.Skipf("no Redis at %s: apt-get install -y redis-server: %v", url, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	ns := "test-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, ns+":*").Result()
		if len(keys) > 0 {
			_ = rdb.Del(ctx, keys...).Err()
		}
		_ = rdb.Close()
	})
	return rdb, ns
}

// newGatewayLikeClient sets what internal/quota sets on the client the
// cache shares: deadlines from the context only, one try.
func newGatewayLikeClient(opts *redis.Options) *redis.Client {
	opts.ReadTimeout, opts.WriteTimeout = -1, -1
	opts.ContextTimeoutEnabled = true
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.DialTimeout, opts.PoolTimeout = 250*time.Millisecond, 250*time.Millisecond
	return redis.NewClient(opts)
}

// TestRedisRoundTrip: an entry comes back with every field, a large body
// byte for byte though it is kept compressed, under the namespaced key, and
// Redis expires it at the end of its life.
func TestRedisRoundTrip(t *testing.T) {
	rdb, ns := testRedis(t)
	now := time.Now()
	st := NewRedis(rdb, ns, nil)
	ctx := context.Background()
	for _, body := range [][]byte{[]byte(`{"id":"small"}`), []byte(strings.Repeat(`{"content":"hello world"}`, 1000))} {
		k := Key(hex.EncodeToString(body[:8]))
		want := Entry{Body: body, Stored: now, Expires: now.Add(time.Minute), CostUSD: 0.00123, HasCost: true}
		if err := st.Set(ctx, k, want); err != nil {
			t.Fatal(err)
		}
		got, ok, err := st.Get(ctx, k)
		if !ok || err != nil {
			t.Fatalf("Get = %v, %v; want the entry", ok, err)
		}
		if !bytes.Equal(got.Body, want.Body) || !got.Stored.Equal(want.Stored) || !got.Expires.Equal(want.Expires) ||
			got.CostUSD != want.CostUSD || !got.HasCost || got.Compress {
			t.Errorf("Get = %+v (body %d bytes), want %+v (body %d bytes)", got, len(got.Body), want, len(want.Body))
		}
		raw, err := rdb.Get(ctx, ns+":cache:"+string(k)).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if len(body) >= compressAbove && len(raw) >= len(body)/4 {
			t.Errorf("stored %d bytes for a %d-byte repetitive body, want it compressed", len(raw), len(body))
		}
		ttl, err := rdb.PTTL(ctx, ns+":cache:"+string(k)).Result()
		if err != nil || ttl <= 55*time.Second || ttl > time.Minute {
			t.Errorf("PTTL = %v, %v; want the entry's remaining minute", ttl, err)
		}
	}
	if _, ok, err := st.Get(ctx, "absent"); ok || err != nil {
		t.Errorf("Get of an absent key = %v, %v; want a miss without error", ok, err)
	}
}

// TestRedisExpiry: an entry past its expiry on the gateway's clock is a
// miss even while Redis still holds it, and one already expired when set
// is not stored.
func TestRedisExpiry(t *testing.T) {
	rdb, ns := testRedis(t)
	now := time.Now()
	st := NewRedis(rdb, ns, func() time.Time { return now })
	ctx := context.Background()
	if err := st.Set(ctx, "k", Entry{Body: []byte("{}"), Stored: now, Expires: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if _, ok, err := st.Get(ctx, "k"); ok || err != nil {
		t.Errorf("Get at expiry = %v, %v; want a miss", ok, err)
	}
	if err := st.Set(ctx, "old", Entry{Body: []byte("{}"), Stored: now, Expires: now.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, ns+":cache:old").Result(); n != 0 {
		t.Error("an expired entry was stored")
	}
}

// TestRedisBadValue: a value that is not an entry frame is an ErrBadEntry.
func TestRedisBadValue(t *testing.T) {
	rdb, ns := testRedis(t)
	ctx := context.Background()
	for i, v := range []string{"", "x", "\x02" + strings.Repeat("\x00", frameHeader)} {
		k := Key("bad" + string(rune('0'+i)))
		if err := rdb.Set(ctx, ns+":cache:"+string(k), v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := NewRedis(rdb, ns, nil).Get(ctx, k); ok || !errors.Is(err, ErrBadEntry) {
			t.Errorf("Get of %q = %v, %v; want ErrBadEntry", v, ok, err)
		}
	}
}

// TestRedisSlowOrDown: a Redis that accepts but never answers, and one
// that is not there, make Get and Set fail within their context's 20 ms
// (plus scheduling), never hang.
func TestRedisSlowOrDown(t *testing.T) {
	hole := newBlackhole(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := closed.Addr().String()
	_ = closed.Close()
	for name, addr := range map[string]string{"silent": hole.addr(), "down": down} {
		t.Run(name, func(t *testing.T) {
			rdb := newGatewayLikeClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			st := NewRedis(rdb, "", nil)
			for op, call := range map[string]func(context.Context) error{
				"get": func(ctx context.Context) error { _, _, err := st.Get(ctx, "k"); return err },
				"set": func(ctx context.Context) error {
					return st.Set(ctx, "k", Entry{Body: []byte("{}"), Expires: time.Now().Add(time.Minute)})
				},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				start := time.Now()
				err := call(ctx)
				took := time.Since(start)
				cancel()
				if err == nil {
					t.Errorf("%s: no error from a Redis that does not answer", op)
				}
				if took > 200*time.Millisecond {
					t.Errorf("%s took %s, want about its 20 ms context", op, took)
				}
			}
		})
	}
}

// TestEntryFrameCoversEntry: the frame stores every field of Entry; a new
// field fails here until encodeEntry and decodeEntry carry it.
func TestEntryFrameCoversEntry(t *testing.T) {
	var fields []string
	et := reflect.TypeFor[Entry]()
	for i := range et.NumField() {
		fields = append(fields, et.Field(i).Name)
	}
	if got, want := strings.Join(fields, ","), "Body,Stored,Expires,CostUSD,HasCost,Compress"; got != want {
		t.Errorf("Entry has fields %s; the Redis frame stores %s: extend it (and frameVersion)", got, want)
	}
}

// blackhole is a TCP listener that accepts and never answers, as a
// stopped Redis does to a connection already open.
type blackhole struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
}

func newBlackhole(t *testing.T) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &blackhole{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-h.done
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.conns {
			_ = c.Close()
		}
	})
	return h
}

func (h *blackhole) addr() string { return h.ln.Addr().String() }
