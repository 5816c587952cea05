package mockupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package when a handler, timer or connection goroutine outlives its
// test: a stall that is not ended by cancellation would show up here.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixedNow makes "created" assertable.
var fixedNow = time.Unix(1_700_000_000, 0)

const chatBody = `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`
const streamBody = `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"stream":true}`
const streamUsageBody = `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`

// start serves a new mock over loopback and closes it when the test ends.
func start(t testing.TB, b Behavior) (*Server, *httptest.Server) {
	t.Helper()
	s := New(b)
	s.now = func() time.Time { return fixedNow }
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// post sends a chat request with optional X-Mock-* headers (name, value pairs).
func post(t testing.TB, ctx context.Context, ts *httptest.Server, body string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return resp
}

// readAll reads and closes the body.
func readAll(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return b
}

// waitIdle waits for the mock's handlers to end, so Stats are final.
func waitIdle(t testing.TB, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatalf("WaitIdle: %v (stats %+v)", err, s.Stats())
	}
}

type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeError(t testing.TB, raw []byte) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("error body %q: %v", raw, err)
	}
	return e
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// splitEvents checks the SSE framing of a whole body byte for byte: nothing but
// "data: ...\n\n" and ": keep-alive\n\n" events. It returns the events without the
// trailing blank line.
func splitEvents(t testing.TB, raw []byte) []string {
	t.Helper()
	if len(raw) > 0 && !bytes.HasSuffix(raw, []byte("\n\n")) {
		t.Fatalf("stream does not end with a blank line: %q", raw)
	}
	var events []string
	for _, ev := range strings.SplitAfter(string(raw), "\n\n") {
		if ev == "" {
			continue
		}
		ev = strings.TrimSuffix(ev, "\n\n")
		if strings.Contains(ev, "\n") {
			t.Fatalf("event spans lines: %q", ev)
		}
		if ev != ": keep-alive" && !strings.HasPrefix(ev, "data: ") {
			t.Fatalf("unexpected event %q", ev)
		}
		events = append(events, ev)
	}
	return events
}

func decodeChunk(t testing.TB, ev string) chunk {
	t.Helper()
	var c chunk
	if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &c); err != nil {
		t.Fatalf("chunk %q: %v", ev, err)
	}
	return c
}

// nextEvent reads one SSE event (without its blank line) from a live stream.
func nextEvent(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return b.String() + line, err
		}
		if line == "\n" {
			return strings.TrimSuffix(b.String(), "\n"), nil
		}
		b.WriteString(line)
	}
}

// postTo sends a POST to path with optional headers (name, value pairs).
func postTo(t testing.TB, ctx context.Context, ts *httptest.Server, path, body string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// namedEvent is one "event: NAME\ndata: JSON" event of an Anthropic or Responses stream.
type namedEvent struct {
	Name string
	Data string
}

// splitNamedEvents checks the framing of a whole named-event stream byte for byte:
// every event is exactly "event: NAME\ndata: JSON\n\n" whose JSON "type" is NAME, or a
// ": keep-alive" comment (returned with an empty Name).
func splitNamedEvents(t testing.TB, raw []byte) []namedEvent {
	t.Helper()
	if len(raw) > 0 && !bytes.HasSuffix(raw, []byte("\n\n")) {
		t.Fatalf("stream does not end with a blank line: %q", raw)
	}
	var events []namedEvent
	for _, ev := range strings.SplitAfter(string(raw), "\n\n") {
		if ev == "" {
			continue
		}
		ev = strings.TrimSuffix(ev, "\n\n")
		if ev == ": keep-alive" {
			events = append(events, namedEvent{})
			continue
		}
		name, data, ok := strings.Cut(ev, "\n")
		if !ok || !strings.HasPrefix(name, "event: ") || !strings.HasPrefix(data, "data: ") || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		e := namedEvent{Name: strings.TrimPrefix(name, "event: "), Data: strings.TrimPrefix(data, "data: ")}
		var typed struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(e.Data), &typed); err != nil || typed.Type != e.Name {
			t.Fatalf("event %q: data type %q (err %v), want the event name", ev, typed.Type, err)
		}
		events = append(events, e)
	}
	return events
}

func eventNames(events []namedEvent) []string {
	names := make([]string, len(events))
	for i, e := range events {
		names[i] = e.Name
	}
	return names
}

// decodeInto unmarshals raw into v or fails the test.
func decodeInto(t testing.TB, raw string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}
