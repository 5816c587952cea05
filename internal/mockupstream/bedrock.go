package mockupstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The AWS Bedrock Runtime Converse API: POST /model/{modelId}/converse and
// /model/{modelId}/converse-stream. It answers Converse's shapes (output.message
// content blocks, stopReason, usage; a stream of application/vnd.amazon.eventstream
// frames encoded with aws-sdk-go-v2's own encoder: messageStart, contentBlockDelta,
// contentBlockStop, messageStop, metadata) with the same fault controls as chat. Errors
// are AWS's: the exception's name in x-amzn-ErrorType, {"message":...} as the body; a
// stream's mid-answer error (ErrorAfterChunks) is an exception frame
// (modelStreamErrorException). inferenceConfig.maxTokens below the answer's chunks
// cuts it there, stopReason max_tokens (and without the tool call).
//
// Every request must carry a well-formed SigV4 Authorization header for service
// bedrock; with EnableBedrock the mock also re-signs the request with the known
// credentials (aws-sdk-go-v2's signer) and refuses one whose signature differs, as AWS
// does (403 InvalidSignatureException). KeyStatus is keyed by the access key id.
//
// Usage, as Converse counts it: inputTokens is the prompt without its cache reads and
// writes (cacheReadInputTokens, cacheWriteInputTokens), outputTokens the answer's
// chunks (and 1 for a tool call).

// bedrockPath matches an operation path; its model id may hold any byte but '/'
// escaped (an ARN's are).
var bedrockPath = regexp.MustCompile(`^/model/([^/]+)/(converse|converse-stream)$`)

// bedrockMethod splits a Converse operation path, escaped as it was sent
// (r.URL.EscapedPath(): an ARN's '/' is %2F there) or decoded; the model is
// returned unescaped.
func bedrockMethod(path string) (model string, stream, ok bool) {
	m := bedrockPath.FindStringSubmatch(path)
	if m == nil {
		return "", false, false
	}
	model, err := url.PathUnescape(m[1])
	if err != nil {
		return "", false, false
	}
	return model, m[2] == "converse-stream", true
}

// bedrockCreds are the credentials EnableBedrock set.
type bedrockCreds struct {
	aws.Credentials
	region string
}

// EnableBedrock makes the mock verify every Converse request's signature with these
// credentials, as AWS would.
func (s *Server) EnableBedrock(region, accessKeyID, secretAccessKey, sessionToken string) {
	s.bedrock.Store(&bedrockCreds{region: region, Credentials: aws.Credentials{
		AccessKeyID: accessKeyID, SecretAccessKey: secretAccessKey, SessionToken: sessionToken}})
}

// sigV4Auth is the shape of a SigV4 Authorization header.
var sigV4Auth = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/, ]+)/(\d{8})/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$`)

// checkSigV4 verifies r's signature; it returns the access key id, or the
// exception's type and message of a refusal.
func (s *Server) checkSigV4(r *http.Request, body []byte) (key, typ, msg string) {
	m := sigV4Auth.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return "", "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	key, region, service, signed, sig := m[1], m[3], m[4], m[5], m[6]
	if service != "bedrock" {
		return "", "InvalidSignatureException", "Credential should be scoped to correct service: 'bedrock'."
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "", "IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
	}
	c := s.bedrock.Load()
	if c == nil {
		return key, "", ""
	}
	if key != c.AccessKeyID {
		return "", "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	if region != c.region {
		return "", "InvalidSignatureException", "Credential should be scoped to a valid region."
	}
	if c.SessionToken != r.Header.Get("X-Amz-Security-Token") {
		return "", "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	// Re-sign what the gateway signed (the signed headers only) with the known
	// credentials: the signatures agree only if every signed byte does.
	req, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	for _, h := range strings.Split(signed, ";") {
		if h == "host" || h == "content-length" {
			continue
		}
		if vv, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			req.Header[http.CanonicalHeaderKey(h)] = vv
		}
	}
	req.ContentLength = r.ContentLength
	req.Header.Del("Authorization")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(r.Context(), c.Credentials, req, hex.EncodeToString(sum[:]), "bedrock", region, when); err != nil {
		return "", "InvalidSignatureException", err.Error()
	}
	if mm := sigV4Auth.FindStringSubmatch(req.Header.Get("Authorization")); mm == nil || mm[6] != sig || mm[5] != signed {
		// AWS quotes the canonical request it expected, signed header
		// values (the session token among them) included: a gateway must
		// not keep or show this text as it came.
		return "", "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. " +
			"The Canonical String for this request should have been 'POST\n" + r.URL.EscapedPath() + "\n\nx-amz-security-token:" +
			r.Header.Get("X-Amz-Security-Token") + "\n' and the credential was '" + m[1] + "/" + m[2] + "'"
	}
	return key, "", ""
}

// bedrockRequest is the part of a Converse request the mock acts on.
type bedrockRequest struct {
	Messages []struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	} `json:"messages"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec struct {
				Name string `json:"name"`
			} `json:"toolSpec"`
		} `json:"tools"`
	} `json:"toolConfig"`
	InferenceConfig struct {
		MaxTokens int `json:"maxTokens"`
	} `json:"inferenceConfig"`
}

func (s *Server) serveBedrock(w http.ResponseWriter, r *http.Request, model string, stream bool) {
	c := s.open(w, r, epBedrock, bedrockWire{})
	c.model = model
	defer c.finish()
	if !c.read() {
		return
	}
	key, typ, msg := s.checkSigV4(r, c.body)
	if typ != "" {
		writeBedrockError(w, http.StatusForbidden, typ, msg)
		c.o = outcomeRejected
		return
	}
	var req bedrockRequest
	if err := json.Unmarshal(c.body, &req); err != nil || len(req.Messages) == 0 {
		c.reject(http.StatusBadRequest, "The provided request is not valid", "", "")
		return
	}
	c.track(model)
	m := message{tool: c.b.ToolUse}
	if m.tool == ToolUseFirst {
		if req.ToolConfig == nil || len(req.ToolConfig.Tools) == 0 {
			c.reject(http.StatusBadRequest, HeaderToolUse+": * asks for the request's first tool, and it has none", "", "")
			return
		}
		m.tool = req.ToolConfig.Tools[0].ToolSpec.Name
	}
	c.stamp("X-Amzn-Requestid", "mock-")
	if !c.faults(key, stream) {
		return
	}
	m.completion = completion{id: c.id, model: model, identity: c.b.Identity, chunks: c.b.Chunks, promptN: promptTokens(c.body),
		noFinish: c.b.OmitFinishReason, extra: tokensOf(&c.b)}
	m.limitTokens(req.InferenceConfig.MaxTokens)
	m.stopAtMaxTokens(c.b.StopAtMaxTokens)
	bufs := bufPool.Get().(*buffers)
	defer bufPool.Put(bufs)
	if !stream {
		if !sleep(r.Context(), c.b.Latency) {
			return
		}
		c.o = writeAnswer(w, m.appendConverseBody(bufs.out[:0]))
		return
	}
	c.o = m.serveConverseStream(w, r, &c.b, bufs)
}

// appendConverseBody appends the Converse answer.
func (m *message) appendConverseBody(dst []byte) []byte {
	dst = append(dst, `{"output":{"message":{"role":"assistant","content":[{"text":"`...)
	dst = append(m.appendFullText(dst), `"}`...)
	if m.tool != "" {
		dst = append(dst, `,{"toolUse":{"toolUseId":"tooluse_mock_`...)
		dst = strconv.AppendInt(dst, m.id, 10)
		dst = append(dst, `","name":`...)
		dst = appendJSONString(dst, m.tool)
		dst = append(dst, `,"input":`+toolInputHead...)
		dst = append(m.appendToolInputTail(dst), "}}"...)
	}
	dst = append(dst, `]}},"stopReason":"`...)
	dst = append(dst, m.converseStop()...)
	dst = append(dst, `",`...)
	dst = m.appendConverseUsage(dst)
	return append(dst, `,"metrics":{"latencyMs":1}}`+"\n"...)
}

func (m *message) converseStop() string {
	switch {
	case m.tool != "":
		return "tool_use"
	case m.maxed:
		return "max_tokens"
	}
	return "end_turn"
}

// appendConverseUsage appends "usage" as Converse counts it.
func (m *message) appendConverseUsage(dst []byte) []byte {
	out := m.chunks
	if m.tool != "" {
		out++
	}
	dst = append(dst, `"usage":{"inputTokens":`...)
	dst = strconv.AppendInt(dst, int64(m.promptN), 10)
	dst = append(dst, `,"outputTokens":`...)
	dst = strconv.AppendInt(dst, int64(out), 10)
	if m.extra.cached > 0 {
		dst = append(dst, `,"cacheReadInputTokens":`...)
		dst = strconv.AppendInt(dst, int64(m.extra.cached), 10)
	}
	if m.extra.cacheWrite > 0 {
		dst = append(dst, `,"cacheWriteInputTokens":`...)
		dst = strconv.AppendInt(dst, int64(m.extra.cacheWrite), 10)
	}
	dst = append(dst, `,"totalTokens":`...)
	return append(strconv.AppendInt(dst, int64(m.openAIPrompt()+out), 10), '}')
}

// AppendEventFrame appends one eventstream event frame (:message-type event) with
// aws-sdk-go-v2's encoder: what a ConverseStream answer is made of. Tests build
// their own streams with it.
func AppendEventFrame(dst []byte, eventType string, payload []byte) []byte {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("event"))
	h.Set(":event-type", eventstream.StringValue(eventType))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	return appendFrame(dst, eventstream.Message{Headers: h, Payload: payload})
}

// AppendExceptionFrame appends an exception frame: typ is the union member's name
// as ConverseStream sends it ("modelStreamErrorException").
func AppendExceptionFrame(dst []byte, typ, message string) []byte {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("exception"))
	h.Set(":exception-type", eventstream.StringValue(typ))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	return appendFrame(dst, eventstream.Message{Headers: h, Payload: append(appendJSONString([]byte(`{"message":`), message), '}')})
}

func appendFrame(dst []byte, msg eventstream.Message) []byte {
	buf := bytes.NewBuffer(dst)
	if err := eventstream.NewEncoder().Encode(buf, msg); err != nil {
		panic("mockupstream: encode eventstream frame: " + err.Error()) // only small frames
	}
	return buf.Bytes()
}

// serveConverseStream writes the stream on the shared timeline, one frame per event.
// OmitFinishReason leaves messageStop and metadata out: the stream then looks cut.
func (m *message) serveConverseStream(w http.ResponseWriter, r *http.Request, b *Behavior, bufs *buffers) outcome {
	ctx := r.Context()
	sse, ok := openStreamAs(w, r, b, bufs, "application/vnd.amazon.eventstream")
	if !ok {
		return outcomeCancelled
	}
	var payload []byte
	for i := 1; i <= m.chunks; i++ {
		if i > 1 && !sleep(ctx, b.ChunkInterval) {
			return outcomeCancelled
		}
		bufs.out = bufs.out[:0]
		if i == 1 {
			bufs.out = AppendEventFrame(bufs.out, "messageStart", []byte(`{"role":"assistant"}`))
		}
		payload = append(payload[:0], `{"contentBlockIndex":0,"delta":{"text":"`...)
		payload = append(m.appendText(payload, i), `"}}`...)
		bufs.out = AppendEventFrame(bufs.out, "contentBlockDelta", payload)
		if !sse.send(bufs.out) {
			return outcomeCancelled
		}
		if o, done := sse.afterChunk(b, i, bufs, appendBedrockStreamError, malformedBedrock); done {
			return o
		}
	}
	bufs.out = AppendEventFrame(bufs.out[:0], "contentBlockStop", []byte(`{"contentBlockIndex":0}`))
	if m.tool != "" {
		payload = append(payload[:0], `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_mock_`...)
		payload = strconv.AppendInt(payload, m.id, 10)
		payload = append(payload, `","name":`...)
		payload = append(appendJSONString(payload, m.tool), "}}}"...)
		bufs.out = AppendEventFrame(bufs.out, "contentBlockStart", payload)
		// The input in two pieces split after the colon, so a client must join them.
		payload = appendJSONString(append(payload[:0], `{"contentBlockIndex":1,"delta":{"toolUse":{"input":`...), toolInputHead)
		bufs.out = AppendEventFrame(bufs.out, "contentBlockDelta", append(payload, "}}}"...))
		tail := m.appendToolInputTail(nil)
		payload = appendJSONString(append(payload[:0], `{"contentBlockIndex":1,"delta":{"toolUse":{"input":`...), string(tail))
		bufs.out = AppendEventFrame(bufs.out, "contentBlockDelta", append(payload, "}}}"...))
		bufs.out = AppendEventFrame(bufs.out, "contentBlockStop", []byte(`{"contentBlockIndex":1}`))
	}
	if !m.noFinish {
		bufs.out = AppendEventFrame(bufs.out, "messageStop", []byte(`{"stopReason":"`+m.converseStop()+`"}`))
		payload = m.appendConverseUsage(append(payload[:0], '{'))
		bufs.out = AppendEventFrame(bufs.out, "metadata", append(payload, `,"metrics":{"latencyMs":1}}`...))
	}
	if !sse.send(bufs.out) {
		return outcomeCancelled
	}
	return outcomeCompleted
}

// malformedBedrock is the frame MalformedAfterChunks sends: a delta whose CRC is
// wrong, which a decoder must refuse.
var malformedBedrock = func() string {
	f := AppendEventFrame(nil, "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"text":"x"}}`))
	f[len(f)-1] ^= 0xff
	return string(f)
}()

// appendBedrockStreamError appends the exception frame Bedrock sends when a stream
// fails after it started.
func appendBedrockStreamError(dst []byte) []byte {
	return AppendExceptionFrame(dst, "modelStreamErrorException", "The model stream failed. Please try again.")
}

// bedrockWire answers AWS-shaped errors.
type bedrockWire struct{}

func (bedrockWire) reject(w http.ResponseWriter, status int, message, _, _ string) {
	writeBedrockError(w, status, bedrockType(status), message)
}

func (bedrockWire) fail(w http.ResponseWriter, status int, kind, _ string) {
	if kind == ErrorContextLength {
		writeBedrockError(w, http.StatusBadRequest, "ValidationException", "Input is too long for requested model.")
		return
	}
	message := "mock error"
	switch status {
	case http.StatusTooManyRequests:
		message = "Too many requests, please wait before trying again."
	case http.StatusServiceUnavailable:
		message = "Bedrock is unable to process your request."
	case http.StatusBadRequest:
		message = "Malformed input request, please reformat your input and try again."
	}
	writeBedrockError(w, status, bedrockType(status), message)
}

// bedrockType is the exception AWS answers a status with.
func bedrockType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "ValidationException"
	case http.StatusUnauthorized:
		return "UnrecognizedClientException"
	case http.StatusForbidden:
		return "AccessDeniedException"
	case http.StatusNotFound:
		return "ResourceNotFoundException"
	case http.StatusRequestTimeout:
		return "ModelTimeoutException"
	case http.StatusFailedDependency:
		return "ModelErrorException"
	case http.StatusTooManyRequests:
		return "ThrottlingException"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableException"
	}
	return "InternalServerException"
}

// writeBedrockError answers as AWS's JSON protocols do.
func writeBedrockError(w http.ResponseWriter, status int, typ, message string) {
	w.Header()["X-Amzn-Errortype"] = []string{typ + ":http://internal.amazon.com/coral/com.amazon.bedrock/"}
	writeJSON(w, status, append(appendJSONString([]byte(`{"message":`), message), "}\n"...))
}
