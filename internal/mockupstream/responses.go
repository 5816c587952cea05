package mockupstream

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// The OpenAI Responses endpoint: POST /v1/responses (and /responses). It answers a
// response object, or its semantic event stream, with chat's text and fault controls.
// The fields are those the Responses API sends and @ai-sdk/openai's schema reads (id,
// created_at, model, output[].id/role/content, usage, error, incomplete_details); the
// many echoed request settings are left out.

type responsesRequest struct {
	Model  string          `json:"model"`
	Input  json.RawMessage `json:"input"`
	Stream bool            `json:"stream"`
	Tools  json.RawMessage `json:"tools"` // read again, whole, only when present (tools.go)
}

// response holds what every event of one Responses answer shares.
type response struct {
	completion     // id, created, model, identity, chunks; promptN is input_tokens
	seq        int // the next event's sequence_number
}

// Response object states, as "status" says them.
const (
	respInProgress = "in_progress"
	respCompleted  = "completed"
	respFailed     = "failed"
)

func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request) {
	c := s.open(w, r, epResponses, openAIWire{})
	defer c.finish()
	if !c.read() {
		return
	}
	var req responsesRequest
	if msg, param := parseResponses(c.body, &req); msg != "" {
		c.reject(http.StatusBadRequest, msg, param, "invalid_request")
		return
	}
	c.track(req.Model)
	c.stamp("X-Request-Id", "req_mock_")
	if !c.faults(bearerKey(&c.b, r.Header), req.Stream) {
		return
	}

	p := response{completion: completion{
		id:       c.id,
		created:  s.now().Unix(),
		model:    req.Model,
		identity: c.b.Identity,
		chunks:   c.b.Chunks,
		promptN:  promptTokens(c.body),
		extra:    tokensOf(&c.b),
	}}
	if len(req.Tools) > 2 { // neither absent, null nor []
		p.tool = responsesToolCall(c.body)
	}
	bufs := bufPool.Get().(*buffers)
	defer bufPool.Put(bufs)
	if !req.Stream {
		if !sleep(r.Context(), c.b.Latency) {
			return
		}
		bufs.out = append(p.appendObject(bufs.out[:0], respCompleted), '\n')
		c.o = writeAnswer(w, bufs.out)
		return
	}
	c.o = p.serveStream(w, r, &c.b, bufs)
}

func parseResponses(body []byte, req *responsesRequest) (msg, param string) {
	if err := json.Unmarshal(body, req); err != nil {
		return "invalid JSON body: " + err.Error(), ""
	}
	if req.Model == "" {
		return "missing required parameter: 'model'", "model"
	}
	switch string(req.Input) {
	case "", "null", `""`, "[]":
		return "missing required parameter: 'input'", "input"
	}
	return "", ""
}

// serveStream writes the event stream on the shared timeline: response.created,
// response.in_progress, response.output_item.added and response.content_part.added at
// the first byte, one response.output_text.delta per chunk, then the .done events and
// response.completed with usage. There is no [DONE]: the terminal event ends it.
func (p *response) serveStream(w http.ResponseWriter, r *http.Request, b *Behavior, bufs *buffers) outcome {
	ctx := r.Context()
	sse, ok := openStream(w, r, b, bufs)
	if !ok {
		return outcomeCancelled
	}
	for _, name := range [...]string{"response.created", "response.in_progress"} {
		bufs.out = append(p.appendEventHead(bufs.out[:0], name), `,"response":`...)
		bufs.out = append(p.appendObject(bufs.out, respInProgress), "}\n\n"...)
		if !sse.send(bufs.out) {
			return outcomeCancelled
		}
	}
	if p.tool.name != "" {
		return p.serveToolStream(sse, r, b, bufs)
	}
	bufs.out = append(p.appendEventHead(bufs.out[:0], "response.output_item.added"), `,"output_index":0,"item":`...)
	bufs.out = append(p.appendItem(bufs.out, false), "}\n\n"...)
	if !sse.send(bufs.out) {
		return outcomeCancelled
	}
	if !sse.send(p.appendPartEvent(bufs.out[:0], "response.content_part.added", false)) {
		return outcomeCancelled
	}

	for i := 1; i <= p.chunks; i++ {
		if !sleep(ctx, b.ChunkInterval) {
			return outcomeCancelled
		}
		bufs.out = p.appendTextEventHead(bufs.out[:0], "response.output_text.delta")
		bufs.out = append(bufs.out, `,"delta":"`...)
		bufs.out = append(p.appendText(bufs.out, i), `","logprobs":[]}`+"\n\n"...)
		if !sse.send(bufs.out) {
			return outcomeCancelled
		}
		if o, done := sse.afterChunk(b, i, bufs, p.appendStreamError, malformedResponses); done {
			return o
		}
	}

	bufs.out = p.appendTextEventHead(bufs.out[:0], "response.output_text.done")
	bufs.out = append(bufs.out, `,"text":"`...)
	bufs.out = append(p.appendFullText(bufs.out), `","logprobs":[]}`+"\n\n"...)
	if !sse.send(bufs.out) {
		return outcomeCancelled
	}
	if !sse.send(p.appendPartEvent(bufs.out[:0], "response.content_part.done", true)) {
		return outcomeCancelled
	}
	return p.sendDone(&sse, bufs)
}

// appendEventHead appends `event: <name>\ndata: {"type":"<name>","sequence_number":<n>`
// and takes the next sequence number; the caller appends the other fields and `}\n\n`.
func (p *response) appendEventHead(dst []byte, name string) []byte {
	dst = appendNamedEvent(dst, name)
	dst = append(dst, `{"type":"`...)
	dst = append(dst, name...)
	dst = append(dst, `","sequence_number":`...)
	dst = strconv.AppendInt(dst, int64(p.seq), 10)
	p.seq++
	return dst
}

// appendTextEventHead appends an event head with the item_id, output_index and
// content_index that locate the one text part of the answer.
func (p *response) appendTextEventHead(dst []byte, name string) []byte {
	dst = append(p.appendEventHead(dst, name), `,"item_id":"msg_mock_`...)
	dst = strconv.AppendInt(dst, p.id, 10)
	return append(dst, `","output_index":0,"content_index":0`...)
}

func (p *response) appendPartEvent(dst []byte, name string, done bool) []byte {
	dst = append(p.appendTextEventHead(dst, name), `,"part":`...)
	return append(p.appendPart(dst, done), "}\n\n"...)
}

// appendStreamError appends what the Responses API sends when a generation fails after
// the stream started: an error event, then response.failed.
func (p *response) appendStreamError(dst []byte) []byte {
	dst = append(p.appendEventHead(dst, "error"), `,"code":"server_error","message":"mock stream error","param":null}`+"\n\n"...)
	dst = append(p.appendEventHead(dst, "response.failed"), `,"response":`...)
	return append(p.appendObject(dst, respFailed), "}\n\n"...)
}

// appendObject appends the response object in the given state: a completed one holds
// the output and usage, a failed one its error.
func (p *response) appendObject(dst []byte, status string) []byte {
	dst = append(dst, `{"id":"resp_mock_`...)
	dst = strconv.AppendInt(dst, p.id, 10)
	dst = append(dst, `","object":"response","created_at":`...)
	dst = strconv.AppendInt(dst, p.created, 10)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, status...)
	if status == respFailed {
		dst = append(dst, `","error":{"code":"server_error","message":"mock stream error"}`...)
	} else {
		dst = append(dst, `","error":null`...)
	}
	dst = append(dst, `,"incomplete_details":null,"model":`...)
	dst = appendJSONString(dst, p.model)
	if status != respCompleted {
		return append(dst, `,"output":[],"usage":null}`...)
	}
	dst = append(dst, `,"output":[`...)
	dst = p.appendOutputItem(dst)
	dst = append(dst, `],"usage":{"input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.openAIPrompt()), 10)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.extra.cached), 10)
	dst = append(dst, `},"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.openAIOutput()), 10)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.extra.reasoning), 10)
	dst = append(dst, `},"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.openAIPrompt()+p.openAIOutput()), 10)
	return append(dst, "}}"...)
}

// appendItem appends the answer's one output item, a message: empty while in
// progress, with its text part once done.
func (p *response) appendItem(dst []byte, done bool) []byte {
	dst = append(dst, `{"id":"msg_mock_`...)
	dst = strconv.AppendInt(dst, p.id, 10)
	if !done {
		return append(dst, `","type":"message","status":"in_progress","role":"assistant","content":[]}`...)
	}
	dst = append(dst, `","type":"message","status":"completed","role":"assistant","content":[`...)
	return append(p.appendPart(dst, true), "]}"...)
}

// appendPart appends the output_text part: empty when added, whole when done.
func (p *response) appendPart(dst []byte, done bool) []byte {
	dst = append(dst, `{"type":"output_text","text":"`...)
	if done {
		dst = p.appendFullText(dst)
	}
	return append(dst, `","annotations":[]}`...)
}

// serveToolStream streams a function call after response.in_progress: the item
// added with empty arguments, the arguments in one delta (the content chunk the
// faults count), their .done event, the item done and response.completed.
func (p *response) serveToolStream(sse sseStream, r *http.Request, b *Behavior, bufs *buffers) outcome {
	bufs.out = append(p.appendEventHead(bufs.out[:0], "response.output_item.added"), `,"output_index":0,"item":`...)
	bufs.out = append(p.appendFunctionCall(bufs.out, false), "}\n\n"...)
	if !sse.send(bufs.out) || !sleep(r.Context(), b.ChunkInterval) {
		return outcomeCancelled
	}
	bufs.out = p.appendArgumentsEventHead(bufs.out[:0], "response.function_call_arguments.delta")
	bufs.out = append(appendJSONString(append(bufs.out, `,"delta":`...), string(p.tool.args)), "}\n\n"...)
	if !sse.send(bufs.out) {
		return outcomeCancelled
	}
	if o, done := sse.afterChunk(b, 1, bufs, p.appendStreamError, malformedResponses); done {
		return o
	}
	bufs.out = p.appendArgumentsEventHead(bufs.out[:0], "response.function_call_arguments.done")
	bufs.out = append(appendJSONString(append(bufs.out, `,"arguments":`...), string(p.tool.args)), "}\n\n"...)
	if !sse.send(bufs.out) {
		return outcomeCancelled
	}
	return p.sendDone(&sse, bufs)
}

// sendDone ends a stream with response.output_item.done, its item whole
// (the text or the tool call), and response.completed.
func (p *response) sendDone(sse *sseStream, bufs *buffers) outcome {
	bufs.out = append(p.appendEventHead(bufs.out[:0], "response.output_item.done"), `,"output_index":0,"item":`...)
	bufs.out = append(p.appendOutputItem(bufs.out), "}\n\n"...)
	if !sse.send(bufs.out) {
		return outcomeCancelled
	}
	bufs.out = append(p.appendEventHead(bufs.out[:0], "response.completed"), `,"response":`...)
	bufs.out = append(p.appendObject(bufs.out, respCompleted), "}\n\n"...)
	if !sse.send(bufs.out) {
		return outcomeCancelled
	}
	return outcomeCompleted
}

// appendOutputItem appends the answer's one finished output item: the tool
// call when the request gets one, else the message.
func (p *response) appendOutputItem(dst []byte) []byte {
	if p.tool.name != "" {
		return p.appendFunctionCall(dst, true)
	}
	return p.appendItem(dst, true)
}

// appendArgumentsEventHead appends the head of a function_call_arguments event.
func (p *response) appendArgumentsEventHead(dst []byte, name string) []byte {
	dst = append(p.appendEventHead(dst, name), `,"item_id":"fc_mock_`...)
	dst = strconv.AppendInt(dst, p.id, 10)
	return append(dst, `","output_index":0`...)
}

// appendFunctionCall appends the answer's function_call output item: in
// progress with empty arguments, or completed with them.
func (p *response) appendFunctionCall(dst []byte, done bool) []byte {
	dst = append(dst, `{"id":"fc_mock_`...)
	dst = strconv.AppendInt(dst, p.id, 10)
	dst = append(dst, `","type":"function_call","status":`...)
	if done {
		dst = append(dst, `"completed","arguments":`...)
		dst = appendJSONString(dst, string(p.tool.args))
	} else {
		dst = append(dst, `"in_progress","arguments":""`...)
	}
	dst = append(dst, `,"call_id":"call_mock_`...)
	dst = strconv.AppendInt(dst, p.id, 10)
	dst = append(dst, `","name":`...)
	return append(appendJSONString(dst, p.tool.name), '}')
}
