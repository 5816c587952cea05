package anthropic

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

type streamCase struct {
	Name         string       `json:"name"`
	SSE          string       `json:"sse"`
	Want         string       `json:"want"`
	IncludeUsage bool         `json:"include_usage"`
	ErrorType    string       `json:"error_type"`
	ErrorMessage string       `json:"error_message"`
	NotDone      bool         `json:"not_done"`
	Usage        fixtureUsage `json:"usage"`
}

// splitEvents cuts a stream into events as upstream.EventReader returns
// them: each up to and including the blank line that ends it.
func splitEvents(stream, sep string) []string {
	var evs []string
	for stream != "" {
		i := strings.Index(stream, sep)
		if i < 0 {
			return append(evs, stream)
		}
		evs = append(evs, stream[:i+len(sep)])
		stream = stream[i+len(sep):]
	}
	return evs
}

// feed gives the translator the events of raw provider bytes, parsed the
// simplest way the SSE rules allow (line ends normalized to "\n", events
// split at blank lines, comments skipped, one space after the colon
// removed, data lines joined with "\n"): upstream's one SSE reader parses
// them so in production, and its tests hold it to these rules.
func feed(tr *StreamTranslator, dst, raw []byte) ([]byte, error) {
	for _, ev := range sseEvents(raw) {
		var err error
		if dst, err = tr.Event(dst, ev.name, ev.data); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

type sseEvent struct{ name, data []byte }

func sseEvents(raw []byte) []sseEvent {
	s := strings.ReplaceAll(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\r", "\n")
	var out []sseEvent
	for _, block := range strings.Split(s, "\n\n") {
		var ev sseEvent
		var data []string
		for _, line := range strings.Split(block, "\n") {
			if line == "" || line[0] == ':' {
				continue
			}
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				ev.name = []byte(value)
			case "data":
				data = append(data, value)
			}
		}
		if data != nil {
			ev.data = []byte(strings.Join(data, "\n"))
			out = append(out, ev)
		}
	}
	return out
}

// TestStreamTranslator replays each testdata/streams fixture event by event
// and all at once, and requires exactly the expected OpenAI bytes, the end
// state and the usage. Line endings are the SSE reader's: upstream's
// TestTranslatedFixtures replays these fixtures with each of them.
func TestStreamTranslator(t *testing.T) {
	for _, tc := range loadJSON[[]streamCase](t, "streams.json") {
		raw, err := os.ReadFile("testdata/streams/" + tc.SSE)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile("testdata/streams/" + tc.Want)
		if err != nil {
			t.Fatal(err)
		}
		lf := string(raw)
		variants := []struct {
			name   string
			events []string
		}{
			{"LF", splitEvents(lf, "\n\n")},
			{"one call", []string{lf}},
		}
		for _, v := range variants {
			t.Run(tc.Name+"/"+v.name, func(t *testing.T) {
				tr := NewStreamTranslator("gpt-4o", 1700000000, tc.IncludeUsage)
				var out []byte
				var err error
				for _, ev := range v.events {
					if out, err = feed(tr, out, []byte(ev)); err != nil {
						break
					}
				}
				if !bytes.Equal(out, want) {
					t.Fatalf("output:\n got %q\nwant %q", out, want)
				}
				checkStreamError(t, err, tc.ErrorType, tc.ErrorMessage)
				if tr.Done() == tc.NotDone {
					t.Fatalf("Done() = %v", tr.Done())
				}
				if u, ok := tr.Usage(); !ok || u != Usage(tc.Usage) {
					t.Fatalf("Usage() = %+v, %v; want %+v", u, ok, tc.Usage)
				}
			})
		}
	}
}

func checkStreamError(t *testing.T, err error, typ, msg string) {
	t.Helper()
	if typ == "" {
		if err != nil {
			t.Fatalf("err = %v", err)
		}
		return
	}
	var se *StreamError
	if !errors.As(err, &se) || se.Type != typ || se.Message != msg {
		t.Fatalf("err = %#v, want StreamError{%q, %q}", err, typ, msg)
	}
}

const (
	evStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
	evText  = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	evStop  = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	head    = `data: {"id":"chatcmpl-msg_x","object":"chat.completion.chunk","created":7,"model":"m",`
	roleOut = head + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n"
)

func delta(stop string) string {
	return "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":" + stop + "},\"usage\":{\"output_tokens\":5}}\n\n"
}

func finishOut(reason string) string {
	return head + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}]}` + "\n\n"
}

// TestStreamEvents covers single-event behaviour the fixtures do not: every
// stop reason, a stream without message_delta, a held-back role chunk, and
// events that are not the Messages API.
func TestStreamEvents(t *testing.T) {
	tests := []struct {
		name    string
		events  []string
		want    string
		wantErr error // ErrMalformed, or a *StreamError to compare
	}{
		{"end_turn", []string{evStart, delta(`"end_turn"`)}, roleOut + finishOut("stop"), nil},
		{"stop_sequence", []string{evStart, delta(`"stop_sequence"`)}, roleOut + finishOut("stop"), nil},
		{"pause_turn", []string{evStart, delta(`"pause_turn"`)}, roleOut + finishOut("stop"), nil},
		{"max_tokens", []string{evStart, delta(`"max_tokens"`)}, roleOut + finishOut("length"), nil},
		{"tool_use", []string{evStart, delta(`"tool_use"`)}, roleOut + finishOut("tool_calls"), nil},
		{"refusal", []string{evStart, delta(`"refusal"`)}, roleOut + finishOut("content_filter"), nil},
		{"null stop reason then one", []string{evStart, delta(`null`), delta(`"end_turn"`), delta(`"max_tokens"`)}, roleOut + finishOut("stop"), nil},
		{"message_stop without message_delta", []string{evStart, evStop}, roleOut + finishOut("stop") + "data: [DONE]\n\n", nil},
		{"message_start alone sends nothing", []string{evStart, "event: ping\ndata: {\"type\":\"ping\"}\n\n"}, "", nil},
		{"event name used when data has no type", []string{evStart, "event: content_block_delta\ndata: {\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"},
			roleOut + head + `"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}` + "\n\n", nil},
		{"no trailing blank line", []string{evStart, strings.TrimSuffix(evText, "\n\n")},
			roleOut + head + `"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}` + "\n\n", nil},
		{"events after message_stop ignored", []string{evStart, evStop, evText, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}\n\n"},
			roleOut + finishOut("stop") + "data: [DONE]\n\n", nil},
		{"error before message_start", []string{"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}\n\n"},
			"", &StreamError{Type: "api_error", Message: "Internal server error"}},
		{"data not JSON", []string{evStart, "event: content_block_delta\ndata: {\"type\":\n\n"}, "", ErrMalformed},
		{"data not an object", []string{"data: [1,2]\n\n"}, "", ErrMalformed},
		{"content before message_start", []string{evText}, "", ErrMalformed},
		{"second message_start", []string{evStart, evStart}, "", ErrMalformed},
		{"text_delta without text", []string{evStart, "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\"}}\n\n"}, "", ErrMalformed},
		{"delta without index", []string{evStart, "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"}, "", ErrMalformed},
		{"tool_use without id", []string{evStart, "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"name\":\"f\"}}\n\n"}, "", ErrMalformed},
		{"error event without type", []string{evStart, "data: {\"type\":\"error\",\"error\":{}}\n\n"}, "", ErrMalformed},
		{"server tool input deltas skipped", []string{evStart,
			"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{}}}\n\n",
			"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"query\\\":1}\"}}\n\n"}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewStreamTranslator("m", 7, false)
			var out []byte
			var err error
			for _, ev := range tt.events {
				if out, err = feed(tr, out, []byte(ev)); err != nil {
					break
				}
			}
			if string(out) != tt.want {
				t.Fatalf("output:\n got %q\nwant %q", out, tt.want)
			}
			var want *StreamError
			switch {
			case tt.wantErr == nil:
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			case errors.As(tt.wantErr, &want):
				checkStreamError(t, err, want.Type, want.Message)
			case !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestStreamInvalidUTF8: a provider string that is not UTF-8 reaches the
// client as valid UTF-8 JSON, each bad byte replaced by U+FFFD.
func TestStreamInvalidUTF8(t *testing.T) {
	tr := NewStreamTranslator("m", 7, false)
	out, err := feed(tr, nil, []byte(evStart))
	if err != nil {
		t.Fatal(err)
	}
	ev := "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\xffb\\n\"}}\n\n"
	if out, err = feed(tr, out, []byte(ev)); err != nil {
		t.Fatal(err)
	}
	want := roleOut + head + `"choices":[{"index":0,"delta":{"content":"a` + "\uFFFD" + `b\n"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	if string(out) != want || !utf8.Valid(out) {
		t.Fatalf("output:\n got %q\nwant %q", out, want)
	}
}

// TestStreamAppendsToDst: Event appends and never touches what dst held.
func TestStreamAppendsToDst(t *testing.T) {
	tr := NewStreamTranslator("m", 7, false)
	dst := []byte("prefix")
	out, err := feed(tr, dst, []byte(evStart+evText))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, []byte("prefix"+roleOut)) {
		t.Fatalf("output %q", out)
	}
}
