package mockupstream

import (
	"net/http"
	"strconv"

	"github.com/llmgw/gateway/internal/jsontext"
)

// Wire encoding by appending into reused buffers. The mock sits under the gateway in
// benchmarks, so it must not be the bottleneck: the per-request prefix of every chunk
// (id, created, model) is encoded once, and each event is one append plus one Write and
// one Flush. encoding/json would re-marshal a struct per chunk.

const (
	commentEvent = ": keep-alive\n\n"
	doneEvent    = "data: [DONE]\n\n"

	roleDelta = `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}`
)

// modelsBody is the GET /v1/models answer; the list is fixed because the gateway
// rewrites the model of each request to whatever its routes name.
var modelsBody = []byte(`{"object":"list","data":[{"id":"mock-model","object":"model","created":0,"owned_by":"mockupstream"}]}`)

// completion holds what every event of one answer shares.
type completion struct {
	id       int64  // chatcmpl-mock-<id>
	created  int64  // unix seconds
	model    string // echoed from the request
	identity string // unescaped
	chunks   int
	promptN  int      // fake prompt_tokens: a deterministic function of the body size
	tool     toolCall // the tool call the answer makes instead of its text (tools.go)
	// usageNull ends every chunk before the usage chunk with "usage":null,
	// as OpenAI does when stream_options.include_usage is true.
	usageNull bool
	noFinish  bool        // Behavior.OmitFinishReason: the last chunk's finish_reason is null
	maxTokens bool        // Behavior.StopAtMaxTokens: a text answer ends as cut by its token limit
	from      int         // the first content chunk sent: a prefill's continuation (prefill.go); 0 is 1
	extra     usageTokens // cache and reasoning counts (usagetokens.go)
}

// closeChunk ends a chunk's choices array and the chunk.
func (c *completion) closeChunk(dst []byte) []byte {
	if c.usageNull {
		return append(dst, `],"usage":null}`+"\n\n"...)
	}
	return append(dst, "]}\n\n"...)
}

// appendUsage writes fake but deterministic counts, so a test can assert that usage
// travelled through the gateway unchanged.
func (c *completion) appendUsage(dst []byte) []byte {
	prompt, out := c.openAIPrompt(), c.openAIOutput()
	dst = append(dst, `"usage":{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(prompt), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(out), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(prompt+out), 10)
	if !c.extra.zero() {
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = strconv.AppendInt(dst, int64(c.extra.cached), 10)
		dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
		dst = strconv.AppendInt(dst, int64(c.extra.reasoning), 10)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendChunkPrefix writes the SSE data prefix of a chunk up to the opening bracket of
// "choices"; every event of the stream starts with these same bytes.
func (c *completion) appendChunkPrefix(dst []byte) []byte {
	dst = append(dst, `data: {"id":"chatcmpl-mock-`...)
	dst = strconv.AppendInt(dst, c.id, 10)
	dst = append(dst, `","object":"chat.completion.chunk","created":`...)
	dst = strconv.AppendInt(dst, c.created, 10)
	dst = append(dst, `,"model":`...)
	dst = appendJSONString(dst, c.model)
	return append(dst, `,"choices":[`...)
}

// appendText writes the escaped content of chunk i (1-based) without quotes. The chunks
// concatenate to "Hello from <identity> chunk 1 2 ... n", which is also the non-stream
// content, so a test compares one string whichever mode it used.
func (c *completion) appendText(dst []byte, i int) []byte {
	if i == 1 {
		dst = append(dst, "Hello from "...)
		dst = jsontext.AppendEscaped(dst, c.identity)
		return append(dst, " chunk 1"...)
	}
	dst = append(dst, ' ')
	return strconv.AppendInt(dst, int64(i), 10)
}

// appendFullText appends the escaped text of all chunks, without quotes: the whole
// answer of a non-stream request.
func (c *completion) appendFullText(dst []byte) []byte {
	for i := 1; i <= c.chunks; i++ {
		dst = c.appendText(dst, i)
	}
	return dst
}

// appendContentChunk appends the whole event of content chunk i after prefix; the last
// one carries finish_reason "stop".
func (c *completion) appendContentChunk(dst, prefix []byte, i int) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, `{"index":0,"delta":{"content":"`...)
	dst = c.appendText(dst, i)
	if i == c.chunks && !c.noFinish {
		dst = append(append(append(dst, `"},"finish_reason":"`...), c.finishReason()...), `"}`...)
		return c.closeChunk(dst)
	}
	return c.closeChunk(append(dst, `"},"finish_reason":null}`...))
}

// finishReason is a text answer's finish_reason.
func (c *completion) finishReason() string {
	if c.maxTokens {
		return "length"
	}
	return "stop"
}

// appendUsageChunk appends the usage event: empty choices, as OpenAI sends it when
// stream_options.include_usage is true.
func (c *completion) appendUsageChunk(dst, prefix []byte) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, "],"...)
	dst = c.appendUsage(dst)
	return append(dst, "}\n\n"...)
}

// appendBody appends the non-stream chat.completion body.
func (c *completion) appendBody(dst []byte) []byte {
	dst = append(dst, `{"id":"chatcmpl-mock-`...)
	dst = strconv.AppendInt(dst, c.id, 10)
	dst = append(dst, `","object":"chat.completion","created":`...)
	dst = strconv.AppendInt(dst, c.created, 10)
	dst = append(dst, `,"model":`...)
	dst = appendJSONString(dst, c.model)
	if c.tool.name != "" {
		dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[`...)
		dst = c.appendToolCall(append(dst, '{'), true, true)
		dst = append(dst, `]},"finish_reason":"tool_calls"}],`...)
		dst = c.appendUsage(dst)
		return append(dst, "}\n"...)
	}
	dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
	dst = c.appendFullText(dst)
	dst = append(append(append(dst, `"},"finish_reason":"`...), c.finishReason()...), `"}],`...)
	dst = c.appendUsage(dst)
	return append(dst, "}\n"...)
}

// appendToolCall appends the answer's tool call as a tool_calls element: with its
// id, type and name (head), and its arguments ("" in a stream's first fragment).
// The caller has opened the object (and put a stream's index in it).
func (c *completion) appendToolCall(dst []byte, head, args bool) []byte {
	if head {
		dst = append(dst, `"id":"call_mock_`...)
		dst = strconv.AppendInt(dst, c.id, 10)
		dst = append(dst, `","type":"function","function":{"name":`...)
		dst = appendJSONString(dst, c.tool.name)
		dst = append(dst, ',')
	} else {
		dst = append(dst, `"function":{`...)
	}
	dst = append(dst, `"arguments":`...)
	if args {
		dst = appendJSONString(dst, string(c.tool.args))
	} else {
		dst = append(dst, `""`...)
	}
	return append(dst, "}}"...)
}

// appendToolChunk appends a stream's tool call chunk: the head with empty
// arguments, or the arguments alone, as OpenAI streams them.
func (c *completion) appendToolChunk(dst, prefix []byte, head bool) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, `{"index":0,"delta":{"tool_calls":[{"index":0,`...)
	dst = c.appendToolCall(dst, head, !head)
	return append(dst, `]},"finish_reason":null}]}`+"\n\n"...)
}

// errorKind maps an injected status to the type and code OpenAI uses for it, so the
// gateway's error classification meets realistic bodies.
func errorKind(status int) (typ, code string) {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error", "invalid_api_key"
	case status == http.StatusForbidden:
		return "permission_error", "permission_denied"
	case status == http.StatusNotFound:
		return "invalid_request_error", "model_not_found"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error", "rate_limit_exceeded"
	case status == http.StatusServiceUnavailable:
		return "server_error", "service_unavailable"
	case status >= 500:
		return "server_error", "server_error"
	default:
		return "invalid_request_error", "mock_error"
	}
}

// appendErrorBody appends {"error":{"message","type","param","code"}}; an empty param
// is encoded as null, as OpenAI does.
func appendErrorBody(dst []byte, message, typ, param, code string) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = appendJSONString(dst, message)
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, typ)
	dst = append(dst, `,"param":`...)
	if param == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, param)
	}
	dst = append(dst, `,"code":`...)
	dst = appendJSONString(dst, code)
	return append(dst, "}}\n"...)
}

func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = jsontext.AppendEscaped(dst, s)
	return append(dst, '"')
}
