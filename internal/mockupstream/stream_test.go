package mockupstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStreamFraming protects the exact OpenAI SSE framing the gateway forwards byte for
// byte: role chunk, content chunks, finish_reason on the last one, the usage chunk only
// when asked for and enabled, and [DONE] last.
func TestStreamFraming(t *testing.T) {
	tests := []struct {
		name      string
		b         Behavior
		body      string
		wantText  string
		wantUsage bool
	}{
		{"defaults", Behavior{Identity: "primary"}, streamBody, "Hello from primary chunk 1 2 3", false},
		{"one chunk", Behavior{Identity: "p", Chunks: 1}, streamBody, "Hello from p chunk 1", false},
		{"usage asked and enabled", Behavior{Identity: "p", Usage: true}, streamUsageBody, "Hello from p chunk 1 2 3", true},
		{"usage asked, provider ignores it", Behavior{Identity: "p"}, streamUsageBody, "Hello from p chunk 1 2 3", false},
		{"usage enabled, not asked", Behavior{Identity: "p", Usage: true}, streamBody, "Hello from p chunk 1 2 3", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.b)
			resp := post(t, context.Background(), ts, tt.body)
			raw := readAll(t, resp)
			if resp.StatusCode != 200 {
				t.Fatalf("status = %d, want 200: %s", resp.StatusCode, raw)
			}
			if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); ct != "text/event-stream" || cc != "no-cache" {
				t.Errorf("Content-Type %q Cache-Control %q, want text/event-stream no-cache", ct, cc)
			}
			if got := resp.Header.Get(HeaderIdentity); got != tt.b.Identity {
				t.Errorf("%s = %q, want %q", HeaderIdentity, got, tt.b.Identity)
			}
			events := splitEvents(t, raw)
			if events[len(events)-1] != "data: [DONE]" {
				t.Fatalf("last event = %q, want data: [DONE]", events[len(events)-1])
			}
			events = events[:len(events)-1]
			chunks := tt.b.Chunks
			if chunks == 0 {
				chunks = DefaultChunks
			}
			wantEvents := 1 + chunks
			if tt.wantUsage {
				wantEvents++
			}
			if len(events) != wantEvents {
				t.Fatalf("%d events before [DONE], want %d: %q", len(events), wantEvents, events)
			}

			var id string
			var text strings.Builder
			for i, ev := range events {
				c := decodeChunk(t, ev)
				if i == 0 {
					id = c.ID
				}
				if c.ID != id || !strings.HasPrefix(id, "chatcmpl-mock-") || c.Object != "chat.completion.chunk" ||
					c.Model != "gpt-test" || c.Created != fixedNow.Unix() {
					t.Errorf("event %d header fields wrong: %s", i, ev)
				}
				if tt.wantUsage && i == len(events)-1 {
					want := usage{PromptTokens: (len(tt.body) + 3) / 4, CompletionTokens: chunks}
					want.TotalTokens = want.PromptTokens + want.CompletionTokens
					if len(c.Choices) != 0 || c.Usage == nil || *c.Usage != want || !strings.Contains(ev, `"choices":[]`) {
						t.Errorf("usage event = %s, want empty choices and %+v", ev, want)
					}
					continue
				}
				if len(c.Choices) != 1 || c.Usage != nil {
					t.Fatalf("event %d = %s, want one choice and no usage", i, ev)
				}
				ch := c.Choices[0]
				if i == 0 {
					if ch.Delta.Role == nil || *ch.Delta.Role != "assistant" || ch.Delta.Content == nil || *ch.Delta.Content != "" {
						t.Errorf("first event = %s, want delta role assistant, content \"\"", ev)
					}
					continue
				}
				if ch.Delta.Content == nil || ch.Delta.Role != nil {
					t.Fatalf("event %d = %s, want a content delta", i, ev)
				}
				text.WriteString(*ch.Delta.Content)
				last := i == chunks
				if last != (ch.FinishReason != nil && *ch.FinishReason == "stop") || !last && !strings.Contains(ev, `"finish_reason":null`) {
					t.Errorf("event %d finish_reason wrong: %s", i, ev)
				}
			}
			if text.String() != tt.wantText {
				t.Errorf("content = %q, want %q", text.String(), tt.wantText)
			}
			waitIdle(t, s)
			if st := s.Stats(); st.Completed != 1 {
				t.Errorf("stats = %+v, want Completed 1", st)
			}
		})
	}
}

// TestStreamTiming checks the lower bounds of each delay, measured by a client reading
// events as they arrive (upper bounds would make the test flaky on a busy machine).
func TestStreamTiming(t *testing.T) {
	const d = 40 * time.Millisecond
	tests := []struct {
		name         string
		headers      []string
		minHeaders   time.Duration // time until the response headers
		minFirstData time.Duration // time until the first data event
		minDone      time.Duration
	}{
		{"latency delays headers", []string{HeaderLatency, "40ms"}, d, d, d},
		{"first byte delay after headers", []string{HeaderFirstByteDelay, "40ms"}, 0, d, d},
		{"chunk interval", []string{HeaderChunkInterval, "20ms"}, 0, 0, 3 * 20 * time.Millisecond},
		{"comments then first byte", []string{HeaderComments, "2", HeaderCommentInterval, "20ms"}, 0, d, d},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := start(t, Behavior{})
			begin := time.Now()
			resp := post(t, context.Background(), ts, streamBody, tt.headers...)
			defer resp.Body.Close()
			if got := time.Since(begin); got < tt.minHeaders {
				t.Errorf("headers after %v, want >= %v", got, tt.minHeaders)
			}
			br := bufio.NewReader(resp.Body)
			var firstData time.Duration
			for {
				ev, err := nextEvent(br)
				if err != nil {
					t.Fatalf("stream ended early: %v", err)
				}
				if firstData == 0 && strings.HasPrefix(ev, "data: {") {
					firstData = time.Since(begin)
				}
				if ev == "data: [DONE]" {
					break
				}
			}
			if firstData < tt.minFirstData {
				t.Errorf("first data event after %v, want >= %v", firstData, tt.minFirstData)
			}
			if got := time.Since(begin); got < tt.minDone {
				t.Errorf("[DONE] after %v, want >= %v", got, tt.minDone)
			}
		})
	}
}

// TestStreamComments checks keep-alive comments come before the first data event, so a
// watchdog test can verify they do not count as a first byte.
func TestStreamComments(t *testing.T) {
	_, ts := start(t, Behavior{Comments: 3, CommentInterval: time.Millisecond})
	events := splitEvents(t, readAll(t, post(t, context.Background(), ts, streamBody)))
	for i := range 3 {
		if events[i] != ": keep-alive" {
			t.Fatalf("event %d = %q, want a keep-alive comment; all: %q", i, events[i], events)
		}
	}
	if !strings.Contains(events[3], `"role":"assistant"`) || events[len(events)-1] != "data: [DONE]" {
		t.Errorf("after the comments: %q, want the role chunk ... [DONE]", events[3:])
	}
}

// TestStreamStalls covers the two stalls: nothing arrives after the point of the stall,
// and only the client's cancellation ends the handler, counted as Cancelled.
func TestStreamStalls(t *testing.T) {
	tests := []struct {
		name       string
		b          Behavior
		headers    []string
		wantEvents int // data events before the stall
	}{
		{"after headers", Behavior{StallAfterHeaders: true}, nil, 0},
		{"after headers by header", Behavior{}, []string{HeaderStallAfterHeaders, "1"}, 0},
		{"after 2 chunks", Behavior{StallAfterChunks: 2, Chunks: 5}, nil, 3},
		{"after last chunk, before [DONE]", Behavior{}, []string{HeaderStallAfterChunks, "3"}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp := post(t, ctx, ts, streamBody, tt.headers...)
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status = %d, want 200", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			for i := range tt.wantEvents {
				if _, err := nextEvent(br); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			// The reader owns br from here; it ends when the cancellation breaks the body.
			extra := make(chan error, 1)
			go func() {
				_, err := br.ReadByte()
				extra <- err
			}()
			select {
			case err := <-extra:
				t.Fatalf("got a byte (or %v) during the stall", err)
			case <-time.After(50 * time.Millisecond):
			}
			if st := s.Stats(); st.InFlight != 1 {
				t.Errorf("InFlight during stall = %d, want 1", st.InFlight)
			}
			cancel()
			if err := <-extra; err == nil {
				t.Errorf("read after cancel succeeded, want an error")
			}
			waitIdle(t, s)
			if st := s.Stats(); st.Cancelled != 1 || st.InFlight != 0 || st.Completed != 0 {
				t.Errorf("stats = %+v, want Cancelled 1, InFlight 0", st)
			}
		})
	}
}

// TestStreamReset checks that a reset mid-stream reaches the client as an unexpected EOF
// after the promised chunks and without [DONE], the failure the gateway must turn into a
// stream_interrupted event.
func TestStreamReset(t *testing.T) {
	tests := []struct {
		name      string
		b         Behavior
		headers   []string
		wantTexts int
	}{
		{"after 1 of 3", Behavior{ResetAfterChunks: 1}, nil, 1},
		{"after 2 by header", Behavior{}, []string{HeaderResetAfterChunks, "2"}, 2},
		{"after all chunks", Behavior{ResetAfterChunks: 3}, nil, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.b)
			resp := post(t, context.Background(), ts, streamBody, tt.headers...)
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("read error = %v, want unexpected EOF", err)
			}
			events := splitEvents(t, raw)
			if len(events) != 1+tt.wantTexts {
				t.Fatalf("got %d events, want role + %d content: %q", len(events), tt.wantTexts, events)
			}
			if strings.Contains(string(raw), "[DONE]") {
				t.Errorf("[DONE] sent despite the reset")
			}
			waitIdle(t, s)
			if st := s.Stats(); st.Resets != 1 || st.InFlight != 0 {
				t.Errorf("stats = %+v, want Resets 1", st)
			}
		})
	}
}

// TestNonStreamCancelled checks that a client that gives up during the latency ends the
// handler at once and is counted as Cancelled, not Completed.
func TestNonStreamCancelled(t *testing.T) {
	s, ts := start(t, Behavior{Latency: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	if resp, err := ts.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("request succeeded, want a deadline error")
	}
	waitIdle(t, s)
	if st := s.Stats(); st.Cancelled != 1 || st.Completed != 0 {
		t.Errorf("stats = %+v, want Cancelled 1", st)
	}
}

// TestWaitIdle checks WaitIdle blocks while a request runs and honours its context.
func TestWaitIdle(t *testing.T) {
	s, ts := start(t, Behavior{StallAfterHeaders: true})
	if err := s.WaitIdle(context.Background()); err != nil {
		t.Fatalf("WaitIdle on a fresh server = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, ctx, ts, streamBody)
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := s.WaitIdle(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitIdle during a stall = %v, want DeadlineExceeded", err)
	}
	cancel()
	resp.Body.Close()
	waitIdle(t, s)
}

// TestStreamUsageNullLikeOpenAI: with include_usage, every chunk before the
// usage chunk ends with "usage":null, as OpenAI's API sends them (the
// gateway strips it for clients that did not ask); without it no chunk
// names usage at all.
func TestStreamUsageNullLikeOpenAI(t *testing.T) {
	_, ts := start(t, Behavior{Chunks: 3, Usage: true})
	asked := splitEvents(t, readAll(t, post(t, context.Background(), ts, streamUsageBody)))
	if len(asked) != 6 { // role, 3 content, usage, [DONE]
		t.Fatalf("%d events with include_usage, want 6: %q", len(asked), asked)
	}
	for i, ev := range asked[:4] {
		if !strings.HasSuffix(ev, `],"usage":null}`) {
			t.Errorf("chunk %d %q does not end with \"usage\":null", i, ev)
		}
	}
	if u := asked[4]; !strings.Contains(u, `"choices":[],"usage":{"prompt_tokens":`) {
		t.Errorf("usage chunk %q", u)
	}
	plain := `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"stream":true}`
	for i, ev := range splitEvents(t, readAll(t, post(t, context.Background(), ts, plain))) {
		if strings.Contains(ev, "usage") {
			t.Errorf("event %d %q names usage without include_usage", i, ev)
		}
	}
}
