package mockupstream

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

const responsesBody = `{"model":"gpt-test","input":"hi"}`
const responsesStreamBody = `{"model":"gpt-test","input":[{"role":"user","content":"hi"}],"stream":true}`

// responseObject is the part of a response object @ai-sdk/openai's schema requires.
type responseObject struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	CreatedAt         *int64 `json:"created_at"`
	Status            string `json:"status"`
	Model             string `json:"model"`
	Error             *any   `json:"error"`
	IncompleteDetails *any   `json:"incomplete_details"`
	Output            []struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Status  string `json:"status"`
		Role    string `json:"role"`
		Content []struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Annotations []any  `json:"annotations"`
		} `json:"content"`
	} `json:"output"`
	Usage *struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		TotalTokens        int `json:"total_tokens"`
		InputTokensDetails struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	} `json:"usage"`
}

// checkCompleted asserts a completed response object carrying the whole answer.
func checkCompleted(t *testing.T, r responseObject, raw string, wantText string, bodyLen int) {
	t.Helper()
	if !strings.HasPrefix(r.ID, "resp_mock_") || r.Object != "response" || r.CreatedAt == nil || *r.CreatedAt != fixedNow.Unix() ||
		r.Status != "completed" || r.Model != "gpt-test" || r.Error != nil || r.IncompleteDetails != nil ||
		!strings.Contains(raw, `"error":null`) || !strings.Contains(raw, `"incomplete_details":null`) {
		t.Errorf("response header fields wrong: %s", raw)
	}
	if len(r.Output) != 1 || r.Output[0].Type != "message" || !strings.HasPrefix(r.Output[0].ID, "msg_mock_") ||
		r.Output[0].Role != "assistant" || r.Output[0].Status != "completed" || len(r.Output[0].Content) != 1 {
		t.Fatalf("output = %s, want one completed assistant message", raw)
	}
	part := r.Output[0].Content[0]
	if part.Type != "output_text" || part.Text != wantText || part.Annotations == nil {
		t.Errorf("content part = %+v, want output_text %q with annotations []", part, wantText)
	}
	prompt := (bodyLen + 3) / 4
	if r.Usage == nil || r.Usage.InputTokens != prompt || r.Usage.OutputTokens != 3 || r.Usage.TotalTokens != prompt+3 ||
		r.Usage.InputTokensDetails.CachedTokens == nil {
		t.Errorf("usage = %s, want input %d output 3", raw, prompt)
	}
}

func TestResponsesNonStream(t *testing.T) {
	for _, path := range []string{pathResponses, "/responses"} {
		t.Run(path, func(t *testing.T) {
			_, ts := start(t, Behavior{})
			resp := postTo(t, context.Background(), ts, path, responsesBody)
			raw := readAll(t, resp)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %s", resp.StatusCode, raw)
			}
			var r responseObject
			decodeInto(t, string(raw), &r)
			checkCompleted(t, r, string(raw), "Hello from mock chunk 1 2 3", len(responsesBody))
		})
	}
}

// TestResponsesStream checks the semantic event sequence, the sequence numbers, that
// every text event points at the one item, and that the deltas add up to the done text.
func TestResponsesStream(t *testing.T) {
	s, ts := start(t, Behavior{})
	resp := postTo(t, context.Background(), ts, pathResponses, responsesStreamBody)
	raw := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("got %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := splitNamedEvents(t, raw)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if got := eventNames(events); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
	var deltas strings.Builder
	var itemID string
	for i, e := range events {
		var ev struct {
			SequenceNumber *int           `json:"sequence_number"`
			ItemID         string         `json:"item_id"`
			OutputIndex    *int           `json:"output_index"`
			ContentIndex   *int           `json:"content_index"`
			Delta          string         `json:"delta"`
			Text           string         `json:"text"`
			Response       responseObject `json:"response"`
			Item           struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"item"`
		}
		decodeInto(t, e.Data, &ev)
		if ev.SequenceNumber == nil || *ev.SequenceNumber != i {
			t.Errorf("event %d (%s) has sequence_number %v", i, e.Name, ev.SequenceNumber)
		}
		switch e.Name {
		case "response.created", "response.in_progress":
			if ev.Response.Status != "in_progress" || ev.Response.Usage != nil || len(ev.Response.Output) != 0 {
				t.Errorf("%s response = %s, want in_progress without output or usage", e.Name, e.Data)
			}
		case "response.output_item.added":
			itemID = ev.Item.ID
			if ev.Item.Status != "in_progress" || *ev.OutputIndex != 0 {
				t.Errorf("item added = %s", e.Data)
			}
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.output_text.done":
			if ev.Text != deltas.String() {
				t.Errorf("done text %q, deltas %q", ev.Text, deltas.String())
			}
		case "response.completed":
			checkCompleted(t, ev.Response, e.Data, "Hello from mock chunk 1 2 3", len(responsesStreamBody))
		}
		if strings.Contains(e.Name, "content_part") || strings.Contains(e.Name, "output_text") {
			if ev.ItemID != itemID || itemID == "" || ev.OutputIndex == nil || ev.ContentIndex == nil {
				t.Errorf("%s does not locate item %q: %s", e.Name, itemID, e.Data)
			}
		}
	}
	if deltas.String() != "Hello from mock chunk 1 2 3" {
		t.Errorf("deltas = %q", deltas.String())
	}
	waitIdle(t, s)
	if st, _ := s.StatsFor("/responses"); st.Completed != 1 {
		t.Errorf("responses stats = %+v", st)
	}
}

// TestResponsesStreamError: ErrorAfterChunks ends the stream as the Responses API
// reports a failed generation: an error event, then response.failed, never completed.
func TestResponsesStreamError(t *testing.T) {
	s, ts := start(t, Behavior{ErrorAfterChunks: 1})
	resp := postTo(t, context.Background(), ts, pathResponses, responsesStreamBody)
	raw := readAll(t, resp)
	events := splitNamedEvents(t, raw)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "error", "response.failed"}
	if got := eventNames(events); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
	var e struct {
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
		Seq     int     `json:"sequence_number"`
	}
	decodeInto(t, events[5].Data, &e)
	if e.Code != "server_error" || e.Message == "" || e.Seq != 5 {
		t.Errorf("error event = %s", events[5].Data)
	}
	var failed struct {
		Response responseObject `json:"response"`
	}
	decodeInto(t, events[6].Data, &failed)
	if failed.Response.Status != "failed" || failed.Response.Error == nil {
		t.Errorf("response.failed = %s", events[6].Data)
	}
	waitIdle(t, s)
	if st := s.Stats(); st.Failed != 1 {
		t.Errorf("stats = %+v, want Failed 1", st)
	}
}

func TestResponsesErrors(t *testing.T) {
	tests := []struct {
		name, body string
		headers    []string
		wantStatus int
		wantType   string
	}{
		{"missing model", `{"input":"hi"}`, nil, 400, "invalid_request_error"},
		{"missing input", `{"model":"m"}`, nil, 400, "invalid_request_error"},
		{"empty input", `{"model":"m","input":""}`, nil, 400, "invalid_request_error"},
		{"not json", `{"model":`, nil, 400, "invalid_request_error"},
		{"injected 429 on a stream", responsesStreamBody, []string{HeaderStatus, "429"}, 429, "rate_limit_error"},
		{"injected 500", responsesBody, []string{HeaderFailRate, "1"}, 500, "server_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := start(t, Behavior{})
			resp := postTo(t, context.Background(), ts, pathResponses, tt.body, tt.headers...)
			raw := readAll(t, resp)
			if resp.StatusCode != tt.wantStatus || decodeError(t, raw).Error.Type != tt.wantType {
				t.Errorf("got %d %s, want %d %s", resp.StatusCode, raw, tt.wantStatus, tt.wantType)
			}
		})
	}
}
