// Package bedrock translates between the OpenAI chat completions format and
// the AWS Bedrock Runtime Converse API (Converse and ConverseStream): the
// request body, the answer, the stream's events and the provider's errors.
// It is pure: it signs nothing, sends nothing and decodes no eventstream
// frame. The upstream package addresses and signs the request (SigV4, with
// aws-sdk-go-v2's signer), splits a ConverseStream body into its frames
// (aws-sdk-go-v2's eventstream decoder) and hands each frame here as an
// event named by its :event-type, with its JSON payload as data.
//
// What the request translation does with each chat field:
//
//   - messages: system and developer messages become the system blocks, in
//     order; user, assistant and tool messages become Converse messages
//     (tool messages are user messages of toolResult blocks), consecutive
//     messages of one role merged into one, as Converse requires the roles
//     to alternate. Text parts are text blocks; image_url parts with a
//     base64 data URL of PNG, JPEG, GIF or WebP are image blocks (an http
//     URL is refused: Converse takes bytes or S3 locations only); assistant
//     tool_calls are toolUse blocks (their id kept as toolUseId), and a
//     tool message is a toolResult for its tool_call_id: a JSON object
//     content is a json block, anything else a text block.
//   - tools → toolConfig.tools[].toolSpec with inputSchema.json (an empty
//     object schema when the function has no parameters); tool_choice
//     "auto" → auto, "required" → any, a named function → tool. Converse
//     has no "none": with tools it is refused, without tools it asks for
//     nothing and is dropped. parallel_tool_calls true is accepted (the
//     models may always call several tools); false is refused.
//   - max_tokens (or max_completion_tokens, else Options.MaxTokens),
//     temperature, top_p and stop → inferenceConfig maxTokens,
//     temperature, topP and stopSequences.
//   - user, metadata, store, service_tier and the like are dropped: they
//     change nothing of the answer. n other than 1, logprobs,
//     response_format other than text, audio, the legacy functions API and
//     unknown fields are refused with a *FieldError naming the field.
//
// Answers: output.message content text and toolUse blocks become the
// choice's content and tool_calls (reasoningContent is left out: OpenAI's
// chat format has no place for it); stopReason end_turn and stop_sequence
// → stop, max_tokens → length, tool_use → tool_calls,
// guardrail_intervened and content_filtered → content_filter; usage
// inputTokens + cacheReadInputTokens + cacheWriteInputTokens is
// prompt_tokens (Converse counts cached tokens apart, OpenAI inside),
// outputTokens completion_tokens.
package bedrock
