package mockupstream

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// The Anthropic Messages endpoint: POST /v1/messages (and /messages). It answers the
// shapes of Anthropic's API (message JSON, named SSE events, {"type":"error"} bodies)
// with the same fault controls as chat, so the gateway's Anthropic provider meets the
// failures its OpenAI one does. The text is chat's ("Hello from <identity> chunk 1 ...").

// messagesRequest is the part of a Messages body the mock acts on.
type messagesRequest struct {
	Model     string     `json:"model"`
	MaxTokens *int       `json:"max_tokens"`
	Messages  []struct{} `json:"messages"`
	Stream    bool       `json:"stream"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// message holds what every event of one Anthropic answer shares.
type message struct {
	completion        // id, model, identity, chunks; promptN is input_tokens
	tool       string // the tool_use block's name, or "" for a text-only answer
	// maxed: the request's max tokens cut the answer (Gemini and Bedrock
	// modes, limitTokens), or Behavior.StopAtMaxTokens says it was: it
	// finishes as the format says a length cut does.
	maxed bool
}

// limitTokens cuts the answer at the request's max output tokens, as the
// provider would: fewer chunks than asked for, no tool call, and a length
// finish (Gemini's MAX_TOKENS, Converse's max_tokens). max 0 is no limit.
func (m *message) limitTokens(max int) {
	if max > 0 && max < m.chunks+min(len(m.tool), 1) {
		m.chunks, m.tool, m.maxed = max, "", true
	}
}

// stopAtMaxTokens (Behavior.StopAtMaxTokens) finishes a text answer as cut by
// the token limit, whatever the request asked for.
func (m *message) stopAtMaxTokens(on bool) {
	if on && m.tool == "" {
		m.maxed = true
	}
}

// Tool input fragments: the tool_use input is {"identity":"<identity>"}, streamed as
// two partial_json pieces split after the colon, so a client must join them.
const (
	toolInputHead = `{"identity":`
	toolFragments = 2
)

func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request) {
	c := s.open(w, r, epMessages, anthropicWire{})
	defer c.finish()
	if !c.read() {
		return
	}
	// Anthropic checks credentials before the body, and so does the mock.
	key, _ := headerValue(r.Header, "X-Api-Key")
	if key == "" && !c.b.Keyless {
		c.reject(http.StatusUnauthorized, "x-api-key header is required", "", "")
		return
	}
	if v, _ := headerValue(r.Header, "Anthropic-Version"); v == "" {
		c.reject(http.StatusBadRequest, "anthropic-version: header is required", "", "")
		return
	}
	var req messagesRequest
	if msg := parseMessages(c.body, &req); msg != "" {
		c.reject(http.StatusBadRequest, msg, "", "")
		return
	}
	c.track(req.Model)
	m := message{tool: c.b.ToolUse}
	if m.tool == ToolUseFirst {
		if len(req.Tools) == 0 || req.Tools[0].Name == "" {
			c.reject(http.StatusBadRequest, HeaderToolUse+": * asks for the request's first tool, and it has none", "", "")
			return
		}
		m.tool = req.Tools[0].Name
	}
	c.stamp("Request-Id", "req_mock_")
	if !c.faults(key, req.Stream) {
		return
	}

	m.completion = completion{id: c.id, model: req.Model, identity: c.b.Identity, chunks: c.b.Chunks, promptN: promptTokens(c.body),
		extra: tokensOf(&c.b)}
	m.stopAtMaxTokens(c.b.StopAtMaxTokens)
	if !c.prefill(&m.completion) {
		return
	}
	bufs := bufPool.Get().(*buffers)
	defer bufPool.Put(bufs)
	if !req.Stream {
		if !sleep(r.Context(), c.b.Latency) {
			return
		}
		bufs.out = m.appendBody(bufs.out[:0])
		c.o = writeAnswer(w, bufs.out)
		return
	}
	c.o = m.serveStream(w, r, &c.b, bufs)
}

// parseMessages returns Anthropic's wording of what is wrong with the body, or "".
func parseMessages(body []byte, req *messagesRequest) string {
	if err := json.Unmarshal(body, req); err != nil {
		return "invalid JSON body: " + err.Error()
	}
	switch {
	case req.Model == "":
		return "model: Field required"
	case req.MaxTokens == nil:
		return "max_tokens: Field required"
	case *req.MaxTokens < 1:
		return "max_tokens: Input should be greater than or equal to 1"
	case len(req.Messages) == 0:
		return "messages: Field required"
	}
	return ""
}

// outputTokens is the fake output_tokens: one per chunk, one per tool input fragment,
// and the reasoning (Behavior.ReasoningTokens), which Anthropic counts as output.
func (m *message) outputTokens() int {
	if m.tool != "" {
		return m.chunks + toolFragments + m.extra.reasoning
	}
	return m.chunks + m.extra.reasoning
}

func (m *message) stopReason() string {
	switch {
	case m.tool != "":
		return "tool_use"
	case m.maxed:
		return "max_tokens"
	}
	return "end_turn"
}

// appendToolInputTail appends the part of the tool input after toolInputHead.
func (m *message) appendToolInputTail(dst []byte) []byte {
	return append(appendJSONString(dst, m.identity), '}')
}

// appendBody appends the non-stream message body.
func (m *message) appendBody(dst []byte) []byte {
	dst = append(dst, `{"id":"msg_mock_`...)
	dst = strconv.AppendInt(dst, m.id, 10)
	dst = append(dst, `","type":"message","role":"assistant","model":`...)
	dst = appendJSONString(dst, m.model)
	dst = append(dst, `,"content":[{"type":"text","text":"`...)
	dst = append(m.appendFullText(dst), `"}`...)
	if m.tool != "" {
		dst = m.appendToolBlock(append(dst, ','), true)
	}
	dst = append(dst, `],"stop_reason":"`...)
	dst = append(dst, m.stopReason()...)
	dst = append(dst, `","stop_sequence":null,"usage":{"input_tokens":`...)
	dst = m.appendAnthropicCache(strconv.AppendInt(dst, int64(m.promptN), 10))
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(m.outputTokens()), 10)
	return append(dst, "}}\n"...)
}

// appendToolBlock appends the tool_use block, with its input (the message body) or
// with an empty one (content_block_start, which the input_json_delta events fill).
func (m *message) appendToolBlock(dst []byte, withInput bool) []byte {
	dst = append(dst, `{"type":"tool_use","id":"toolu_mock_`...)
	dst = strconv.AppendInt(dst, m.id, 10)
	dst = append(dst, `","name":`...)
	dst = appendJSONString(dst, m.tool)
	if !withInput {
		return append(dst, `,"input":{}}`...)
	}
	dst = append(dst, `,"input":`+toolInputHead...)
	return append(m.appendToolInputTail(dst), '}')
}

// serveStream writes the event stream on the shared timeline: message_start,
// content_block_start and ping at the first byte, one text_delta per chunk, then
// content_block_stop, the tool_use block when asked for, message_delta and message_stop.
func (m *message) serveStream(w http.ResponseWriter, r *http.Request, b *Behavior, bufs *buffers) outcome {
	ctx := r.Context()
	sse, ok := openStream(w, r, b, bufs)
	if !ok {
		return outcomeCancelled
	}
	if !sse.send(m.appendMessageStart(bufs.out[:0])) ||
		!sse.send(appendTextBlockStart(bufs.out[:0])) ||
		!sse.send(appendPing(bufs.out[:0])) {
		return outcomeCancelled
	}
	for i := max(1, m.from); i <= m.chunks; i++ {
		if !sleep(ctx, b.ChunkInterval) {
			return outcomeCancelled
		}
		bufs.out = appendNamedEvent(bufs.out[:0], "content_block_delta")
		bufs.out = append(bufs.out, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`...)
		bufs.out = append(m.appendText(bufs.out, i), "\"}}\n\n"...)
		if !sse.send(bufs.out) {
			return outcomeCancelled
		}
		if o, done := sse.afterChunk(b, i, bufs, appendAnthropicStreamError, malformedMessages); done {
			return o
		}
	}
	if !sse.send(appendBlockStop(bufs.out[:0], 0)) {
		return outcomeCancelled
	}
	if m.tool != "" {
		bufs.out = appendNamedEvent(bufs.out[:0], "content_block_start")
		bufs.out = append(bufs.out, `{"type":"content_block_start","index":1,"content_block":`...)
		bufs.out = append(m.appendToolBlock(bufs.out, false), "}\n\n"...)
		if !sse.send(bufs.out) {
			return outcomeCancelled
		}
		for _, fragment := range [toolFragments]string{toolInputHead, string(m.appendToolInputTail(nil))} {
			bufs.out = appendNamedEvent(bufs.out[:0], "content_block_delta")
			bufs.out = append(bufs.out, `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":`...)
			bufs.out = append(appendJSONString(bufs.out, fragment), "}}\n\n"...)
			if !sse.send(bufs.out) {
				return outcomeCancelled
			}
		}
		if !sse.send(appendBlockStop(bufs.out[:0], 1)) {
			return outcomeCancelled
		}
	}
	bufs.out = appendNamedEvent(bufs.out[:0], "message_delta")
	bufs.out = append(bufs.out, `{"type":"message_delta","delta":{"stop_reason":"`...)
	bufs.out = append(bufs.out, m.stopReason()...)
	bufs.out = append(bufs.out, `","stop_sequence":null},"usage":{"output_tokens":`...)
	bufs.out = append(strconv.AppendInt(bufs.out, int64(m.outputTokens()), 10), "}}\n\n"...)
	if !sse.send(bufs.out) {
		return outcomeCancelled
	}
	bufs.out = appendNamedEvent(bufs.out[:0], "message_stop")
	if !sse.send(append(bufs.out, `{"type":"message_stop"}`+"\n\n"...)) {
		return outcomeCancelled
	}
	return outcomeCompleted
}

// appendMessageStart appends message_start: the message with empty content, no stop
// reason yet, and output_tokens 1, as Anthropic sends it.
func (m *message) appendMessageStart(dst []byte) []byte {
	dst = appendNamedEvent(dst, "message_start")
	dst = append(dst, `{"type":"message_start","message":{"id":"msg_mock_`...)
	dst = strconv.AppendInt(dst, m.id, 10)
	dst = append(dst, `","type":"message","role":"assistant","model":`...)
	dst = appendJSONString(dst, m.model)
	dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	dst = m.appendAnthropicCache(strconv.AppendInt(dst, int64(m.promptN), 10))
	return append(dst, `,"output_tokens":1}}}`+"\n\n"...)
}

func appendTextBlockStart(dst []byte) []byte {
	dst = appendNamedEvent(dst, "content_block_start")
	return append(dst, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n"...)
}

func appendPing(dst []byte) []byte {
	return append(appendNamedEvent(dst, "ping"), `{"type":"ping"}`+"\n\n"...)
}

func appendBlockStop(dst []byte, index int) []byte {
	dst = appendNamedEvent(dst, "content_block_stop")
	dst = append(dst, `{"type":"content_block_stop","index":`...)
	return append(strconv.AppendInt(dst, int64(index), 10), "}\n\n"...)
}

// appendAnthropicStreamError appends the error event Anthropic sends when a stream
// fails after it started; overloaded is the case its documentation names.
func appendAnthropicStreamError(dst []byte) []byte {
	dst = appendNamedEvent(dst, "error")
	return append(dst, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`+"\n\n"...)
}

// anthropicWire answers Anthropic-shaped errors:
// {"type":"error","error":{"type":...,"message":...}}, with the request id when known.
type anthropicWire struct{}

func (anthropicWire) reject(w http.ResponseWriter, status int, message, _, _ string) {
	writeJSON(w, status, appendAnthropicError(nil, status, message, ""))
}

func (anthropicWire) fail(w http.ResponseWriter, status int, kind, requestID string) {
	if kind == ErrorRequestsExhausted {
		setExhaustedHeaders(w.Header(), true)
	}
	if writeCanned(w, kind, anthropicCanned) {
		return
	}
	message := "mock error"
	if status == statusOverloaded {
		message = "Overloaded"
	}
	writeJSON(w, status, appendAnthropicError(nil, status, message, requestID))
}

// statusOverloaded is Anthropic's own status for an API overloaded for everyone.
const statusOverloaded = 529

// anthropicErrorType maps a status to the error type Anthropic documents for it.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case statusOverloaded:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func appendAnthropicError(dst []byte, status int, message, requestID string) []byte {
	dst = append(dst, `{"type":"error","error":{"type":"`...)
	dst = append(dst, anthropicErrorType(status)...)
	dst = append(dst, `","message":`...)
	dst = appendJSONString(dst, message)
	dst = append(dst, '}')
	if requestID != "" {
		dst = append(dst, `,"request_id":`...)
		dst = appendJSONString(dst, requestID)
	}
	return append(dst, "}\n"...)
}
