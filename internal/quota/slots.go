package quota

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/gateway/internal/admission"
)

var _ admission.SharedStore = (*Store)(nil)

// takeScript takes one slot of every set at once, or none. KEYS are the
// slot sets; ARGV[1] is the member, ARGV[2] the TTL in ms, ARGV[2+i] the
// limit of KEYS[i]. It returns 0 when taken, else the index (1-based) of a
// full set. Expired members are dropped first: that is how a dead
// replica's slots come back.
var takeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i, k in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
  if redis.call('ZCARD', k) >= tonumber(ARGV[2 + i]) then
    return i
  end
end
local ttl = tonumber(ARGV[2])
for _, k in ipairs(KEYS) do
  redis.call('ZADD', k, now + ttl, ARGV[1])
  redis.call('PEXPIRE', k, ttl)
end
return 0
`)

// renewScript is one replica's heartbeat and the renewal of every slot it
// holds. KEYS[1] is the replicas set, KEYS[1+i] the slot set of ARGV[2+i];
// ARGV[1] is the replica id, ARGV[2] the TTL in ms. ZADD (not XX) puts back
// a slot Redis lost (a restart) or never saw (taken while degraded), and
// a member is counted once however often it is added. It returns the
// replicas seen within the TTL.
var renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[1], 2 * ttl)
for i = 2, #KEYS do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[i + 1])
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return redis.call('ZCARD', KEYS[1])
`)

// releaseScript removes members (ARGV[2i] from KEYS[i]) and announces on
// ARGV[1] each set that was full before (its limit is ARGV[2i+1]), so
// waiters anywhere try again. A set with room had no waiter to wake, and
// announcing every release would cost each replica a message per request.
var releaseScript = redis.NewScript(`
for i, k in ipairs(KEYS) do
  if redis.call('ZREM', k, ARGV[2 * i]) == 1 then
    if redis.call('ZCARD', k) + 1 >= tonumber(ARGV[2 * i + 1]) then
      redis.call('PUBLISH', ARGV[1], k)
    end
  end
end
return 0
`)

// Take implements admission.SharedStore: one Redis round trip.
func (s *Store) Take(ctx context.Context, slots []admission.SharedSlot) (admission.SharedHandle, int, error) {
	h := s.handles.Add(1)
	hd := held{keys: make([]string, len(slots)), limits: make([]int, len(slots)),
		member: s.replica + "/" + s.nonce + "/" + strconv.FormatUint(h, 10)}
	for i, sl := range slots {
		hd.keys[i] = s.slotKey(sl.Gate, sl.ID)
		hd.limits[i] = sl.Limit
	}
	if s.degraded.Load() {
		s.hold(h, hd)
		return admission.SharedHandle(h), -1, fmt.Errorf("%w: redis is not answering", admission.ErrSharedUnavailable)
	}
	args := make([]any, 2, 2+len(slots))
	args[0], args[1] = hd.member, s.ttl.Milliseconds()
	for _, sl := range slots {
		args = append(args, sl.Limit)
	}
	s.calls.takes.Add(1)
	octx, cancel := s.opContext(ctx)
	full, err := takeScript.Run(octx, s.rdb, hd.keys, args...).Int()
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up; the slots may have been taken just
			// before: give them back rather than wait for their expiry.
			s.queueRelease(hd)
			return 0, -1, fmt.Errorf("shared slots: %w", ctx.Err())
		}
		s.enterDegraded(err)
		s.hold(h, hd)
		return admission.SharedHandle(h), -1, fmt.Errorf("%w: %w", admission.ErrSharedUnavailable, err)
	}
	if full > 0 {
		return 0, full - 1, nil
	}
	s.hold(h, hd)
	return admission.SharedHandle(h), -1, nil
}

func (s *Store) hold(h uint64, hd held) {
	s.mu.Lock()
	s.held[h] = hd
	s.mu.Unlock()
}

// Give implements admission.SharedStore: it queues the release for the
// releaser and returns at once (the scheduler calls it under its lock).
func (s *Store) Give(h admission.SharedHandle) {
	s.mu.Lock()
	hd, ok := s.held[uint64(h)]
	if ok {
		delete(s.held, uint64(h))
		if s.renewing {
			s.renewedGone[uint64(h)] = hd
		}
	}
	s.mu.Unlock()
	if ok {
		s.queueRelease(hd)
	}
}

func (s *Store) queueRelease(hd held) {
	s.mu.Lock()
	if len(s.releases) < s.maxReleases {
		s.releases = append(s.releases, hd)
	} else {
		s.dropped.Add(1)
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// releaseLoop removes released slots from Redis as soon as they are given
// back, batching whatever piled up during the previous call.
func (s *Store) releaseLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		if s.degraded.Load() {
			// Kept until Redis answers; the renewal that notices flushes them.
			continue
		}
		s.flushReleases(ctx)
	}
}

// flushReleases sends every queued release in one script call; on failure
// they stay queued for the next try and the replica goes degraded.
func (s *Store) flushReleases(ctx context.Context) {
	s.mu.Lock()
	batch := s.releases
	s.releases = nil
	if len(batch) > 0 {
		s.flushing++
	}
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	defer func() {
		s.mu.Lock()
		s.flushing--
		s.mu.Unlock()
	}()
	var keys []string
	args := []any{s.n.freed}
	for _, hd := range batch {
		for i, k := range hd.keys {
			keys = append(keys, k)
			args = append(args, hd.member, hd.limits[i])
		}
	}
	s.calls.releases.Add(1)
	octx, cancel := context.WithTimeout(ctx, 4*s.opTO)
	err := releaseScript.Run(octx, s.rdb, keys, args...).Err()
	cancel()
	if err != nil {
		s.mu.Lock()
		s.releases = append(batch, s.releases...)
		if n := len(s.releases) - s.maxReleases; n > 0 {
			s.releases = s.releases[:s.maxReleases]
			s.dropped.Add(uint64(n))
		}
		s.mu.Unlock()
		if ctx.Err() == nil {
			s.enterDegraded(err)
		}
	}
}

// renewLoop renews every held slot and this replica's heartbeat at a third
// of the TTL, in one call per replica (not per slot); while degraded it
// asks more often, so shared leases resume soon after Redis is back.
func (s *Store) renewLoop(ctx context.Context) {
	every := s.ttl / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.renew(ctx)
		if s.degraded.Load() || !s.settleAt.IsZero() {
			t.Reset(min(every, probeEvery))
		} else {
			t.Reset(every)
		}
	}
}

// renew sends the heartbeat with every held slot. When Redis answers after
// an outage, the replica leaves degraded mode only after a renewal that
// includes every slot taken meanwhile, so those are counted (once) before
// other replicas get the whole limit back.
func (s *Store) renew(ctx context.Context) {
	n, err := s.renewOnce(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.enterDegraded(err)
		}
		return
	}
	if s.degraded.Load() {
		// Takes from now on go to Redis; the second renewal covers any slot
		// a Take registered locally while the first was on the wire.
		s.degraded.Store(false)
		if n, err = s.renewOnce(ctx); err != nil {
			s.enterDegraded(err)
			return
		}
		s.replicas.Store(int64(max(n, 1)))
		s.flushReleases(ctx)
		// The other replicas may still be degraded, holding slots Redis
		// has not seen (it may have restarted empty); they register them
		// within a probe interval. Keep this replica's share until then,
		// so the fleet never runs more than the limit during recovery.
		s.settleAt = time.Now().Add(2*probeEvery + s.opTO)
		s.log.Info("redis answers again: shared limits resume after the other replicas re-register", "replicas", n)
		return
	}
	s.replicas.Store(int64(max(n, 1)))
	if !s.settleAt.IsZero() && !time.Now().Before(s.settleAt) {
		s.settleAt = time.Time{}
		s.shareMu.Lock()
		if !s.degraded.Load() { // not gone again meanwhile
			s.log.Info("shared limits resumed", "replicas", n)
			if s.hooks.Share != nil {
				s.hooks.Share(0)
			}
		}
		s.shareMu.Unlock()
	}
}

func (s *Store) renewOnce(ctx context.Context) (int, error) {
	s.mu.Lock()
	keys := []string{s.n.replicas}
	args := []any{s.replica, s.ttl.Milliseconds()}
	listed := make([]uint64, 0, len(s.held))
	s.renewing = true
	for h, hd := range s.held {
		listed = append(listed, h)
		for _, k := range hd.keys {
			keys = append(keys, k)
			args = append(args, hd.member)
		}
	}
	s.mu.Unlock()
	s.calls.renewals.Add(1)
	octx, cancel := context.WithTimeout(ctx, 4*s.opTO)
	defer cancel()
	n, err := renewScript.Run(octx, s.rdb, keys, args...).Int()
	// A slot given back while the renewal was on the wire may have been
	// removed before the renewal re-added it: remove it again (ZREM is
	// idempotent), or it would hold a slot nobody holds for a whole TTL.
	s.mu.Lock()
	var again []held
	for _, h := range listed {
		if _, still := s.held[h]; !still {
			again = append(again, s.renewedGone[h])
		}
	}
	clear(s.renewedGone)
	s.renewing = false
	s.mu.Unlock()
	for _, hd := range again {
		if hd.member != "" {
			s.queueRelease(hd)
		}
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// listen delivers pub/sub messages: freed slots wake local waiters, and
// other replicas' cooldowns reach health. go-redis resubscribes after a
// reconnect; a message lost meanwhile is covered by admission's retry.
// subscribe subscribes to the store's channels and waits, within a bound,
// for Redis to confirm, so that a replica that starts serving already hears
// the other replicas' cooldowns and wake-ups.
func (s *Store) subscribe(ctx context.Context) *redis.PubSub {
	ps := s.rdb.Subscribe(ctx, s.n.freed, s.n.health)
	wctx, cancel := context.WithTimeout(ctx, 4*s.opTO)
	defer cancel()
	for range 2 {
		if _, err := ps.Receive(wctx); err != nil {
			break // degraded or slow: go-redis keeps trying in the background
		}
	}
	return ps
}

func (s *Store) listen(ctx context.Context, ps *redis.PubSub) {
	defer ps.Close()
	ch := ps.Channel(redis.WithChannelHealthCheckInterval(5 * time.Second))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m.Channel {
			case s.n.freed:
				if gate, id, ok := s.parseSlotKey(m.Payload); ok && s.hooks.Wake != nil {
					s.hooks.Wake(gate, id)
				}
			case s.n.health:
				s.cooledMessage(m.Payload)
			}
		}
	}
}
