package budget

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// slot is one budget window as a store sees it: the key base
// ("<kind>:<name>:<per>:<windowstart>"), its limit and when its counter
// may be forgotten (Unix seconds, 0 never).
type slot struct {
	base     string
	limit    int64
	expireAt int64
}

// figures are one budget window's spend and live reservations.
type figures struct{ spent, reserved int64 }

const (
	reserved0 = iota // refused
	reservedOK
	reservedMissing
)

// reserveResult is a store's answer to a reservation: ok with every
// slot's figures after it, refused naming the first slot over (with its
// figures), or missing naming the slots whose counters do not exist.
type reserveResult struct {
	status  int
	over    int
	missing []int
	figs    []figures
}

// store is where spend and reservations live: Redis (shared) or memory
// (this replica only). Both apply the same rules in one atomic step.
// nowMs 0 means "the store's own clock" (Redis TIME).
type store interface {
	reserve(ctx context.Context, ss []slot, id string, est, nowMs, ttlMs int64) (reserveResult, error)
	// settle returns each slot's figures; spent -1 when its counter is
	// missing. atMs is when the request settled (this host's clock): a
	// counter rebuilt from a ledger read that holds it (atMs at or before
	// the counter's cut) does not add it again, and a missing counter
	// keeps it for the rebuild.
	settle(ctx context.Context, ss []slot, id string, cost, atMs int64) ([]figures, error)
	// seed creates a missing counter: spent from the ledger, holding every
	// settle up to cutMs, plus the settles kept since that the counter
	// missed.
	seed(ctx context.Context, s slot, spent, cutMs int64) error
	// youngestKept is the time (ms) of the latest settle kept for a
	// missing counter; 0 when none.
	youngestKept(ctx context.Context, s slot) (int64, error)
	// ping asks whether the store answers.
	ping(ctx context.Context) error
	// register adds a reservation made while Redis was away, without a
	// check: it was admitted on a share and holds until it settles.
	register(ctx context.Context, ss []slot, id string, est, nowMs, ttlMs int64) error
	// read returns each slot's figures (purging expired reservations);
	// spent -1 when its counter is missing.
	read(ctx context.Context, ss []slot, nowMs int64) ([]figures, error)
}

// purgeLua drops the expired reservations of the budget whose set is z
// and amounts hash is h, keeping the hash's "=sum" field (the live total)
// right. Reservation ids are hex, so they never collide with "=sum".
// Amounts are taken away as 0 - a, never -a: Lua's -0 reaches Redis as
// "-0", which HINCRBY refuses, and a script that fails half-way keeps its
// first writes (a zero estimate, an unpriced model's, would then break
// every later call on its budgets).
const purgeLua = `
local function purge(z, h, now)
  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', now)
  if #gone > 0 then
    for _, m in ipairs(gone) do
      local a = redis.call('HGET', h, m)
      if a then
        redis.call('HDEL', h, m)
        redis.call('HINCRBY', h, '=sum', 0 - tonumber(a))
      end
    end
    redis.call('ZREMRANGEBYSCORE', z, '-inf', now)
  end
end
local function clock(arg)
  local now = tonumber(arg)
  if now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
`

// reserveScript: KEYS are (spent, reservations, amounts) per budget; ARGV
// now ms (0: Redis TIME), ttl ms, id, estimate, then each budget's limit.
// Answers {2, i...} for missing counters, {0, i, spent, reserved} for a
// refusal by budget i, {1, spent1, reserved1, ...} for a reservation.
var reserveScript = redis.NewScript(purgeLua + `
local now = clock(ARGV[1])
local ttl, id, est = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local n = #KEYS / 3
local missing = {2}
for i = 1, n do
  if redis.call('EXISTS', KEYS[3*i-2]) == 0 then missing[#missing+1] = i end
end
if #missing > 1 then return missing end
local spent, resv = {}, {}
for i = 1, n do
  local z, h = KEYS[3*i-1], KEYS[3*i]
  purge(z, h, now)
  spent[i] = tonumber(redis.call('GET', KEYS[3*i-2]))
  resv[i] = tonumber(redis.call('HGET', h, '=sum') or '0')
  if spent[i] + resv[i] + est > tonumber(ARGV[4+i]) then
    return {0, i, spent[i], resv[i]}
  end
end
local out = {1}
for i = 1, n do
  local z, h = KEYS[3*i-1], KEYS[3*i]
  redis.call('ZADD', z, now + ttl, id)
  redis.call('HSET', h, id, est)
  resv[i] = redis.call('HINCRBY', h, '=sum', est)
  redis.call('PEXPIRE', z, 2 * ttl)
  redis.call('PEXPIRE', h, 2 * ttl)
  out[#out+1] = spent[i]
  out[#out+1] = resv[i]
end
return out
`)

// settleScript: KEYS are (spent, reservations, amounts, cut, kept) per
// budget; ARGV id, cost, settled-at ms, then each budget's counter expiry
// (Unix seconds, 0 never). Removes the reservation wherever it still is;
// adds the cost to every counter that exists, unless the counter was
// rebuilt from a ledger read that already holds this settle (settled at
// or before the counter's cut: a settle replayed after an outage); where
// the counter is missing (Redis flushed or restarted, the rebuild not done
// yet) keeps it as "id:cost" scored by its time, for the rebuild to add.
// Answers {spent1 or -1, reserved1, ...}.
var settleScript = redis.NewScript(`
local id, cost, at = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {}
for i = 1, #KEYS / 5 do
  local s, z, h, c, k = KEYS[5*i-4], KEYS[5*i-3], KEYS[5*i-2], KEYS[5*i-1], KEYS[5*i]
  local a = redis.call('HGET', h, id)
  if a then
    redis.call('HDEL', h, id)
    redis.call('HINCRBY', h, '=sum', 0 - tonumber(a))
    redis.call('ZREM', z, id)
  end
  local sp = -1
  if redis.call('EXISTS', s) == 1 then
    if at > tonumber(redis.call('GET', c) or '0') then
      sp = redis.call('INCRBY', s, cost)
    else
      sp = tonumber(redis.call('GET', s))
    end
  else
    redis.call('ZADD', k, at, id .. ':' .. cost)
    local exp = tonumber(ARGV[3+i])
    if exp > 0 then redis.call('EXPIREAT', k, exp) end
  end
  out[#out+1] = sp
  out[#out+1] = tonumber(redis.call('HGET', h, '=sum') or '0')
end
return out
`)

// seedScript: KEYS spent, cut, kept of one budget; ARGV the ledger's
// spend, the cut (ms: the ledger read holds every settle up to it), the
// counter's expiry (Unix seconds, 0 never). A counter that exists is kept
// (another replica rebuilt it); else it is the ledger's spend plus the
// settles kept since the cut, which the ledger read may not hold. Amounts
// stay strings into INCRBY: Lua's numbers would print large ones with an
// exponent.
var seedScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
local cut = tonumber(ARGV[2])
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[2], '+inf')) do
  redis.call('INCRBY', KEYS[1], string.match(m, ':(%d+)$'))
end
redis.call('DEL', KEYS[3])
redis.call('SET', KEYS[2], ARGV[2])
local exp = tonumber(ARGV[3])
if exp > 0 then
  redis.call('EXPIREAT', KEYS[1], exp)
  redis.call('EXPIREAT', KEYS[2], exp)
end
return 1
`)

// registerScript: KEYS as for reserve; ARGV now ms (0: Redis TIME), ttl
// ms left, id, estimate. Adds the reservation to every budget.
var registerScript = redis.NewScript(purgeLua + `
local now = clock(ARGV[1])
local ttl, id, est = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
for i = 1, #KEYS / 3 do
  local z, h = KEYS[3*i-1], KEYS[3*i]
  purge(z, h, now)
  if not redis.call('HGET', h, id) then
    redis.call('ZADD', z, now + ttl, id)
    redis.call('HSET', h, id, est)
    redis.call('HINCRBY', h, '=sum', est)
    if redis.call('PTTL', z) < 2 * ttl then redis.call('PEXPIRE', z, 2 * ttl) end
    if redis.call('PTTL', h) < 2 * ttl then redis.call('PEXPIRE', h, 2 * ttl) end
  end
end
return 1
`)

// readScript: KEYS as for reserve, ARGV now ms. Answers {spent1 or -1,
// live reserved1, ...}.
var readScript = redis.NewScript(purgeLua + `
local now = clock(ARGV[1])
local out = {}
for i = 1, #KEYS / 3 do
  purge(KEYS[3*i-1], KEYS[3*i], now)
  out[#out+1] = tonumber(redis.call('GET', KEYS[3*i-2]) or '-1')
  out[#out+1] = tonumber(redis.call('HGET', KEYS[3*i], '=sum') or '0')
end
return out
`)

type redisStore struct {
	rdb    redis.UniversalClient
	prefix string // "<ns>:{b}:"
}

func (r *redisStore) keys(ss []slot) []string {
	k := make([]string, 0, 3*len(ss))
	for _, s := range ss {
		k = append(k, r.prefix+"spent:"+s.base, r.prefix+"resv:"+s.base, r.prefix+"amt:"+s.base)
	}
	return k
}

func (r *redisStore) reserve(ctx context.Context, ss []slot, id string, est, nowMs, ttlMs int64) (reserveResult, error) {
	args := make([]any, 0, 4+len(ss))
	args = append(args, nowMs, ttlMs, id, est)
	for _, s := range ss {
		args = append(args, s.limit)
	}
	v, err := reserveScript.Run(ctx, r.rdb, r.keys(ss), args...).Int64Slice()
	if err != nil {
		return reserveResult{}, err
	}
	if len(v) == 0 {
		return reserveResult{}, errShortReply
	}
	switch v[0] {
	case reservedMissing:
		res := reserveResult{status: reservedMissing}
		for _, i := range v[1:] {
			res.missing = append(res.missing, int(i-1))
		}
		return res, nil
	case reserved0:
		if len(v) != 4 {
			return reserveResult{}, errShortReply
		}
		return reserveResult{status: reserved0, over: int(v[1] - 1), figs: []figures{{v[2], v[3]}}}, nil
	}
	if len(v) != 1+2*len(ss) {
		return reserveResult{}, errShortReply
	}
	return reserveResult{status: reservedOK, figs: pairs(v[1:])}, nil
}

func (r *redisStore) settle(ctx context.Context, ss []slot, id string, cost, atMs int64) ([]figures, error) {
	keys := make([]string, 0, 5*len(ss))
	args := make([]any, 0, 3+len(ss))
	args = append(args, id, cost, atMs)
	for _, s := range ss {
		keys = append(keys, r.prefix+"spent:"+s.base, r.prefix+"resv:"+s.base, r.prefix+"amt:"+s.base,
			r.prefix+"cut:"+s.base, r.prefix+"kept:"+s.base)
		args = append(args, s.expireAt)
	}
	v, err := settleScript.Run(ctx, r.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(v) != 2*len(ss) {
		return nil, errShortReply
	}
	return pairs(v), nil
}

func (r *redisStore) seed(ctx context.Context, s slot, spent, cutMs int64) error {
	keys := []string{r.prefix + "spent:" + s.base, r.prefix + "cut:" + s.base, r.prefix + "kept:" + s.base}
	return seedScript.Run(ctx, r.rdb, keys, spent, cutMs, s.expireAt).Err()
}

func (r *redisStore) youngestKept(ctx context.Context, s slot) (int64, error) {
	z, err := r.rdb.ZRevRangeWithScores(ctx, r.prefix+"kept:"+s.base, 0, 0).Result()
	if err != nil || len(z) == 0 {
		return 0, err
	}
	return int64(z[0].Score), nil
}

func (r *redisStore) ping(ctx context.Context) error { return r.rdb.Ping(ctx).Err() }

func (r *redisStore) register(ctx context.Context, ss []slot, id string, est, nowMs, ttlMs int64) error {
	return registerScript.Run(ctx, r.rdb, r.keys(ss), nowMs, ttlMs, id, est).Err()
}

func (r *redisStore) read(ctx context.Context, ss []slot, nowMs int64) ([]figures, error) {
	v, err := readScript.Run(ctx, r.rdb, r.keys(ss), nowMs).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(v) != 2*len(ss) {
		return nil, errShortReply
	}
	return pairs(v), nil
}

func pairs(v []int64) []figures {
	f := make([]figures, len(v)/2)
	for i := range f {
		f[i] = figures{v[2*i], v[2*i+1]}
	}
	return f
}

// memStore is the same rules in memory, for a gateway without Redis.
type memStore struct {
	mu sync.Mutex
	c  map[string]*memBudget
}

type memBudget struct {
	spent    int64
	expireAt int64
	resv     map[string]memResv
	sum      int64
}

type memResv struct{ amount, expMs int64 }

func newMemStore() *memStore { return &memStore{c: map[string]*memBudget{}} }

func (m *memStore) purge(b *memBudget, nowMs int64) {
	for id, r := range b.resv {
		if r.expMs <= nowMs {
			delete(b.resv, id)
			b.sum -= r.amount
		}
	}
}

func (m *memStore) reserve(_ context.Context, ss []slot, id string, est, nowMs, ttlMs int64) (reserveResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var res reserveResult
	for i, s := range ss {
		if m.c[s.base] == nil {
			res.missing = append(res.missing, i)
		}
	}
	if len(res.missing) > 0 {
		res.status = reservedMissing
		return res, nil
	}
	for i, s := range ss {
		b := m.c[s.base]
		m.purge(b, nowMs)
		if b.spent+b.sum+est > s.limit {
			return reserveResult{status: reserved0, over: i, figs: []figures{{b.spent, b.sum}}}, nil
		}
	}
	res.status = reservedOK
	for _, s := range ss {
		b := m.c[s.base]
		b.resv[id] = memResv{est, nowMs + ttlMs}
		b.sum += est
		res.figs = append(res.figs, figures{b.spent, b.sum})
	}
	return res, nil
}

func (m *memStore) settle(_ context.Context, ss []slot, id string, cost, _ int64) ([]figures, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]figures, len(ss))
	for i, s := range ss {
		b := m.c[s.base]
		if b == nil {
			out[i] = figures{-1, 0}
			continue
		}
		if r, ok := b.resv[id]; ok {
			delete(b.resv, id)
			b.sum -= r.amount
		}
		b.spent += cost
		out[i] = figures{b.spent, b.sum}
	}
	return out, nil
}

func (m *memStore) seed(_ context.Context, s slot, spent, _ int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c[s.base] == nil {
		m.c[s.base] = &memBudget{spent: spent, expireAt: s.expireAt, resv: map[string]memResv{}}
	}
	// Forget windows long over, so a gateway up for months keeps one
	// counter per budget window it can still be asked about.
	now := time.Now().Unix()
	for k, b := range m.c {
		if b.expireAt > 0 && b.expireAt < now {
			delete(m.c, k)
		}
	}
	return nil
}

func (m *memStore) youngestKept(context.Context, slot) (int64, error) { return 0, nil }

func (m *memStore) ping(context.Context) error { return nil }

// register is never called in memory: it has no outage.
func (m *memStore) register(context.Context, []slot, string, int64, int64, int64) error { return nil }

func (m *memStore) read(_ context.Context, ss []slot, nowMs int64) ([]figures, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]figures, len(ss))
	for i, s := range ss {
		b := m.c[s.base]
		if b == nil {
			out[i] = figures{-1, 0}
			continue
		}
		m.purge(b, nowMs)
		out[i] = figures{b.spent, b.sum}
	}
	return out, nil
}

// baseKey names a budget window inside the keys.
func baseKey(o Owner, p Per, now time.Time) string {
	return o.Kind + ":" + o.Name + ":" + string(p) + ":" + p.windowKey(now)
}

// counterExpiry is when a window's counter may go: a day after the window
// ends, so a request settling just after midnight still finds it; never
// for Total.
func counterExpiry(p Per, now time.Time) int64 {
	end, ok := p.End(now)
	if !ok {
		return 0
	}
	return end.Add(24 * time.Hour).Unix()
}
