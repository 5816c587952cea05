// Package quota shares the gateway's limits between replicas through Redis
// (DESIGN 10.4 in docs/architecture.md, "Several replicas"): the slots of
// target and client gates (it implements admission.SharedStore), the
// request and token rates of clients, target cooldowns (shared health), and
// the count of replicas alive.
//
// It owns the Redis keys, the Lua scripts that keep each decision atomic,
// the per-replica renewal of held slots, the release queue, the pub/sub
// wake-ups, and degraded mode: when Redis does not answer, every shared
// limit falls back to this replica's share (the limit divided by the
// replicas last seen alive, at least 1), and when it answers again the
// slots held meanwhile are registered once, never twice.
//
// It does not decide who is admitted next (internal/admission does), which
// target is healthy (internal/health does), or what a client's limits are
// (the routes file, through internal/candidates).
//
// # Keys
//
// Every key starts with "<namespace>:{q}:" (namespace "llmgw" unless
// Options say otherwise); the hash tag keeps them in one Redis
// Cluster slot, so a script may touch several of them.
//
//	llmgw:{q}:slots:<gate>:<id>  sorted set: member = lease, score = expiry (ms, Redis clock)
//	llmgw:{q}:replicas           sorted set: member = replica id, score = last seen (ms)
//	llmgw:{q}:rpm:<client>       requests counted in the client's current minute (expires with it)
//	llmgw:{q}:tpm:<client>       tokens counted in the client's current token minute
//
// Channels: "llmgw:{q}:db<N>:freed" carries the key of a full slot set that
// just lost a member; "llmgw:{q}:db<N>:health" carries target cooldowns. N is
// the database number: pub/sub ignores databases, keys do not.
//
// Time in scripts is Redis's own clock (TIME), so replicas whose clocks
// disagree still agree on expiry.
package quota
