// Package admission owns all upstream capacity of the gateway: the global
// upstream execution gate, the per-target quotas (and later per-client
// quotas), the priority queue in front of them with aging, the queue budget
// of each attempt, cancellation of queued attempts, shutdown of the queue,
// and the snapshots and counters that describe all of it.
//
// It leaves everything else to its callers: it knows nothing of HTTP, of
// providers or of Postgres. Callers describe an attempt as a Request (a
// priority, a queue budget and the extra quota dimensions besides the always
// implied global gate) and get back a Lease, or a typed error they branch on
// with errors.Is / errors.As.
//
// # Admission rule
//
// An attempt is admitted only when the global gate and every one of its
// dimensions have room, all at once. A queued attempt holds nothing, so it
// never sits on a global slot while its target is full (no hoarding), and an
// attempt blocked by a full target never blocks attempts behind it that could
// run (no head-of-line blocking). Among the attempts that could run, the best
// one wins: highest effective class first, then the oldest (FIFO).
//
// # Queue layout and why
//
// Queued attempts are grouped into lanes: a lane is the set of attempts that
// ask for exactly the same dimensions (the same gate instances). Everything in
// a lane is runnable, or not, together, so a lane is the unit of the runnable
// index. Inside a lane there is one FIFO per requested (base) class.
//
// For each base class the scheduler keeps a heap of the runnable lanes that
// have attempts of that class, keyed by the sequence number of the lane's
// oldest attempt of the class. Aging is computed lazily from the enqueue
// time: effective class = max(Interactive, base - floor(age/AgingInterval))
// for Foreground and below; Urgent and Interactive never change. Because
// every attempt of one base class ages at the same rate, the oldest attempt
// of a base class is always the best of that class, whatever the time, so the
// heap keys never change with time and no timer or re-sort is needed for
// aging. The best attempt overall is the best of the (at most five) heap tops
// compared by (effective class now, sequence number): strict priority, FIFO
// inside a class, where an attempt that reached a class by aging is ordered
// by its enqueue order among the attempts native to that class.
//
// A grant costs O(log lanes) heap work plus the lanes of any gate that just
// became full or got room again; it never rescans the queue.
//
// # Counters and their invariant
//
// Per gate, every attempt that reached the gate ends in exactly one of
// admitted, timed_out, cancelled or rejected, except a grant that raced with
// the caller's context ending: that slot is given back at once and counted in
// admitted, released, cancelled and reclaimed. So at rest, with attempts the
// number of Acquire calls that reached the gate:
//
//	active == 0, pending == 0, admitted == released
//	attempts == admitted - reclaimed + timed_out + cancelled + rejected
//
// An Acquire whose context has already ended counts as cancelled. Acquire
// calls rejected because the scheduler was closed count as rejected on the
// global gate only (no target gate is created after Close). Attempts queued
// when Close runs count as rejected on all their gates. Malformed requests
// (ErrInvalidRequest) are caller bugs and count nowhere.
//
// # Bounds
//
// MaxPending bounds queued attempts of every class, Urgent included: the
// bound protects the process, whoever asks. Dimension gates that are idle
// (nothing held, nothing queued) keep their counters only for the 64 most
// recently idle of them; a gate revived from idle keeps its counters and
// adopts the limit and label of the request that revived it.
package admission
