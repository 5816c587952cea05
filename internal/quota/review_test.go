package quota

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/gateway/internal/admission"
)

// TestReviewShareNotLiftedWhileDegraded: the store goes degraded on a
// failed Take at the moment the renewal loop, back from an earlier outage,
// announces the whole limits. The two hook calls reach the scheduler in
// either order (SetShare waits on the scheduler lock); whatever the order,
// a degraded store must not leave the scheduler on the whole limits.
func TestReviewShareNotLiftedWhileDegraded(t *testing.T) {
	rs := startPrivateRedis(t)
	var (
		mu      sync.Mutex
		applied = -1 // what the scheduler enforces: the last SetShare it ran
		once    atomic.Bool
		a       *Store
		rmu     sync.Mutex // rs is started by the test, stopped by the hook
	)
	apply := func(n int) {
		mu.Lock()
		applied = n
		mu.Unlock()
	}
	current := func() int {
		mu.Lock()
		defer mu.Unlock()
		return applied
	}
	share := func(n int) {
		if n == 0 && once.CompareAndSwap(false, true) {
			// The renewal loop decided on the whole limits; before its
			// SetShare gets the scheduler lock, Redis goes away and a
			// request's Take fails. Whichever of the two reaches the
			// scheduler first, the last one applied must be the share.
			rmu.Lock()
			rs.stop()
			rmu.Unlock()
			took := make(chan struct{})
			go func() {
				defer close(took)
				h, _, err := a.Take(context.Background(), slots(4, "t"))
				if !errors.Is(err, admission.ErrSharedUnavailable) {
					t.Errorf("take during the outage: %v", err)
				}
				a.Give(h)
			}()
			// Let the Take fail and reach enterDegraded while this
			// Share(0) has not been applied yet.
			time.Sleep(100 * time.Millisecond)
			apply(n)
			t.Cleanup(func() { <-took })
			return
		}
		apply(n)
	}
	a = newStore(t, rs.url(), namespace(t), "a", 3*time.Second)
	a.Start(Hooks{Share: share})
	defer a.Close()
	ctx := context.Background()

	rs.stop()
	h, _, _ := a.Take(ctx, slots(4, "t"))
	a.Give(h)
	if !a.Degraded() || current() != 1 {
		t.Fatalf("first outage: degraded=%v share=%d", a.Degraded(), current())
	}
	rmu.Lock()
	rs.start()
	rmu.Unlock()
	waitFor(t, "the whole limits announced", once.Load)
	// Redis stays away: give the store a few probes to notice.
	time.Sleep(time.Second)
	if !a.Degraded() {
		t.Fatal("redis is down but the store is not degraded")
	}
	if got := current(); got == 0 {
		t.Fatalf("redis is down (degraded=%v) but the scheduler enforces the whole limits (share %d): every replica may run a full limit", a.Degraded(), got)
	}
}

// delayProxy forwards TCP to a Redis, holding back for delay any client
// write that contains match while slow is set: it stands for a renewal
// that is slower on the wire than a release sent after it.
type delayProxy struct {
	ln    net.Listener
	to    string
	match []byte
	slow  atomic.Bool
	delay time.Duration
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startDelayProxy(t *testing.T, to string, match []byte, delay time.Duration) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{ln: ln, to: to, match: match, delay: delay}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *delayProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(c, u); c.Close() })
		p.wg.Go(func() {
			defer u.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if p.slow.Load() && bytes.Contains(buf[:n], p.match) {
						time.Sleep(p.delay)
					}
					if _, werr := u.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

func (p *delayProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestReviewRenewalDoesNotResurrectReleasedSlot: a renewal lists the held
// slots, then (before Redis runs it) one of them is given back and its
// release reaches Redis first. The renewal's ZADD must not put the released
// slot back: nobody holds it, and nobody would release it again, so the
// fleet would lose that slot for a whole TTL.
func TestReviewRenewalDoesNotResurrectReleasedSlot(t *testing.T) {
	url, ns := redisURL(t), namespace(t)
	opts, _ := redis.ParseURL(url)
	p := startDelayProxy(t, opts.Addr, []byte(ns+":{q}:replicas"), 150*time.Millisecond)
	a := newStore(t, "redis://"+p.ln.Addr().String()+"/"+strconv.Itoa(opts.DB), ns, "a", 30*time.Second)
	a.Start(Hooks{})
	defer a.Close()
	ctx := context.Background()

	h, full, err := a.Take(ctx, slots(1, "t"))
	if err != nil || h == 0 {
		t.Fatalf("take: h=%d full=%d err=%v", h, full, err)
	}
	p.slow.Store(true)
	renewed := make(chan error, 1)
	go func() { _, err := a.renewOnce(ctx); renewed <- err }()
	time.Sleep(50 * time.Millisecond) // the renewal listed h and is on the wire
	a.Give(h)
	a.settled() // the release reached Redis
	if err := <-renewed; err != nil {
		t.Fatalf("renewal: %v", err)
	}
	if got := slotCounts(t, url, ns); len(got) != 0 {
		t.Errorf("nothing is held, yet Redis counts %v until the TTL ends", got)
	}
	b := newStore(t, url, ns, "b", 30*time.Second)
	defer b.Close()
	hb, full, err := b.Take(ctx, slots(1, "t"))
	if hb == 0 {
		t.Fatalf("another replica is refused the free slot (full=%d err=%v)", full, err)
	}
	b.Give(hb)
}

// TestReviewPasswordNeverLeaks: whether Redis takes the URL's password,
// refuses it or is not there, neither the log (debug included) nor the
// errors New and Take return carry the password.
func TestReviewPasswordNeverLeaks(t *testing.T) {
	url := redisURL(t)
	opts, _ := redis.ParseURL(url)
	const pw = "pw-Zq81xLk-must-not-leak"
	var buf safeBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, u := range []string{
		"redis://:" + pw + "@" + opts.Addr + "/0",
		"redis://user:" + pw + "@" + opts.Addr + "/0",
		"redis://:" + pw + "@127.0.0.1:1/0", // nobody listening
	} {
		s, err := New(Options{URL: u, Replica: "a", TTL: 3 * time.Second, Namespace: namespace(t), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		s.Start(Hooks{})
		h, _, terr := s.Take(context.Background(), slots(1, "t"))
		s.Give(h)
		if terr != nil && strings.Contains(terr.Error(), pw) {
			t.Errorf("Take's error carries the password: %v", terr)
		}
		NewRates(s).Admit(context.Background(), "c", Limits{RequestsPerMinute: 1})
		s.Close()
	}
	if _, err := New(Options{URL: "redis://:" + pw + "@host:notaport/0"}); err == nil || strings.Contains(err.Error(), pw) {
		t.Errorf("New with a bad URL: %v", err)
	}
	if strings.Contains(buf.String(), pw) {
		t.Fatalf("the log carries the password:\n%s", buf.String())
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
