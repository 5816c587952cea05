// Package gemini translates between OpenAI Chat Completions and Embeddings,
// what the gateway's clients send, and the Gemini API
// (https://ai.google.dev/api/generate-content, POST
// {base_url}/models/{model}:generateContent, :streamGenerateContent?alt=sse
// and :batchEmbedContents), what a Gemini provider speaks.
//
// It owns the pure translation only: ChatToGemini (request), GenerateToChat
// and BodyUsage (non-streaming response), StreamTranslator (SSE events to
// chat.completion.chunk frames), EmbeddingsToGemini and
// EmbeddingsFromGemini, and the reading of Gemini errors (ParseError,
// *Error, ErrorStatus). It does no I/O, sets no header (x-goog-api-key), and
// decides nothing about failover: the upstream package's adapter does, with
// the typed errors defined here. It imports only the standard library and
// internal/jsontext, so upstream can import it; SSE framing is upstream's
// one reader's (EventReader, ParseEvent), which hands each event's data to
// StreamTranslator.Event as it does for the anthropic package.
//
// # Request fields
//
// Translated:
//
//   - model: replaced by Options.Model, which names the method in the URL
//     (Request.Path, Path), not the body.
//   - messages: system and developer messages become systemInstruction, one
//     text part each, in order. user → a "user" turn of parts: text,
//     image_url (a base64 data URL → inlineData; an http(s) or gs:// URL →
//     fileData, its mimeType from the extension: .png .jpg .jpeg .webp .heic
//     .heif .gif .pdf, else refused, as Gemini requires one), input_audio
//     (wav, mp3 → inlineData audio/*), file with file_data (a data URL →
//     inlineData). assistant → a "model" turn: text and refusal parts as
//     text, tool_calls as functionCall parts (the arguments string parsed
//     into args; "" is {}), with the thought signature from the call's
//     extra_content.google.thought_signature (Google's own
//     OpenAI-compatible convention, which GenerateToChat and the stream
//     write) back on the part, as thinking models require. tool → a
//     functionResponse part in a "user" turn, its name resolved from the
//     earlier assistant tool call with that tool_call_id (Gemini matches by
//     name; an unknown id is refused), its response the content when that
//     is a JSON object, else {"output": content}. Consecutive turns of one
//     role are merged, so parallel function responses share one turn.
//     Empty texts and empty turns are left out: Gemini refuses them. At
//     least one turn is required.
//   - max_tokens, else max_completion_tokens, else Options.MaxTokens →
//     generationConfig.maxOutputTokens (which, as max_completion_tokens,
//     bounds thinking too); absent leaves the model's default.
//   - stop (string, or up to 5 strings) → stopSequences; temperature (0 to
//     2, as OpenAI), top_p, top_k, presence_penalty, frequency_penalty and
//     seed (32 bits) are copied as written into generationConfig; n is
//     accepted at 1 only. Some models refuse the penalties
//     (INVALID_ARGUMENT): they are sent rather than dropped, so a client
//     that asked for them learns they were not applied.
//   - response_format: text → nothing; json_object → responseMimeType
//     application/json; json_schema → application/json and
//     responseJsonSchema, which takes the JSON Schema as the client wrote it
//     (the older responseSchema takes an OpenAPI subset that refuses
//     additionalProperties and $ref, which strict clients send).
//   - tools (function tools) → one tools entry of functionDeclarations:
//     name, description, parametersJsonSchema (left out for a function
//     without parameters). tool_choice "auto" → AUTO, "none" → NONE,
//     "required" → ANY, a named function → ANY with allowedFunctionNames
//     [name]. Without tools, "auto" and "none" are left out and a demand for
//     a tool is refused. parallel_tool_calls is accepted at true only.
//   - stream is kept in Request.Stream (it picks the path);
//     stream_options.include_usage in Request.IncludeUsage, for
//     StreamTranslator.
//
// Refused with a *FieldError naming the field (400), because the answer
// could not be what the client asked for; each is accepted at its no-op
// value, given in brackets:
//
//   - n [1]: several candidates are not translated.
//   - logprobs [false], top_logprobs [0]: Gemini's logprobsResult is not
//     translated.
//   - parallel_tool_calls [true]: Gemini has no way to forbid several calls.
//   - modalities [["text"]], audio: no audio output.
//   - logit_bias [{}], verbosity ["medium"].
//   - reasoning_effort: Gemini's thinking budgets and levels differ by
//     model; mapping them is left for later.
//   - web_search_options; functions and function_call (the legacy API); in
//     messages role function, function_call, audio, tool calls that are not
//     functions, file parts by file_id, media URLs of unknown type, and
//     content parts other than those above.
//   - any field not listed here, as OpenAI answers an unknown argument 400.
//
// Dropped in silence, because Gemini has no equivalent and they do not
// change the shape of a correct answer: user and safety_identifier (Gemini
// takes no end-user id), store and metadata, service_tier,
// prompt_cache_key, prediction, a function's strict flag and image detail.
// null is the same as absent for every field.
//
// # Responses
//
// GenerateToChat reads candidates[0]: text parts joined into content (null
// when there is none; thought parts left out), functionCall parts into
// tool_calls (arguments as compact JSON, {} without args; the id Gemini's
// functionCall.id, else "call_{responseId}_{n}"; the thoughtSignature in
// extra_content.google.thought_signature; signatures on text parts are
// dropped, as Gemini requires back only those on function calls). The id
// is "chatcmpl-" +
// responseId (random hex without one); model is the name the client asked
// for. A response without candidates whose promptFeedback has a
// blockReason is a *BlockedError.
//
// finish_reason: STOP → stop, or tool_calls when the answer called a
// function (Gemini ends such a turn with STOP); MAX_TOKENS → length;
// SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII and the IMAGE_
// safety reasons → content_filter; OTHER, LANGUAGE,
// MALFORMED_FUNCTION_CALL and unknown reasons → stop (tool_calls with a
// call).
//
// Usage (the rule): prompt_tokens = promptTokenCount (which already holds
// cachedContentTokenCount) + toolUsePromptTokenCount; completion_tokens =
// candidatesTokenCount + thoughtsTokenCount, since Gemini counts thoughts
// apart and OpenAI counts reasoning inside completion_tokens; total_tokens
// their sum (Gemini's totalTokenCount is not read); cached_tokens =
// cachedContentTokenCount (prompt_tokens_details), reasoning_tokens =
// thoughtsTokenCount (completion_tokens_details). Counts are reported as
// Gemini wrote them, sums saturating rather than wrapping: the gateway
// applies upstream.CheckUsage, which refuses negative and absurd counts
// (1e15). A count that is not a whole number leaves the usage out.
//
// StreamTranslator maps each event (a GenerateContentResponse) the same
// way: the role chunk, held back until the first content; text parts to
// content deltas; each functionCall part (Gemini sends them whole, one or
// several per event) to two tool_calls deltas, as OpenAI streams them: the
// index (counting calls from 0 across events), id, type, name and empty
// arguments, then the arguments; the first finishReason to the finish
// chunk. The latest usageMetadata is the usage. End, at the end of the
// body, writes the usage chunk when asked for and [DONE]; a stream without
// a finishReason was cut (ErrIncomplete). An error object in an event is a
// *Error, a blocked prompt before any content a *BlockedError.
//
// # Embeddings
//
// EmbeddingsToGemini: input (a string or up to MaxEmbedBatch strings) → one
// batchEmbedContents request each, dimensions → outputDimensionality,
// encoding_format float or base64 (the vectors encoded here as OpenAI
// does); token-array input is refused. Gemini reports no usage for
// embeddings, so usage is estimated: ceil(characters / 4) per input.
//
// # Errors
//
// A Gemini error body {"error":{"code","message","status","details"}} is a
// *Error with the HTTP status and the google.rpc status name, the
// ErrorInfo reason (API_KEY_INVALID comes as 400 INVALID_ARGUMENT and is
// key-scoped) and RetryInfo's retryDelay. ClientFault: INVALID_ARGUMENT,
// OUT_OF_RANGE, FAILED_PRECONDITION (billing or region: relayed, as the
// provider contract has it). KeyScoped: UNAUTHENTICATED,
// PERMISSION_DENIED, RESOURCE_EXHAUSTED, API_KEY_* reasons. Retryable: everything else (UNAVAILABLE, INTERNAL,
// DEADLINE_EXCEEDED, NOT_FOUND, unknown). Provider bytes that are not the
// Gemini API wrap ErrMalformed.
package gemini
