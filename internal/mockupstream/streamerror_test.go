package mockupstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestStreamErrorEvent checks that ErrorAfterChunks ends a stream the way OpenAI
// reports a failure mid-generation: the promised chunks, then one error object event,
// then a clean end without [DONE]. The gateway must tell it from a cut (Resets) and, before
// its commit point, fail over on it.
func TestStreamErrorEvent(t *testing.T) {
	tests := []struct {
		name      string
		b         Behavior
		headers   []string
		wantTexts int
	}{
		{"after 1 of 3", Behavior{ErrorAfterChunks: 1}, nil, 1},
		{"after 2 by header", Behavior{}, []string{HeaderErrorAfterChunks, "2"}, 2},
		{"after all chunks", Behavior{ErrorAfterChunks: 3}, nil, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.b)
			resp := post(t, context.Background(), ts, streamBody, tt.headers...)
			raw := readAll(t, resp) // a clean end: no unexpected EOF
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200 (the error comes in the stream)", resp.StatusCode)
			}
			events := splitEvents(t, raw)
			if len(events) != 1+tt.wantTexts+1 {
				t.Fatalf("got %d events, want role + %d content + error: %q", len(events), tt.wantTexts, events)
			}
			for _, ev := range events[:len(events)-1] {
				if c := decodeChunk(t, ev); len(c.Choices) != 1 {
					t.Errorf("event before the error is not a chunk: %s", ev)
				}
			}
			last := events[len(events)-1]
			e := decodeError(t, []byte(strings.TrimPrefix(last, "data: ")))
			if e.Error.Type != "server_error" || e.Error.Message == "" {
				t.Errorf("last event = %s, want an OpenAI error object", last)
			}
			if strings.Contains(string(raw), "[DONE]") {
				t.Errorf("[DONE] sent after the error event")
			}
			waitIdle(t, s)
			if st := s.Stats(); st.Failed != 1 || st.Completed != 0 || st.Resets != 0 || st.InFlight != 0 {
				t.Errorf("stats = %+v, want Failed 1 only", st)
			}
		})
	}
}

// TestStreamErrorEventLosesToReset: a reset at the same chunk wins, so a scenario that
// sets both is still a cut, as the field's documentation promises.
func TestStreamErrorEventLosesToReset(t *testing.T) {
	s, ts := start(t, Behavior{ErrorAfterChunks: 1, ResetAfterChunks: 1})
	resp := post(t, context.Background(), ts, streamBody)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(string(raw), `"error"`) {
		t.Fatalf("read error %v, body %q; want a cut without an error event", err, raw)
	}
	waitIdle(t, s)
	if st := s.Stats(); st.Resets != 1 || st.Failed != 0 {
		t.Errorf("stats = %+v, want Resets 1", st)
	}
}

// TestErrorAfterChunksValidate: the count is checked like the other counts, by field
// and by header.
func TestErrorAfterChunksValidate(t *testing.T) {
	var fe *FieldError
	if err := (Behavior{ErrorAfterChunks: -1}).Validate(); !errors.As(err, &fe) || fe.Field != "ErrorAfterChunks" {
		t.Errorf("Validate(ErrorAfterChunks -1) = %v, want a FieldError for ErrorAfterChunks", err)
	}
	s, ts := start(t, Behavior{})
	resp := post(t, context.Background(), ts, streamBody, HeaderErrorAfterChunks, "two")
	raw := readAll(t, resp)
	if e := decodeError(t, raw); resp.StatusCode != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != HeaderErrorAfterChunks {
		t.Errorf("status %d, body %s; want 400 naming %s", resp.StatusCode, raw, HeaderErrorAfterChunks)
	}
	waitIdle(t, s)
}
