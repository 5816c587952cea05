package mockupstream

import "net/http"

// Canned refusals (Behavior.ErrorKind): the bodies and headers a provider really sends
// for errors a gateway must classify by their content rather than their status, such as
// a context length exceeded (do not retry the same prompt on a model with the same
// window) or a whole key out of requests (do not retry on the same key). The OpenAI
// bodies are OpenAI's (the content filter one Azure OpenAI's), byte for byte.

// errorKindStatus is the status a kind answers with, or 0 for an unknown kind.
func errorKindStatus(kind string) int {
	switch kind {
	case ErrorContextLength, ErrorContentFilter:
		return http.StatusBadRequest
	case ErrorRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case ErrorRequestsExhausted:
		return http.StatusTooManyRequests
	}
	return 0
}

var openAICanned = map[string][]byte{
	ErrorContextLength:     []byte(`{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}` + "\n"),
	ErrorContentFilter:     []byte(`{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400}}` + "\n"),
	ErrorRequestTooLarge:   []byte(`{"error":{"message":"Request exceeds the maximum allowed number of bytes.","type":"invalid_request_error","param":null,"code":"request_too_large"}}` + "\n"),
	ErrorRequestsExhausted: []byte(`{"error":{"message":"Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}` + "\n"),
}

var anthropicCanned = map[string][]byte{
	ErrorContextLength:     []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}` + "\n"),
	ErrorContentFilter:     []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"Output blocked by content filtering policy"}}` + "\n"),
	ErrorRequestTooLarge:   []byte(`{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}` + "\n"),
	ErrorRequestsExhausted: []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute."}}` + "\n"),
}

// writeCanned answers kind from bodies; it reports false for a kind it does not know.
func writeCanned(w http.ResponseWriter, kind string, bodies map[string][]byte) bool {
	body, ok := bodies[kind]
	if !ok {
		return false
	}
	writeJSON(w, errorKindStatus(kind), body)
	return true
}

// setExhaustedHeaders sets the rate-limit headers of a key with no requests left.
func setExhaustedHeaders(h http.Header, anthropic bool) {
	if anthropic {
		h["Anthropic-Ratelimit-Requests-Limit"] = []string{"50"}
		h["Anthropic-Ratelimit-Requests-Remaining"] = []string{"0"}
		return
	}
	h["X-Ratelimit-Limit-Requests"] = []string{"500"}
	h["X-Ratelimit-Remaining-Requests"] = []string{"0"}
	h["X-Ratelimit-Reset-Requests"] = []string{"120ms"}
}
