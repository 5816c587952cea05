// Package mockupstream is a fault-injectable, OpenAI-compatible upstream used by the
// gateway's tests and benchmarks over loopback.
//
// It owns the wire shapes a provider answers with (chat.completion JSON,
// chat.completion.chunk SSE, OpenAI error bodies) and the faults a provider can commit
// (latency, a late first byte, keep-alive comments, slow or stalled streams, connections
// aborted mid-stream, error statuses with Retry-After, a share of failing or hanging
// requests, a share of streams with a slow first byte). It counts what happened to every
// chat request (Stats) and keeps the last one it received (LastRequest) so a test can
// assert what the gateway forwarded. It knows nothing about the gateway itself: no
// routing, no admission, no persistence.
//
// A Server serves:
//
//	POST /v1/chat/completions  stream (SSE) and non-stream answers
//	GET  /v1/models            a fixed model list
//	GET  /mock/stats           Stats as JSON
//
// Behaviour comes from the defaults given to New (changed at run time with SetBehavior)
// and can be overridden per request with X-Mock-* headers (see the Header* constants),
// so one mock process can serve a whole test matrix.
//
// Streaming timeline, every pause a select on the request context so that a client
// that leaves ends the handler at once (counted in Stats.Cancelled):
//
//	Latency → 200 headers (flushed) → [StallAfterHeaders] → Comments × (": keep-alive",
//	CommentInterval) → FirstByteDelay (SlowDelay for SlowRate's share) → role chunk →
//	Chunks × (ChunkInterval, content chunk) with [StallAfterChunks] / [ResetAfterChunks]
//	checked after each → usage chunk (when asked for) → data: [DONE]
//
// Fail-rate, hang-rate and slow-rate decisions are deterministic (a counter, not a
// random source), so a test that sends N requests at FailRate r sees exactly floor(N·r)
// failures.
//
// The command cmd/mockupstream wraps a Server in a standalone process.
package mockupstream
