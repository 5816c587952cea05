package cache

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"time"

	"github.com/maypok86/otter/v2"
)

// Entry is one stored answer: the non-stream body in the client route's
// format, with its usage, and what a hit needs besides.
type Entry struct {
	Body     []byte
	Stored   time.Time // when it was stored: a hit's Age
	Expires  time.Time
	CostUSD  float64 // the stored answer's cost: a hit's saved_usd
	HasCost  bool
	Compress bool // Body is gzip; Memory and Redis keep large bodies so
}

// compressAbove is the body size from which an entry is kept gzipped: chat
// answers are text and shrink to a third or less, and below a few KiB the
// CPU is not worth the bytes.
const compressAbove = 4 << 10

// pack readies e's body for a store: gzipped when large.
func pack(e Entry) Entry {
	if len(e.Body) < compressAbove {
		return e
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	_, _ = zw.Write(e.Body)
	_ = zw.Close()
	e.Body, e.Compress = b.Bytes(), true
	return e
}

// unpack is the inverse of pack.
func unpack(e Entry) (Entry, error) {
	if !e.Compress {
		return e, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(e.Body))
	if err != nil {
		return Entry{}, err
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		return Entry{}, err
	}
	e.Body, e.Compress = body, false
	return e, nil
}

// Memory is the in-process store, bounded by the bytes of its entries
// (GATEWAY_CACHE_MAX_BYTES). It is otter: its Set is visible to the next
// Get (ristretto's is buffered, and an answer just stored would be missed
// by the collapsed waiters reading it), and it evicts by weight exactly.
type Memory struct {
	c   *otter.Cache[Key, Entry]
	now func() time.Time
}

// NewMemory is a store of at most maxBytes of entries; now is its clock
// (nil: time.Now).
func NewMemory(maxBytes int64, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	c := otter.Must(&otter.Options[Key, Entry]{
		MaximumWeight: uint64(maxBytes),
		Weigher: func(k Key, e Entry) uint32 {
			return uint32(len(k) + len(e.Body) + entryOverhead)
		},
		// Maintenance (draining otter's buffers, evicting past the bound)
		// runs on the goroutine of the Set or Get that needs it: a miss's
		// Set comes after its answer was written, but a Get (a lookup,
		// before a hit is served) may run a pass too. The default executor starts
		// a goroutine per pass, nearly one per Set with distinct keys:
		// with the wake-ups of idle threads it brought, that was most of
		// what a miss cost over an uncached request in the cache phase.
		// The store has no OnDeletion, loader or Compute that could run
		// under otter's locks; the one cost is that entries written while
		// a pass ran are evicted by the next call, so an idle store may
		// stay above its bound by those few entries.
		Executor: func(fn func()) { fn() },
	})
	return &Memory{c: c, now: now}
}

// entryOverhead is what an entry costs besides its key and body: otter's
// node and the Entry's fields, so many tiny entries stay bounded too.
const entryOverhead = 128

// Get returns the entry under k, when present and not expired.
func (m *Memory) Get(_ context.Context, k Key) (Entry, bool, error) {
	e, ok := m.c.GetIfPresent(k)
	if !ok {
		return Entry{}, false, nil
	}
	if !m.now().Before(e.Expires) {
		m.c.Invalidate(k)
		return Entry{}, false, nil
	}
	e, err := unpack(e)
	return e, err == nil, err
}

// Set stores e under k until e.Expires.
func (m *Memory) Set(_ context.Context, k Key, e Entry) error {
	m.c.Set(k, pack(e))
	return nil
}

// Weight is the bytes the store holds, as its bound counts them.
func (m *Memory) Weight() uint64 { return m.c.WeightedSize() }
