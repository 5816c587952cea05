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
// rebuilt before the decision (and before /admin/budgets answers), then
// the reservation is retried once. The ledger lags: a settled request
// reaches Postgres one or two report flush intervals later (200 ms by
// default). So each settle is counted once:
//
//   - the rebuild waits Options.LedgerLag (300 ms) after finding the
//     counter missing, and on while a settle kept for it (below) is younger
//     than that (at most 2 s more), then reads Ledger.SpentSince(window
//     start): every settle made before the counter went missing is in it;
//   - a settle that finds its counter missing is kept in Redis
//     (llmgw:{b}:kept:..., "id:cost" scored by its time) instead of lost;
//   - the seed script (SET only if the counter is still missing: another
//     replica's rebuild is kept) is the ledger's spend plus the kept
//     settles younger than its cut, read time - LedgerLag, and stores the
//     cut (llmgw:{b}:cut:...); a settle at or before the cut (one replayed
//     after an outage) is in the ledger read and is not added again.
//
// A settle within LedgerLag before the read that the read already held is
// counted twice (towards refusing); a Postgres slower than LedgerLag can
// make a rebuild miss what it has not written yet (towards admitting), as
// can clocks of replicas that disagree by more than LedgerLag. The
// reservations of requests in flight when Redis lost its keys are gone
// with them: others may be admitted in their place, up to those requests'
// cost.
//
// # Redis away
//
// Calls carry a 250 ms deadline. A call that fails without a reply from
// Redis makes the replica degraded: each window then gets this replica's
// share, (limit - spent - reserved as last seen) / Replicas.Alive() (at
// least 1), fixed when the window is first used while degraded, and local
// reservations and settles count against it. Never unlimited: a window
// never seen is rebuilt from the ledger first. Settles made meanwhile are
// kept (at most 100,000) and, at the first reserve or snapshot 250 ms or
// more after the last probe, replayed one settle call each with their own
// time, so each cost reaches Redis once (or is left to a ledger read that
// holds it, see Rebuild); with nothing to replay the probe is a PING. When
// Redis answers and none is left, the replica leaves degraded mode and
// registers in Redis the reservations it made on its share that are still
// held (with what is left of their TTL), so the other replicas count them.
// A settle call that timed out after Redis ran it is replayed too: counted
// twice, towards refusing, never lost.
//
// Without Redis the same rules run in memory, rebuilt from the ledger at
// SetLimits and at each new window.
package budget
