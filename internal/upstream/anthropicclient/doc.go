// Package anthropicclient translates between the Anthropic Messages API
// (POST /v1/messages, as the official Anthropic SDKs speak it) and OpenAI
// chat completions, so the gateway can serve Anthropic clients from
// providers that speak only chat completions. It owns the pure translation:
//
//   - MessagesToChat: a Messages request body to a chat completions body for
//     an upstream model, refusing what it cannot express with *RequestError.
//   - ChatToMessage: a chat.completion body to a Messages response body.
//   - StreamTranslator: a chat completions SSE stream to Messages SSE
//     events, event by event, appending into the caller's buffer.
//   - ErrorBody, ErrorEvent, ErrorFromOpenAI: Anthropic-shaped errors.
//
// It does not do HTTP, choose providers, count tokens or read SSE from a
// connection; the handler and the upstream package do, calling in here. It
// imports only the standard library and internal/jsontext, so that the
// upstream package can import it.
//
// # What is not translated, and why
//
// Request fields dropped:
//   - top_k: chat completions has no such parameter.
//   - thinking: dropped rather than refused, because clients such as coding
//     agents send it by default and a refusal would make the gateway useless
//     to them; a budget cannot be expressed portably (reasoning_effort exists
//     on few servers and means something else). The answer then simply has
//     no thinking blocks, which Anthropic also allows. Thinking and
//     redacted_thinking blocks in the history are dropped for the same reason
//     and because no other provider could verify their signatures.
//   - output_config.effort: few chat completions servers take
//     reasoning_effort, and it is only a hint.
//   - cache_control, citations, service_tier, speed, container, mcp_servers
//     and any field not named here: features of Anthropic's own service
//     with no chat completions equivalent. Unknown fields are ignored so
//     that clients keep working as the Anthropic API grows optional ones.
//   - tool_choice and disable_parallel_tool_use when the request has no
//     tools: OpenAI refuses them then.
//
// Request content refused with *RequestError, because silently dropping a
// user's content would produce a wrong answer that looks right:
//   - server tools (web_search, code_execution, bash, text_editor, computer
//     use, ...): they run inside Anthropic's API.
//   - document blocks other than plain text (PDF, file ids), image sources
//     other than base64 and url, and block types other than text, image,
//     document, tool_use, tool_result, thinking and redacted_thinking.
//
// Request choices:
//   - System prompts, top-level or as role "system" messages (which newer
//     API versions allow among the turns), become system messages in place;
//     their text blocks are joined with "\n".
//   - max_tokens is sent as max_tokens; OpenAI's reasoning models want
//     max_completion_tokens, which the provider's own request rewriting must
//     supply. temperature and top_p are copied when sent (newer Anthropic
//     API versions dropped them; older clients still send them).
//   - Structured outputs (output_config.format, or the beta's output_format)
//     become response_format json_schema named "output", without strict:
//     OpenAI's strict mode demands schema features an Anthropic schema need
//     not have.
//   - Text-only content becomes a plain string (blocks joined with "\n"),
//     which every OpenAI-compatible server accepts; content with images
//     becomes a part list.
//   - tool_result becomes a role "tool" message, emitted before the rest of
//     its user message; is_error becomes an "Error: " prefix of its text;
//     images in a tool_result move to the user message that follows, since
//     tool messages carry text only.
//   - An assistant message as the last turn (Anthropic's prefill) is sent as
//     an ordinary assistant turn; chat completions servers do not continue
//     it, so the answer may not start where the prefill ends.
//   - A stream asks for stream_options.include_usage, so usage arrives.
//
// Response choices:
//   - stop_sequence (and model_context_window_exceeded) is never reported:
//     OpenAI says "stop" whether the model ended its turn or hit a stop
//     sequence, so stop maps to end_turn.
//   - content_filter maps to refusal, as does a message whose only content
//     is OpenAI's refusal text (relayed as a text block).
//   - A turn with tool calls is tool_use even when the provider said stop.
//   - Tool arguments that are not a JSON object become input {} in a
//     non-streamed answer; a stream relays argument fragments as sent, since
//     validating them would mean holding the whole call back.
//   - Cached prompt tokens (prompt_tokens_details.cached_tokens) are
//     reported as cache_read_input_tokens and left out of input_tokens, the
//     Anthropic convention; Usage.Prompt still counts every prompt token.
//   - reasoning_content and other non-standard delta fields are dropped.
//   - A streamed tool_use block starts at its call's first fragment, with
//     the name that fragment carries (OpenAI always sends it there).
//   - In a stream, message_start carries input_tokens 0 unless the provider
//     reported usage in its first chunk (OpenAI sends usage last, with
//     include_usage); message_delta carries the final input and output
//     tokens. No ping events are sent.
package anthropicclient
