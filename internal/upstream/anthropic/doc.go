// Package anthropic translates between OpenAI Chat Completions, what the
// gateway's clients send, and the Anthropic Messages API (POST
// {base_url}/messages), what a `format: anthropic` provider speaks.
//
// It owns the pure translation only: ChatToMessages (request), MessageToChat
// and BodyUsage (non-streaming response), StreamTranslator (SSE events to
// chat.completion.chunk frames), and the reading of Anthropic errors
// (ParseError, StreamError, ErrorStatus, OpenAIErrorType). It does no I/O,
// sets no headers (x-api-key, anthropic-version), and decides nothing about
// failover: the upstream package's adapter does, with the typed errors
// defined here. It imports only the standard library and internal/jsontext,
// so upstream can import it.
//
// # Request fields
//
// Translated:
//
//   - model: replaced by Options.Model, the route's upstream model.
//   - messages: system and developer messages become the top-level system
//     (a string for one text, else text blocks in order, never joined with a
//     guessed separator); user, assistant and tool messages become turns of
//     content blocks: text, image (a base64 data URL becomes a base64
//     source, an http(s) URL a url source), tool_use (from tool_calls, the
//     arguments string parsed into the input object; "" is {}), tool_result
//     (from a tool message, tool_use_id = tool_call_id). Consecutive turns
//     of one role are merged, as the API requires alternation, and in a user
//     turn the tool_result blocks come first, as the API requires. Empty
//     text and empty turns are left out: the API refuses them.
//   - max_tokens, else max_completion_tokens, else Options.MaxTokens, else
//     DefaultMaxTokens → max_tokens (required by the API).
//   - stop (string or array) → stop_sequences.
//   - temperature (0 to 1; above 1 is refused rather than rescaled, which
//     would silently change the sampling asked for), top_p, and top_k (an
//     Anthropic parameter some clients send) are copied as written.
//   - stream is copied; stream_options.include_usage is returned in
//     Request.IncludeUsage for the StreamTranslator, which writes the usage
//     chunk itself.
//   - user, else safety_identifier → metadata.user_id.
//   - tools (function tools) → name, description, input_schema (an absent or
//     empty schema becomes an empty object schema); tool_choice "auto" →
//     auto, "required" → any, "none" → none, a named function → tool;
//     parallel_tool_calls false → disable_parallel_tool_use. Without tools,
//     tool_choice "auto" or "none" is left out and a demand for a tool is
//     refused.
//   - cache_control on a content part (LiteLLM's convention for Anthropic
//     prompt caching) is passed through.
//
// Refused with a *FieldError naming the field (400), because the answer
// could not be what the client asked for; each is accepted at its no-op
// value, given in brackets:
//
//   - n [1]: the API returns one choice.
//   - logprobs [false], top_logprobs [0]: the API has no log probabilities.
//   - response_format [{"type":"text"}]: JSON mode and json_schema cannot be
//     enforced; a client relying on them would get unvalidated text.
//   - modalities [["text"]], audio: no audio output.
//   - logit_bias [{}]: no token biasing.
//   - verbosity ["medium", the default].
//   - reasoning_effort: extended thinking needs its signed thinking blocks
//     sent back on later turns, which OpenAI messages cannot carry.
//   - web_search_options; functions and function_call (the legacy API: use
//     tools); in messages, role function, function_call, audio, tool calls
//     that are not functions, and content parts other than text and
//     image_url (user), text and refusal (assistant), text (system,
//     developer, tool): input_audio, file.
//   - any field not listed here, as OpenAI itself answers an unknown
//     argument with 400.
//
// Dropped in silence, as LiteLLM drops them, because they have no
// equivalent and do not change the shape of a correct answer:
// frequency_penalty, presence_penalty and seed (sampling hints: a different
// provider samples differently anyway), store and metadata (OpenAI's stored
// completions), service_tier (OpenAI's tiers), prompt_cache_key (OpenAI's
// cache routing; Anthropic caches by cache_control), prediction (a latency
// optimisation), and a function's strict flag. Inside messages, tools and
// content parts, fields not named above (a message's name,
// image_url.detail) are ignored. null is the same as absent for every field.
//
// # Responses
//
// MessageToChat joins text blocks into content (null when there is none),
// maps tool_use blocks to tool_calls, and leaves out thinking,
// redacted_thinking and server tool blocks, citations and stop_sequence.
// finish_reason: end_turn, stop_sequence, pause_turn → stop; max_tokens,
// model_context_window_exceeded → length; tool_use → tool_calls; refusal →
// content_filter. Usage: prompt_tokens = input_tokens +
// cache_creation_input_tokens + cache_read_input_tokens (the whole prompt, as
// OpenAI counts it), completion_tokens = output_tokens, cached reads also as
// prompt_tokens_details.cached_tokens. The id is "chatcmpl-" + the message
// id; model is the name the client asked for.
//
// StreamTranslator maps message_start to the assistant role chunk, held back
// until the first content so that an error event right after message_start
// can still fail over with nothing sent; text deltas to content; a tool_use
// block to a tool_calls entry (index counting tool blocks from 0, with id,
// name and empty arguments) and its input_json_delta pieces to arguments
// (a tool call whose block stops with none, a tool without input, gets the
// arguments "{}", as OpenAI streams it and as the non-stream translation
// says); message_delta's stop_reason to finish_reason; message_stop to the
// usage chunk (when asked for) and [DONE]. ping, other content_block_stops,
// thinking, signature and citation deltas, and unknown event types produce
// nothing. A stream that ends without message_stop is cut: the gateway never
// writes its [DONE].
//
// # Errors
//
// Anthropic error types, their HTTP status and the OpenAI error type a
// client sees (ErrorStatus, OpenAIErrorType):
//
//	invalid_request_error  400  invalid_request_error
//	authentication_error   401  authentication_error
//	billing_error          402  insufficient_quota
//	permission_error       403  permission_error
//	not_found_error        404  invalid_request_error
//	request_too_large      413  invalid_request_error
//	rate_limit_error       429  rate_limit_error
//	api_error              500  server_error
//	timeout_error          504  server_error
//	overloaded_error       529  server_error
//	(unknown)              502  upstream_error
//
// An error event in a stream is a *StreamError: Retryable (the provider's
// fault: overloaded, api, timeout, not found, unknown), KeyScoped (auth,
// permission, billing, rate limit) or ClientFault (invalid request, too
// large). Provider bytes that are not the Messages API wrap ErrMalformed.
package anthropic
