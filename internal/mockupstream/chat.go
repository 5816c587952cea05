package mockupstream

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// maxBodyBytes is far above any real chat body; the gateway enforces the real limit and
// the mock must not be the one that rejects a large test body.
const maxBodyBytes = 64 << 20

// chatRequest is the part of the body the mock acts on. Messages decode into empty
// structs: their presence is checked, their content is not kept.
type chatRequest struct {
	Model         string     `json:"model"`
	Messages      []struct{} `json:"messages"`
	Stream        bool       `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools json.RawMessage `json:"tools"` // read again, whole, only when present (tools.go)
}

// buffers are reused across requests: one for the per-stream chunk prefix, one for the
// event or body being written.
type buffers struct{ prefix, out []byte }

var bufPool = sync.Pool{New: func() any {
	return &buffers{prefix: make([]byte, 0, 256), out: make([]byte, 0, 1024)}
}}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request) {
	c := s.open(w, r, epChat, openAIWire{})
	defer c.finish()
	if !c.read() {
		return
	}
	var req chatRequest
	if msg, param := parseChat(c.body, &req); msg != "" {
		c.reject(http.StatusBadRequest, msg, param, "invalid_request")
		return
	}
	c.track(req.Model)
	c.stamp("X-Request-Id", "req_mock_")
	if !c.faults(bearerKey(&c.b, r.Header), req.Stream) {
		return
	}

	comp := completion{
		id:        c.id,
		created:   s.now().Unix(),
		model:     req.Model,
		identity:  c.b.Identity,
		chunks:    c.b.Chunks,
		promptN:   promptTokens(c.body),
		noFinish:  c.b.OmitFinishReason,
		maxTokens: c.b.StopAtMaxTokens,
		extra:     tokensOf(&c.b),
	}
	if len(req.Tools) > 2 { // neither absent, null nor []
		comp.tool = chatToolCall(c.body)
	}
	if !c.prefill(&comp) {
		return
	}
	if !req.Stream {
		c.o = serveNonStream(w, r, &c.b, &comp)
		return
	}
	includeUsage := c.b.Usage && req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	c.o = serveStream(w, r, &c.b, &comp, includeUsage)
}

// promptTokens is the fake prompt token count: a deterministic function of the body
// size, so a test can predict it.
func promptTokens(body []byte) int { return (len(body) + 3) / 4 }

// parseChat returns an error message and the offending parameter, or "" when the body is
// a usable chat request. Being strict here lets tests notice a gateway that mangles the
// body it forwards.
func parseChat(body []byte, req *chatRequest) (msg, param string) {
	if err := json.Unmarshal(body, req); err != nil {
		return "invalid JSON body: " + err.Error(), ""
	}
	if req.Model == "" {
		return "missing required parameter: 'model'", "model"
	}
	if len(req.Messages) == 0 {
		return "missing required parameter: 'messages'", "messages"
	}
	return "", ""
}

// hangs decides whether this request hangs (Behavior.HangRate).
func (s *Server) hangs(b *Behavior) bool {
	switch {
	case b.HangRate <= 0:
		return false
	case b.HangRate >= 1:
		return true
	}
	return failsAt(s.hangSeq.Add(1)-1, failRatePPM(b.HangRate))
}

// slow decides whether this stream is one of SlowRate's share.
func (s *Server) slow(b *Behavior) bool {
	switch {
	case b.SlowRate <= 0:
		return false
	case b.SlowRate >= 1:
		return true
	}
	return failsAt(s.slowSeq.Add(1)-1, failRatePPM(b.SlowRate))
}

// readBody reads the whole body into a fresh slice (LastRequest keeps it), sized from
// Content-Length so a typical body costs one allocation.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	size := r.ContentLength
	if size < 0 || size > maxBodyBytes {
		size = 512
	}
	rd := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	buf := make([]byte, 0, size+1) // +1: the read that returns io.EOF needs room
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func serveNonStream(w http.ResponseWriter, r *http.Request, b *Behavior, c *completion) outcome {
	if !sleep(r.Context(), b.Latency) {
		return outcomeCancelled
	}
	bufs := bufPool.Get().(*buffers)
	defer bufPool.Put(bufs)
	bufs.out = c.appendBody(bufs.out[:0])
	return writeAnswer(w, bufs.out)
}

// serveStream writes the SSE answer; see the package comment for the timeline. Each
// event is one Write into the ResponseWriter's buffer and one Flush, so the gateway
// sees it at once and as a single read where possible.
func serveStream(w http.ResponseWriter, r *http.Request, b *Behavior, c *completion, includeUsage bool) outcome {
	ctx := r.Context()
	bufs := bufPool.Get().(*buffers)
	defer bufPool.Put(bufs)
	sse, ok := openStream(w, r, b, bufs)
	if !ok {
		return outcomeCancelled
	}

	bufs.prefix = c.appendChunkPrefix(bufs.prefix[:0])
	c.usageNull = includeUsage
	bufs.out = c.closeChunk(append(append(bufs.out[:0], bufs.prefix...), roleDelta...))
	if !sse.send(bufs.out) {
		return outcomeCancelled
	}
	if c.tool.name != "" {
		return serveToolStream(sse, r, b, c, bufs, includeUsage)
	}
	for i := max(1, c.from); i <= c.chunks; i++ {
		if !sleep(ctx, b.ChunkInterval) {
			return outcomeCancelled
		}
		bufs.out = c.appendContentChunk(bufs.out[:0], bufs.prefix, i)
		if !sse.send(bufs.out) {
			return outcomeCancelled
		}
		if o, done := sse.afterChunk(b, i, bufs, appendChatStreamError, malformedChat); done {
			return o
		}
	}
	if includeUsage {
		bufs.out = c.appendUsageChunk(bufs.out[:0], bufs.prefix)
		if !sse.send(bufs.out) {
			return outcomeCancelled
		}
	}
	if !sse.send(append(bufs.out[:0], doneEvent...)) {
		return outcomeCancelled
	}
	return outcomeCompleted
}

// appendChatStreamError appends the error object event OpenAI sends when a generation
// fails mid-stream; the stream ends after it without [DONE].
func appendChatStreamError(dst []byte) []byte {
	dst = append(dst, "data: "...)
	return append(appendErrorBody(dst, "mock stream error", "server_error", "", "server_error"), '\n')
}

// serveToolStream streams a tool call after the role chunk: its head (id, name,
// empty arguments) and its arguments as the two content chunks the faults count,
// then the finish chunk (tool_calls), usage when asked for and [DONE].
func serveToolStream(sse sseStream, r *http.Request, b *Behavior, c *completion, bufs *buffers, includeUsage bool) outcome {
	for i := 1; i <= 2; i++ {
		if !sleep(r.Context(), b.ChunkInterval) {
			return outcomeCancelled
		}
		bufs.out = c.appendToolChunk(bufs.out[:0], bufs.prefix, i == 1)
		if !sse.send(bufs.out) {
			return outcomeCancelled
		}
		if o, done := sse.afterChunk(b, i, bufs, appendChatStreamError, malformedChat); done {
			return o
		}
	}
	bufs.out = append(append(bufs.out[:0], bufs.prefix...), `{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\n"...)
	if !sse.send(bufs.out) {
		return outcomeCancelled
	}
	if includeUsage {
		bufs.out = c.appendUsageChunk(bufs.out[:0], bufs.prefix)
		if !sse.send(bufs.out) {
			return outcomeCancelled
		}
	}
	if !sse.send(append(bufs.out[:0], doneEvent...)) {
		return outcomeCancelled
	}
	return outcomeCompleted
}
