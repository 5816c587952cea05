package mockupstream

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestErrorKinds: each canned refusal answers its provider's real status, body and
// headers, on the OpenAI routes and the Anthropic one, stream requests included.
func TestErrorKinds(t *testing.T) {
	const (
		oaContext  = `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}` + "\n"
		oaFilter   = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400}}` + "\n"
		antContext = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}` + "\n"
		antLarge   = `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}` + "\n"
	)
	openAI := []target{targets[0], targets[3], targets[4]} // chat, responses, embeddings
	anthropic := []target{targets[1]}
	tests := []struct {
		kind    string
		on      []target
		status  int
		body    string // "" when only the shape is checked
		headers map[string]string
	}{
		{ErrorContextLength, openAI, 400, oaContext, nil},
		{ErrorContentFilter, openAI, 400, oaFilter, nil},
		{ErrorRequestTooLarge, openAI, 413, "", nil},
		{ErrorRequestsExhausted, openAI, 429, "", map[string]string{"X-Ratelimit-Remaining-Requests": "0"}},
		{ErrorContextLength, anthropic, 400, antContext, nil},
		{ErrorRequestTooLarge, anthropic, 413, antLarge, nil},
		{ErrorContentFilter, anthropic, 400, "", nil},
		{ErrorRequestsExhausted, anthropic, 429, "", map[string]string{"Anthropic-Ratelimit-Requests-Remaining": "0"}},
	}
	for _, tt := range tests {
		for _, tg := range tt.on {
			for _, body := range []string{tg.body, tg.streamBody} {
				if body == "" {
					continue
				}
				t.Run(tt.kind+"/"+tg.name, func(t *testing.T) {
					s, ts := start(t, Behavior{})
					resp, err := tg.post(t, context.Background(), ts, body, HeaderErrorKind, tt.kind)
					if err != nil {
						t.Fatal(err)
					}
					raw := string(readAll(t, resp))
					if resp.StatusCode != tt.status {
						t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, raw)
					}
					if tt.body != "" && raw != tt.body {
						t.Errorf("body\n%s\nwant\n%s", raw, tt.body)
					}
					if tg.path == pathMessages {
						var e struct {
							Type  string `json:"type"`
							Error struct{ Type, Message string }
						}
						decodeInto(t, raw, &e)
						if e.Type != "error" || e.Error.Type != anthropicErrorType(tt.status) || e.Error.Message == "" {
							t.Errorf("Anthropic error body %s", raw)
						}
					} else if e := decodeError(t, []byte(raw)); e.Error.Code == nil || *e.Error.Code != wantCode(tt.kind) {
						t.Errorf("OpenAI error body %s, want code %s", raw, wantCode(tt.kind))
					}
					for k, v := range tt.headers {
						if got := resp.Header.Get(k); got != v {
							t.Errorf("header %s = %q, want %q", k, got, v)
						}
					}
					waitIdle(t, s)
					if st := s.Stats(); st.Failed != 1 {
						t.Errorf("Stats = %+v, want 1 failed", st)
					}
				})
			}
		}
	}

	var fe *FieldError
	if err := (Behavior{ErrorKind: "nope"}).Validate(); !errors.As(err, &fe) || fe.Field != "ErrorKind" {
		t.Errorf("Validate(ErrorKind nope) = %v", err)
	}
	_, ts := start(t, Behavior{})
	if resp := post(t, context.Background(), ts, chatBody, HeaderErrorKind, "nope"); resp.StatusCode != 400 {
		t.Errorf("X-Mock-Error-Kind nope: status %d, want 400", resp.StatusCode)
	} else if e := decodeError(t, readAll(t, resp)); e.Error.Param == nil || *e.Error.Param != HeaderErrorKind {
		t.Errorf("rejection %+v", e)
	}
}

func wantCode(kind string) string {
	if kind == ErrorRequestsExhausted {
		return "rate_limit_exceeded"
	}
	return kind
}

// TestErrorKindSchedules: a kind fails like a Status does, per model, once with
// FailFirst, and keeps Retry-After.
func TestErrorKindSchedules(t *testing.T) {
	s, ts := start(t, Behavior{})
	s.SetModelBehavior("gpt-4o", Behavior{ErrorKind: ErrorContextLength, FailFirst: 1})
	got := fmt.Sprint(statuses(t, ts, "gpt-4o", 2), statuses(t, ts, "gpt-4o-mini", 1))
	if got != "[400 200] [200]" {
		t.Errorf("statuses %s, want [400 200] [200]", got)
	}
	resp := post(t, context.Background(), ts, chatBody, HeaderErrorKind, ErrorRequestsExhausted, HeaderRetryAfter, "7")
	readAll(t, resp)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || resp.Header.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Errorf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
}

// TestRateLimitPerModel: 429 with and without Retry-After, and the key-wide 429, each
// on its own model of one mock.
func TestRateLimitPerModel(t *testing.T) {
	s, ts := start(t, Behavior{})
	s.SetModelBehavior("with-retry", Behavior{Status: 429, RetryAfter: "3"})
	s.SetModelBehavior("without", Behavior{Status: 429})
	s.SetModelBehavior("key-wide", Behavior{ErrorKind: ErrorRequestsExhausted})
	tests := []struct {
		model, retryAfter, remaining string
	}{
		{"with-retry", "3", ""},
		{"without", "", ""},
		{"key-wide", "", "0"},
	}
	for _, tt := range tests {
		resp := post(t, context.Background(), ts, chatFor(tt.model))
		e := decodeError(t, readAll(t, resp))
		if resp.StatusCode != 429 || e.Error.Code == nil || *e.Error.Code != "rate_limit_exceeded" {
			t.Errorf("%s: status %d, body %+v", tt.model, resp.StatusCode, e)
		}
		if got := resp.Header.Get("Retry-After"); got != tt.retryAfter {
			t.Errorf("%s: Retry-After %q, want %q", tt.model, got, tt.retryAfter)
		}
		if got := resp.Header.Get("X-Ratelimit-Remaining-Requests"); got != tt.remaining {
			t.Errorf("%s: x-ratelimit-remaining-requests %q, want %q", tt.model, got, tt.remaining)
		}
	}
	if got := statuses(t, ts, "other", 1); got[0] != 200 {
		t.Errorf("other model: %v", got)
	}
}
