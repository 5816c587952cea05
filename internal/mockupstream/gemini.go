package mockupstream

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Gemini API: POST /v1beta/models/{model}:generateContent,
// :streamGenerateContent?alt=sse and :batchEmbedContents (also without the /v1beta
// prefix). It answers
// Gemini's shapes (candidates of content parts, finishReason, usageMetadata; SSE
// "data:" events ended by CRLF pairs, as Google's servers write them; errors as
// {"error":{"code","message","status","details"}}) with the same fault controls as
// chat, so a gateway's gemini provider meets the failures its OpenAI one does. The
// text is chat's ("Hello from <identity> chunk 1 ..."). The key is read from
// x-goog-api-key only: a request that carries it in the URL (?key=) is refused, so a
// test notices a gateway that puts it where proxies and access logs keep it.
// generationConfig.maxOutputTokens below the answer's chunks cuts it there, finished
// MAX_TOKENS (and without the function call).
//
// Usage, as Gemini counts it: promptTokenCount is the whole prompt (cache reads and
// writes in it, as OpenAI's prompt_tokens), cachedContentTokenCount the cache reads,
// candidatesTokenCount the answer's chunks (and 1 for a function call) and
// thoughtsTokenCount the reasoning, which Gemini counts apart from the answer.

// geminiModelsPrefixes are where the models collection is: Google's path, and a bare
// one for a base_url that ends in /v1beta.
var geminiModelsPrefixes = [...]string{"/v1beta/models/", "/models/"}

// geminiMethod splits a Gemini method path into its model and method; ok is false for
// a path that is not one.
func geminiMethod(path string) (model, method string, ok bool) {
	for _, p := range geminiModelsPrefixes {
		if rest, found := strings.CutPrefix(path, p); found {
			i := strings.LastIndexByte(rest, ':')
			if i <= 0 {
				return "", "", false
			}
			return rest[:i], rest[i+1:], true
		}
	}
	return "", "", false
}

// geminiRequest is the part of a GenerateContentRequest the mock acts on.
type geminiRequest struct {
	Contents []struct {
		Role  string            `json:"role"`
		Parts []json.RawMessage `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

// serveGemini answers a Gemini method; vertex: on Vertex AI's path, where the
// credential is an access token from /token rather than an API key.
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request, model, method string, vertex bool) {
	c := s.open(w, r, epGemini, geminiWire{})
	c.model = model
	defer c.finish()
	if !c.read() {
		return
	}
	stream := method == "streamGenerateContent"
	switch {
	case method != "generateContent" && !stream && method != "batchEmbedContents":
		c.reject(http.StatusNotFound, "method "+method+" is not served by the mock", "", "")
		return
	case stream && r.URL.Query().Get("alt") != "sse":
		// Without alt=sse Gemini streams one JSON array, which no SSE reader reads.
		c.reject(http.StatusBadRequest, "the mock streams only with alt=sse", "", "")
		return
	case r.URL.Query().Has("key"):
		c.reject(http.StatusBadRequest, "the API key is in the URL; the mock takes it in x-goog-api-key only", "", "")
		return
	}
	var key string
	if vertex {
		tok, ok := s.vertexToken(r)
		switch {
		case method == "batchEmbedContents":
			c.reject(http.StatusNotFound, "method batchEmbedContents is not served on Vertex AI", "", "")
			return
		case !ok:
			c.reject(http.StatusUnauthorized, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.", "", "")
			return
		}
		key = tok // key-scoped faults (KeyStatus) read the token
	} else {
		key, _ = headerValue(r.Header, "X-Goog-Api-Key")
	}
	if key == "" && !c.b.Keyless {
		c.reject(http.StatusForbidden, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", "", "")
		return
	}
	if method == "batchEmbedContents" {
		c.serveGeminiEmbed(model, key)
		return
	}
	var req geminiRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		c.reject(http.StatusBadRequest, "Invalid JSON payload received. "+err.Error(), "", "")
		return
	}
	if len(req.Contents) == 0 {
		c.reject(http.StatusBadRequest, "* GenerateContentRequest.contents: contents is not specified\n", "", "")
		return
	}
	c.track(model)
	m := message{tool: c.b.ToolUse}
	if m.tool == ToolUseFirst {
		if len(req.Tools) == 0 || len(req.Tools[0].FunctionDeclarations) == 0 {
			c.reject(http.StatusBadRequest, HeaderToolUse+": * asks for the request's first function, and it has none", "", "")
			return
		}
		m.tool = req.Tools[0].FunctionDeclarations[0].Name
	}
	c.stamp("X-Goog-Request-Id", "mock-")
	if !c.faults(key, stream) {
		return
	}
	m.completion = completion{id: c.id, model: model, identity: c.b.Identity, chunks: c.b.Chunks, promptN: promptTokens(c.body),
		noFinish: c.b.OmitFinishReason, extra: tokensOf(&c.b)}
	m.limitTokens(req.GenerationConfig.MaxOutputTokens)
	m.stopAtMaxTokens(c.b.StopAtMaxTokens)
	bufs := bufPool.Get().(*buffers)
	defer bufPool.Put(bufs)
	if !stream {
		if !sleep(r.Context(), c.b.Latency) {
			return
		}
		bufs.out = m.appendGeminiBody(bufs.out[:0])
		c.o = writeAnswer(w, bufs.out)
		return
	}
	c.o = m.serveGeminiStream(w, r, &c.b, bufs)
}

// geminiFinish is the answer's finishReason.
func (m *message) geminiFinish() string {
	if m.maxed {
		return "MAX_TOKENS"
	}
	return "STOP"
}

// geminiEventEnd ends an event as Google's servers do.
const geminiEventEnd = "\r\n\r\n"

// appendGeminiBody appends the non-stream GenerateContentResponse.
func (m *message) appendGeminiBody(dst []byte) []byte {
	dst = append(dst, `{"candidates":[{"content":{"role":"model","parts":[{"text":"`...)
	dst = append(m.appendFullText(dst), `"}`...)
	if m.tool != "" {
		dst = m.appendFunctionCall(append(dst, ','))
	}
	dst = append(dst, `]},"finishReason":"`...)
	dst = append(dst, m.geminiFinish()...)
	dst = append(dst, `","index":0}],`...)
	dst = m.appendUsageMetadata(dst, true)
	return m.appendGeminiTail(dst, "}\n")
}

// appendFunctionCall appends the answer's functionCall part: the named function,
// called with {"identity":"<identity>"}.
func (m *message) appendFunctionCall(dst []byte) []byte {
	dst = append(dst, `{"functionCall":{"name":`...)
	dst = appendJSONString(dst, m.tool)
	dst = append(dst, `,"args":`+toolInputHead...)
	return append(m.appendToolInputTail(dst), "}}"...)
}

// appendUsageMetadata appends "usageMetadata": the prompt alone while the answer runs
// (as Gemini's early chunks count it), the whole count with final.
func (m *message) appendUsageMetadata(dst []byte, final bool) []byte {
	prompt := m.openAIPrompt()
	dst = append(dst, `"usageMetadata":{"promptTokenCount":`...)
	dst = strconv.AppendInt(dst, int64(prompt), 10)
	total := prompt
	if final {
		out := m.chunks
		if m.tool != "" {
			out++
		}
		dst = append(dst, `,"candidatesTokenCount":`...)
		dst = strconv.AppendInt(dst, int64(out), 10)
		total += out + m.extra.reasoning
		if m.extra.reasoning > 0 {
			dst = append(dst, `,"thoughtsTokenCount":`...)
			dst = strconv.AppendInt(dst, int64(m.extra.reasoning), 10)
		}
	}
	if m.extra.cached > 0 {
		dst = append(dst, `,"cachedContentTokenCount":`...)
		dst = strconv.AppendInt(dst, int64(m.extra.cached), 10)
	}
	dst = append(dst, `,"totalTokenCount":`...)
	return append(strconv.AppendInt(dst, int64(total), 10), '}')
}

// appendGeminiTail appends modelVersion and responseId, then end.
func (m *message) appendGeminiTail(dst []byte, end string) []byte {
	dst = append(dst, `,"modelVersion":`...)
	dst = appendJSONString(dst, m.model)
	dst = append(dst, `,"responseId":"mock-`...)
	dst = strconv.AppendInt(dst, m.id, 10)
	return append(dst, `"`+end...)
}

// serveGeminiStream writes the stream on the shared timeline: one event per text
// chunk, the last one (or the function call's event after it) with finishReason STOP
// and the whole usageMetadata; Gemini has no terminal event, the body just ends.
// OmitFinishReason leaves the finishReason out: the stream then looks cut.
func (m *message) serveGeminiStream(w http.ResponseWriter, r *http.Request, b *Behavior, bufs *buffers) outcome {
	ctx := r.Context()
	sse, ok := openStream(w, r, b, bufs)
	if !ok {
		return outcomeCancelled
	}
	for i := 1; i <= m.chunks; i++ {
		if i > 1 && !sleep(ctx, b.ChunkInterval) {
			return outcomeCancelled
		}
		last := i == m.chunks && m.tool == ""
		bufs.out = append(bufs.out[:0], `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"`...)
		bufs.out = append(m.appendText(bufs.out, i), `"}]}`...)
		bufs.out = m.appendStreamEnd(bufs.out, last)
		if !sse.send(bufs.out) {
			return outcomeCancelled
		}
		if o, done := sse.afterChunk(b, i, bufs, appendGeminiStreamError, malformedGemini); done {
			return o
		}
	}
	if m.tool != "" {
		bufs.out = append(bufs.out[:0], `data: {"candidates":[{"content":{"role":"model","parts":[`...)
		bufs.out = append(m.appendFunctionCall(bufs.out), "]}"...)
		if !sse.send(m.appendStreamEnd(bufs.out, true)) {
			return outcomeCancelled
		}
	}
	return outcomeCompleted
}

// appendStreamEnd closes a stream event's candidate: with finishReason STOP and the
// whole usage when last (unless noFinish), else the prompt's usage alone.
func (m *message) appendStreamEnd(dst []byte, last bool) []byte {
	if last && !m.noFinish {
		dst = append(dst, `,"finishReason":"`...)
		dst = append(dst, m.geminiFinish()...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"index":0}],`...)
	dst = m.appendUsageMetadata(dst, last)
	return m.appendGeminiTail(dst, "}"+geminiEventEnd)
}

// malformedGemini is the event MalformedAfterChunks sends.
const malformedGemini = "data: {not json" + geminiEventEnd

// appendGeminiStreamError appends the error event Gemini sends when a stream fails
// after it started.
func appendGeminiStreamError(dst []byte) []byte {
	dst = append(dst, "data: "...)
	dst = appendGeminiError(dst, http.StatusServiceUnavailable, "The model is overloaded. Please try again later.", 0)
	return append(dst, geminiEventEnd...)
}

// geminiWire answers Gemini-shaped errors: {"error":{"code","message","status"}},
// with google.rpc.RetryInfo in the details of a 429 when a Retry-After was asked for
// (Gemini sends the wait in the body, not in a header).
type geminiWire struct{}

func (geminiWire) reject(w http.ResponseWriter, status int, message, _, _ string) {
	writeJSON(w, status, appendGeminiError(nil, status, message, 0))
}

func (geminiWire) fail(w http.ResponseWriter, status int, kind, _ string) {
	var delay time.Duration
	if h := w.Header(); len(h["Retry-After"]) > 0 {
		if s, err := strconv.Atoi(h["Retry-After"][0]); err == nil && s > 0 {
			delay = time.Duration(s) * time.Second
		}
		delete(h, "Retry-After")
	}
	if writeCanned(w, kind, geminiCanned) {
		return
	}
	message := "mock error"
	switch status {
	case http.StatusTooManyRequests:
		message = "You exceeded your current quota, please check your plan and billing details."
	case http.StatusServiceUnavailable:
		message = "The model is overloaded. Please try again later."
	}
	writeJSON(w, status, appendGeminiError(nil, status, message, delay))
}

var geminiCanned = map[string][]byte{
	ErrorContextLength:     []byte(`{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}` + "\n"),
	ErrorRequestTooLarge:   []byte(`{"error":{"code":413,"message":"Request payload size exceeds the limit: 20971520 bytes.","status":"INVALID_ARGUMENT"}}` + "\n"),
	ErrorRequestsExhausted: []byte(`{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}` + "\n"),
}

// geminiStatus is the google.rpc.Code name Google's APIs answer status with.
func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// appendGeminiError appends a Gemini error body; a delay adds RetryInfo.
func appendGeminiError(dst []byte, status int, message string, delay time.Duration) []byte {
	dst = append(dst, `{"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, message)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, geminiStatus(status)...)
	dst = append(dst, '"')
	if delay > 0 {
		dst = append(dst, `,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"`...)
		dst = strconv.AppendInt(dst, int64(delay/time.Second), 10)
		dst = append(dst, `s"}]`...)
	}
	return append(dst, "}}\n"...)
}
