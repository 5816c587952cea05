package cache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the store shared by the replicas (GATEWAY_REDIS_URL): one
// string key per entry, holding the packed entry in a small binary frame,
// with a Redis TTL of the entry's remaining life so Redis drops it by
// itself. Every call is bounded by its context (the caller gives 20 ms);
// a failure is an error, which the caller counts and treats as a miss.
type Redis struct {
	rdb    redis.Cmdable
	prefix string
	now    func() time.Time
}

// DefaultRedisNamespace starts every key, as the shared limits' keys do.
const DefaultRedisNamespace = "llmgw"

// ErrBadEntry is a value under a cache key that is not an entry this
// version wrote (another version's frame, or a key written by hand).
var ErrBadEntry = errors.New("cache: stored value is not an entry")

// NewRedis stores entries in rdb under "<namespace>:cache:<key>"
// (namespace DefaultRedisNamespace when empty); now is its clock (nil:
// time.Now). It does not own rdb: the caller closes it.
func NewRedis(rdb redis.Cmdable, namespace string, now func() time.Time) *Redis {
	if namespace == "" {
		namespace = DefaultRedisNamespace
	}
	if now == nil {
		now = time.Now
	}
	return &Redis{rdb: rdb, prefix: namespace + ":cache:", now: now}
}

// Get returns the entry under k, when present and not expired. Redis
// expires it too, but its clock and this one may differ by a little.
func (r *Redis) Get(ctx context.Context, k Key) (Entry, bool, error) {
	b, err := r.rdb.Get(ctx, r.prefix+string(k)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("cache: redis get: %w", err)
	}
	e, err := decodeEntry(b)
	if err != nil {
		return Entry{}, false, err
	}
	if !r.now().Before(e.Expires) {
		return Entry{}, false, nil
	}
	e, err = unpack(e)
	return e, err == nil, err
}

// Set stores e under k for its remaining life; an entry already expired
// is not sent.
func (r *Redis) Set(ctx context.Context, k Key, e Entry) error {
	ttl := e.Expires.Sub(r.now())
	if ttl < time.Millisecond { // PX takes whole milliseconds, at least 1
		return nil
	}
	if err := r.rdb.Set(ctx, r.prefix+string(k), encodeEntry(pack(e)), ttl).Err(); err != nil {
		return fmt.Errorf("cache: redis set: %w", err)
	}
	return nil
}

// The frame of a stored entry: a version byte, a flags byte, Stored and
// Expires as Unix nanoseconds, the cost's float64 bits (big-endian), then
// the body (gzip when flagCompress). A new Entry field needs a new
// version: TestEntryFrameCoversEntry fails until the frame carries it.
const (
	frameVersion = 1
	frameHeader  = 2 + 3*8

	flagCompress = 1 << 0
	flagHasCost  = 1 << 1
)

func encodeEntry(e Entry) []byte {
	b := make([]byte, frameHeader, frameHeader+len(e.Body))
	b[0] = frameVersion
	if e.Compress {
		b[1] |= flagCompress
	}
	if e.HasCost {
		b[1] |= flagHasCost
	}
	binary.BigEndian.PutUint64(b[2:], uint64(e.Stored.UnixNano()))
	binary.BigEndian.PutUint64(b[10:], uint64(e.Expires.UnixNano()))
	binary.BigEndian.PutUint64(b[18:], math.Float64bits(e.CostUSD))
	return append(b, e.Body...)
}

func decodeEntry(b []byte) (Entry, error) {
	if len(b) < frameHeader || b[0] != frameVersion || b[1]&^(flagCompress|flagHasCost) != 0 {
		return Entry{}, ErrBadEntry
	}
	return Entry{
		Compress: b[1]&flagCompress != 0,
		HasCost:  b[1]&flagHasCost != 0,
		Stored:   time.Unix(0, int64(binary.BigEndian.Uint64(b[2:]))),
		Expires:  time.Unix(0, int64(binary.BigEndian.Uint64(b[10:]))),
		CostUSD:  math.Float64frombits(binary.BigEndian.Uint64(b[18:])),
		Body:     b[frameHeader:],
	}, nil
}
