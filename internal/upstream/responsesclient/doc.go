// Package responsesclient translates between the OpenAI Responses API
// (POST /v1/responses, as the OpenAI SDKs' Responses clients, the Agents
// SDK and the Vercel AI SDK's default openai(model) speak it) and OpenAI
// chat completions, so the gateway can serve Responses clients from
// providers that do not speak it (anthropic, gemini, vertex): the request
// goes Responses → chat → the provider's format, the answer the provider's
// format → chat → Responses. It owns the pure translation:
//
//   - ResponsesToChat: a Responses request body to a chat completions body
//     for an upstream model, its item references resolved from the items
//     the caller kept (items.go), refusing what it cannot express with
//     *RequestError, naming the field.
//   - ChatToResponse: a chat.completion body to a Response object
//     (ChatToResponseItems: with its output items, to keep).
//   - StreamTranslator: chat completion chunks to Responses SSE events
//     (event: lines, sequence_number), event by event, appending into the
//     caller's buffer; Items once the response is whole.
//
// It does not do HTTP, choose providers or count tokens; package upstream
// calls in here. It imports only the standard library and
// internal/jsontext.
//
// # What is translated, refused and dropped
//
// Refused (400, the field named), because the gateway cannot do what the
// field asks and a silent answer without it would look right and be wrong:
// built-in tools (web_search, file_search, code_interpreter, computer use,
// image_generation, mcp, local_shell, custom tools, any type but function:
// param tools[i].type), previous_response_id and conversation (the gateway
// stores no responses), background: true, input item types it has no chat
// form for (file inputs, built-in tools' call items), item references to
// items the caller does not hold, and
// tool_choice forms other than auto, none, required and one function.
//
// Dropped: reasoning items in the input (their encrypted_content can be
// verified only by the OpenAI model that wrote it), reasoning, store,
// include, metadata, truncation, service_tier, prompt_cache_key, top_logprobs
// and any field not named here, so that clients keep working as the API
// grows optional fields.
//
// Choices: instructions become the first system message; developer
// messages become system messages; max_output_tokens becomes
// max_completion_tokens (which the anthropic and gemini translations read);
// text.format json_schema and json_object become response_format; a
// stream always asks for stream_options.include_usage, so its usage is
// known. In the answer, a finish_reason length is status incomplete with
// incomplete_details.reason max_output_tokens, content_filter is incomplete
// with reason content_filter; ids are the gateway's (resp_..., msg_...,
// fc_...), the call_id the provider's tool call id.
package responsesclient
