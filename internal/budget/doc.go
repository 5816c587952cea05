// Package budget decides whether a request fits its client's and team's
// spend budgets (DESIGN 11.1, "Budgets" and "Reservation"): it owns the
// windows (UTC day, week from Monday, calendar month, total), the
// reservation of a request's estimated cost before its first attempt, the
// settle to its real cost after it, and the sharing of spend and
// reservations between replicas through Redis.
//
// It does not price requests or estimate them (the caller passes
// micro-dollars), parse the routes file (the caller passes Limits), write
// the ledger (internal/report does; the engine only reads it back through
// Ledger), or shape the 429 (the HTTP layer turns an *ExceededError into
// insufficient_quota / budget_exceeded with Retry-After).
//
// # Amounts
//
// Inside, every amount is an integer of micro-dollars. A limit is rounded
// down and ledger spend rounded up, so rounding never lets spend pass the
// configured figure. A reservation is admitted when, for every budget,
// spent + live reservations + estimate <= limit; so concurrent requests
// overshoot a budget only by their real cost above their estimate.
//
// # Keys
//
// Every key starts with "<namespace>:{b}:" (namespace "llmgw" unless
// Options say otherwise); the hash tag keeps a request's budgets in one
// Redis Cluster slot, so one script touches them all. Per budget window
// (W = the window's start in Unix seconds, 0 for total):
//
//	llmgw:{b}:spent:<kind>:<name>:<per>:<W>  settled spend (string, INCRBY); expires a day after the window ends, total never
//	llmgw:{b}:resv:<kind>:<name>:<per>:<W>   sorted set: member = reservation id, score = expiry (ms)
//	llmgw:{b}:amt:<kind>:<name>:<per>:<W>    hash: reservation id -> estimate, and "=sum", their live total
//
// A request makes exactly two calls: one reserve script (purges expired
// reservations, checks every budget, adds the reservation to all or
// refuses naming the first budget over, or answers "missing" when a spend
// counter does not exist) and one settle script (removes the reservation
// from every budget and INCRBYs the cost into the counters that exist).
// Expiry uses Redis's clock (TIME) so replicas whose clocks disagree agree
// on it; when Options.Now is set (tests) that time is passed into the
// scripts instead, so reservations can be aged without sleeping. Windows
// always follow Options.Now (the host's clock): a skew of seconds moves a
// window's start by as much.
//
// # Rebuild
//
// The ledger is the truth. A counter that does not exist (a budget new to
// this replica at SetLimits, a new window, Redis restarted or flushed) is
// rebuilt before the decision: Ledger.SpentSince(window start) is SET NX
// (so a counter another replica already rebuilt is kept), then the
// reservation is retried once. The ledger lags: a settled request reaches
// Postgres at most two report flush intervals later (200 ms by default),
// longer while Postgres is slow. To cover that gap a replica remembers its
// own settles of the last 5 s and adds them to a rebuild; a settle already
// in the ledger is then counted twice (the error is towards refusing,
// bounded by 5 s of this replica's spend). Other replicas' settles of the
// last flush intervals can still be missed: the gap is bounded by what the
// fleet settles in about 200 ms, once per rebuild.
//
// # Redis away
//
// Calls carry a 250 ms deadline. A call that fails without a reply from
// Redis makes the replica degraded: each window then gets this replica's
// share, (limit - spent - reserved as last seen) / Replicas.Alive() (at
// least 1), fixed when the window is first used while degraded, and local
// reservations and settles count against it. Never unlimited: a window
// never seen is rebuilt from the ledger first. Settles made meanwhile are
// kept (at most 100,000) and, at the first reserve 250 ms or more after the
// last probe, replayed one settle call each, so each cost reaches Redis
// once; when none is left the replica leaves degraded mode. A settle call
// that timed out after Redis ran it is replayed too: counted twice,
// towards refusing, never lost. Reservations made while degraded are not
// registered in Redis afterwards; they only settle (their cost is added).
//
// Without Redis the same rules run in memory, rebuilt from the ledger at
// SetLimits and at each new window.
package budget
