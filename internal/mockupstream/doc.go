// Package mockupstream is a fault-injectable LLM provider (OpenAI chat completions,
// Responses and embeddings, Anthropic messages, the Gemini API's generateContent) used by the gateway's tests and
// benchmarks over loopback.
//
// It owns the wire shapes a provider answers with (chat.completion JSON and
// chat.completion.chunk SSE, Responses objects and semantic events, embedding lists,
// Anthropic messages and their named events, each provider's error bodies) and the
// faults a provider can commit: latency, a late first byte, keep-alive comments, slow or
// stalled streams, connections aborted mid-stream, error events or a malformed event
// mid-stream, streams that end without their close (no [DONE], optionally no
// finish_reason), error statuses with Retry-After, a share of failing or hanging
// requests, the first N requests failing (FailFirst), an outage that ends (DownUntil,
// DownFor), connections reset or left unanswered before any header
// (ResetBeforeHeaders, HangBeforeHeaders), providers' real refusals (ErrorKind: context
// length exceeded, content filter, request too large, a key out of requests), a share
// of streams with a slow first byte. It counts what happened to every model request
// (Stats, StatsFor per endpoint, StatsForModel per model) and keeps the last request of
// each endpoint (LastRequest, LastRequestAt) so a test can assert what the gateway
// forwarded. It knows nothing about the gateway itself: no routing, no admission, no
// persistence.
//
// A Server serves:
//
//	POST /v1/chat/completions        OpenAI chat, stream (SSE) and non-stream
//	POST /v1/responses, /responses   OpenAI Responses, stream (named events) and non-stream
//	POST /v1/embeddings, /embeddings OpenAI embeddings (deterministic unit vectors)
//	POST /v1/messages, /messages     Anthropic messages, stream (named events) and non-stream
//	POST /v1beta/models/M:generateContent, :streamGenerateContent?alt=sse
//	                                 the Gemini API (gemini.go), key in x-goog-api-key
//	POST /v1/projects/P/locations/L/publishers/google/models/M:generateContent, ...
//	                                 Gemini on Vertex AI (vertex.go), a bearer token from /token
//	POST /token                      the JWT bearer grant of EnableVertex's service account
//	GET  /v1/models                  a fixed model list
//	GET  /mock/stats[?path=P|?model=M] Stats as JSON; with path, that endpoint's only;
//	                                 with model, the requests whose body named M
//	GET  /mock/last-request[?path=P] the last request (of endpoint P): method, path,
//	                                 query, headers, body
//	POST /mock/behavior[?model=M]    body: a JSON Behavior over the defaults; M's own
//	                                 Behavior, or the new defaults (admin_behavior.go)
//	DELETE /mock/behavior[?model=M]  M (or every model) follows the defaults again
//	POST /mock/reset                 Reset: forget per-model Behaviors and counts
//
// The newer routes answer with and without /v1 because a provider's base_url may or
// may not end in it; both spellings are one endpoint for counting and recording.
//
// Behaviour comes from the defaults given to New (changed at run time with SetBehavior)
// and can be overridden per request with X-Mock-* headers (see the Header* constants),
// so one mock process can serve a whole test matrix.
//
// Usage: prompt tokens are (body bytes + 3) / 4, output tokens one per chunk (per word
// non-stream). Cache reads, cache writes and reasoning are added where each vendor
// reports them (usagetokens.go), stream and non-stream:
//
//	header / Behavior field                  OpenAI chat, Responses           Anthropic messages
//	X-Mock-Cached-Tokens / CachedTokens       prompt_tokens_details.cached_    cache_read_input_tokens,
//	                                          tokens (input_tokens_details),   beside input_tokens
//	                                          inside prompt_tokens
//	X-Mock-Cache-Write-Tokens /               inside prompt_tokens only (no    cache_creation_input_tokens,
//	CacheWriteTokens                          field: billed as input)          beside input_tokens
//	X-Mock-Reasoning-Tokens / ReasoningTokens completion_tokens_details.       inside output_tokens (no
//	                                          reasoning_tokens (output_tokens_ field: thinking is output)
//	                                          details), inside completion_tokens
//
// An Anthropic stream carries the cache counts in message_start, the output in
// message_delta. Zero counts (the default) leave the usage objects as they were.
//
// Per model: a gateway's fallback model often sits on the same provider and key as its
// primary, so both reach one mock with the same forwarded headers, and only the body's
// "model" tells them apart. SetModelBehavior (POST /mock/behavior?model=) gives a model
// a Behavior of its own that replaces the defaults for its requests; X-Mock-* headers
// still apply on top, unless X-Mock-For-Model names other models, in which case they
// are ignored. FailFirst and a header's DownFor count per model. With no per-model
// Behavior and no X-Mock-For-Model header, a request pays one nil pointer check.
//
// Which requests fail and how are separate: KeyStatus first; then FailFirst and the
// down window when set (the rest succeed); else FailRate's share, or every request, of
// those that Status, ErrorKind, ResetBeforeHeaders or HangBeforeHeaders would fail.
// Failing is answering Status (500; 503 while down) or ErrorKind's refusal, unless
// ResetBeforeHeaders (close with a TCP reset, no byte) or HangBeforeHeaders (no byte
// until the client leaves) says otherwise.
//
// Every control means the same on
// every endpoint where it applies; the fail, hang and slow schedules are shared by all
// of them, like one provider's. Each provider words its errors its own way: injected
// statuses and refusals are OpenAI-shaped ({"error":{...}}) on the OpenAI routes and
// Anthropic-shaped ({"type":"error","error":{"type":"overloaded_error",...}}, 529 for
// overloaded) on the Anthropic one. The Anthropic route also refuses, as Anthropic does,
// a request without x-api-key (401, unless Behavior.Keyless) or anthropic-version (400),
// and answers a tool call when Behavior.ToolUse asks for one. The OpenAI chat and
// Responses endpoints answer a tool call, stream and not, when the request declares
// tools and either tool_choice requires one (a named function, or "required": the
// first declared tool) or the last user message asks for a declared tool by name
// ("use the <name> tool", "call <name>", case ignored); the arguments are an object of
// placeholders for the tool's required parameters, and after a tool's result (a "tool"
// message, a function_call_output item) the answer is text again. tools.go has the
// exact rules, so an agent SDK pointed at the mock runs a tool and ends its loop.
//
// Streaming timeline, every pause a select on the request context so that a client
// that leaves ends the handler at once (counted in Stats.Cancelled):
//
//	Latency → 200 headers (flushed) → [StallAfterHeaders] → Comments × (": keep-alive",
//	CommentInterval) → FirstByteDelay (SlowDelay for SlowRate's share) → opening
//	events → Chunks × (ChunkInterval, content event) with [StallAfterChunks] /
//	[ResetAfterChunks] / [ErrorAfterChunks] / [EndAfterChunks] checked after each →
//	closing events
//
// MalformedAfterChunks inserts "data: {not json" (as the endpoint's content event)
// after that many chunks, before any other *AfterChunks fault, and the stream goes on.
// OmitFinishReason (chat) leaves the last chunk's finish_reason null.
// StopAtMaxTokens ends a text answer as cut by its token limit (length, max_tokens,
// MAX_TOKENS, each format its own word).
//
// Opening and closing events per endpoint:
//
//	chat       role chunk | usage chunk (when asked for; every chunk before it then
//	           ends with "usage":null, as OpenAI's do), data: [DONE]
//	responses  response.created, .in_progress, .output_item.added, .content_part.added |
//	           .output_text.done, .content_part.done, .output_item.done, response.completed
//	messages   message_start, content_block_start, ping | content_block_stop, [tool_use
//	           block: start, 2 input_json_delta, stop], message_delta, message_stop
//	gemini     nothing | [functionCall event]; the last event has finishReason STOP and
//	           the whole usageMetadata, and the body then ends (Gemini has no close)
//
// The mid-stream error is the provider's: an {"error":{...}} data event (chat), an
// error event then response.failed (responses), an overloaded_error error event
// (messages), a 503 UNAVAILABLE {"error":{...}} data event (gemini); the stream then ends cleanly without its closing events.
//
// A request whose last message is the assistant's (a prefill, how a gateway resumes a cut
// stream on another provider), on chat or messages, is answered with the rest of the
// answer: the fixed word sequence "Hello from <identity> chunk 1 2 ... n" continues at
// the chunk after the prefill's words, so prefill and continuation concatenate to the
// whole answer without overlap or gap (a prefill short of chunk 1's words gets the
// whole answer). Behavior.RejectPrefill (X-Mock-Reject-Prefill) answers such a request
// 400 prefill_unsupported; Behavior.RepeatOnPrefill (X-Mock-Repeat-On-Prefill) ignores
// the prefill and answers from the beginning. Server.Prefills counts them (prefill.go).
//
// Fail-rate, hang-rate and slow-rate decisions are deterministic (a counter, not a
// random source), so a test that sends N requests at FailRate r sees exactly floor(N·r)
// failures.
//
// The command cmd/mockupstream wraps a Server in a standalone process.
package mockupstream
