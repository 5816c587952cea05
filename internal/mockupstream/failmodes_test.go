package mockupstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestResetBeforeHeaders: the connection closes without a status or a byte, on every
// endpoint, stream or not; per model with FailFirst it resets once, then answers.
func TestResetBeforeHeaders(t *testing.T) {
	for _, tg := range targets {
		for _, body := range []string{tg.body, tg.streamBody} {
			if body == "" {
				continue
			}
			t.Run(tg.name, func(t *testing.T) {
				s, ts := start(t, Behavior{})
				s.SetModelBehavior(bodyModel(tg), Behavior{ResetBeforeHeaders: true, FailFirst: 1})
				resp, err := tg.post(t, context.Background(), ts, body)
				if err == nil {
					raw := readAll(t, resp)
					t.Fatalf("got status %d (%s), want a connection error", resp.StatusCode, raw)
				}
				resp, err = tg.post(t, context.Background(), ts, body)
				if err != nil {
					t.Fatalf("second request: %v", err)
				}
				readAll(t, resp)
				if resp.StatusCode != 200 {
					t.Errorf("second request: status %d", resp.StatusCode)
				}
				waitIdle(t, s)
				if st := s.StatsForModel(bodyModel(tg)); st.Resets != 1 || st.Completed != 1 {
					t.Errorf("StatsForModel = %+v, want 1 reset, 1 completed", st)
				}
				if st := s.Stats(); st.Resets != 1 {
					t.Errorf("Stats = %+v, want 1 reset", st)
				}
			})
		}
	}
}

// TestResetBeforeHeadersRaw: on the wire, not one byte of a response comes back.
func TestResetBeforeHeadersRaw(t *testing.T) {
	s, ts := start(t, Behavior{})
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n%s: true\r\nContent-Length: %d\r\n\r\n%s",
		HeaderResetBeforeHeaders, len(chatBody), chatBody)
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if len(got) != 0 {
		t.Fatalf("read %q, want nothing", got)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the connection stayed open")
	}
	waitIdle(t, s)
}

// TestHangBeforeHeaders: no status and no byte, stream or not, until the client
// leaves (HangRate's stream would get its headers); another model answers.
func TestHangBeforeHeaders(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		headers    []string
		wantErr    bool // no headers before the client's deadline
	}{
		{"non-stream", chatBody, []string{HeaderHangBeforeHeaders, "true"}, true},
		{"stream", streamBody, []string{HeaderHangBeforeHeaders, "1"}, true},
		{"per model, other model answers", withModel(streamBody, "gpt-test", "other"), []string{HeaderForModel, "gpt-test", HeaderHangBeforeHeaders, "1"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, Behavior{})
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+pathChat, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(tt.headers); i += 2 {
				req.Header.Set(tt.headers[i], tt.headers[i+1])
			}
			resp, err := ts.Client().Do(req)
			if tt.wantErr {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Do = %v, %v; want the client's deadline before any header", resp, err)
				}
				waitIdle(t, s)
				if st := s.Stats(); st.Cancelled != 1 {
					t.Errorf("Stats = %+v, want 1 cancelled", st)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
}

// TestMalformedAfterChunks: after N content chunks comes an event whose data is not
// JSON, and the stream then goes on to its normal end, on every streaming endpoint.
func TestMalformedAfterChunks(t *testing.T) {
	tests := []struct {
		name, path, body string
		headers          []string
		content          string // a content event's marker
		malformed        string
		end              string
	}{
		{"chat", pathChat, streamBody, nil, `{"content":"`, malformedChat, doneEvent},
		{"messages", pathMessages, messagesStreamBody, anthropicAuth, `"text_delta"`, malformedMessages, "event: message_stop"},
		{"responses", pathResponses, responsesStreamBody, nil, `"type":"response.output_text.delta"`, malformedResponses, "event: response.completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, Behavior{Chunks: 4})
			resp := postTo(t, context.Background(), ts, tt.path, tt.body, append([]string{HeaderMalformedAfterChunks, "2"}, tt.headers...)...)
			raw := string(readAll(t, resp))
			at := strings.Index(raw, tt.malformed)
			if at < 0 || strings.Count(raw, tt.malformed) != 1 {
				t.Fatalf("want one %q in %s", tt.malformed, raw)
			}
			if before := strings.Count(raw[:at], tt.content); before != 2 {
				t.Errorf("%d content events before the malformed one, want 2", before)
			}
			if after := strings.Count(raw[at:], tt.content); after != 2 {
				t.Errorf("%d content events after the malformed one, want 2", after)
			}
			if !strings.Contains(raw[at:], tt.end) {
				t.Errorf("the stream did not go on to %q: %s", tt.end, raw)
			}
			waitIdle(t, s)
		})
	}

	t.Run("then end", func(t *testing.T) {
		_, ts := start(t, Behavior{Chunks: 4, MalformedAfterChunks: 2, EndAfterChunks: 2})
		raw := string(readAll(t, post(t, context.Background(), ts, streamBody)))
		if !strings.HasSuffix(raw, malformedChat) {
			t.Errorf("want the stream to end with the malformed event: %s", raw)
		}
	})
}

// TestOmitFinishReason: a chat stream can end after its last content chunk with
// neither a finish_reason nor [DONE].
func TestOmitFinishReason(t *testing.T) {
	for _, tt := range []struct {
		name     string
		defaults Behavior
		headers  []string
	}{
		{"behavior", Behavior{Chunks: 3, EndAfterChunks: 3, OmitFinishReason: true}, nil},
		{"headers", Behavior{}, []string{HeaderChunks, "3", HeaderEndAfterChunks, "3", HeaderOmitFinishReason, "true"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.defaults)
			raw := readAll(t, post(t, context.Background(), ts, streamBody, tt.headers...))
			events := splitEvents(t, raw)
			if len(events) != 4 { // role + 3 content chunks
				t.Fatalf("%d events, want 4: %s", len(events), raw)
			}
			var text strings.Builder
			for _, ev := range events {
				c := decodeChunk(t, ev)
				if fr := c.Choices[0].FinishReason; fr != nil {
					t.Errorf("finish_reason %q in %s", *fr, ev)
				}
				if p := c.Choices[0].Delta.Content; p != nil {
					text.WriteString(*p)
				}
			}
			if text.String() != "Hello from mock chunk 1 2 3" {
				t.Errorf("text %q", text.String())
			}
			waitIdle(t, s)
		})
	}
	// Without EndAfterChunks the stream still ends with [DONE], never a finish_reason.
	_, ts := start(t, Behavior{OmitFinishReason: true})
	raw := string(readAll(t, post(t, context.Background(), ts, streamBody)))
	if strings.Contains(raw, `"finish_reason":"`) || !strings.HasSuffix(raw, doneEvent) {
		t.Errorf("body %s", raw)
	}
}

// TestStreamHeadersUnderModelBehavior: a per-model stream fault leaves the other
// model's stream whole, through the same headers.
func TestStreamHeadersUnderModelBehavior(t *testing.T) {
	s, ts := start(t, Behavior{})
	s.SetModelBehavior("gpt-4o", Behavior{ErrorAfterChunks: 1})
	resp := post(t, context.Background(), ts, chatStreamFor("gpt-4o"))
	br := bufio.NewReader(resp.Body)
	var events []string
	for {
		ev, err := nextEvent(br)
		if err != nil {
			break
		}
		events = append(events, ev)
	}
	resp.Body.Close()
	if len(events) != 3 || !strings.Contains(events[2], `"error"`) {
		t.Errorf("gpt-4o events %q, want role, one chunk, the error", events)
	}
	raw := string(readAll(t, post(t, context.Background(), ts, chatStreamFor("gpt-4o-mini"))))
	if !strings.HasSuffix(raw, doneEvent) {
		t.Errorf("gpt-4o-mini stream %s", raw)
	}
}
