package upstream

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type event struct {
	raw     string
	comment bool
}

func readAll(t *testing.T, r io.Reader) ([]event, error) {
	t.Helper()
	er := NewEventReader(r)
	defer er.Close()
	var out []event
	for {
		ev, c, err := er.Next()
		if err != nil {
			return out, err
		}
		out = append(out, event{string(ev), c})
	}
}

// TestEventReader protects byte-for-byte framing and comment detection.
func TestEventReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []event
		err  error
	}{
		{"two events", "data: a\n\ndata: b\n\n", []event{{"data: a\n\n", false}, {"data: b\n\n", false}}, io.EOF},
		{"crlf", "data: a\r\n\r\n", []event{{"data: a\r\n\r\n", false}}, io.EOF},
		{"comments", ": keep-alive\n\n:ping\n\ndata: x\n\n", []event{{": keep-alive\n\n", true}, {":ping\n\n", true}, {"data: x\n\n", false}}, io.EOF},
		{"multi-line event", "event: e\nid: 1\ndata: x\n\n", []event{{"event: e\nid: 1\ndata: x\n\n", false}}, io.EOF},
		{"leading blank lines", "\n\ndata: x\n\n", []event{{"data: x\n\n", false}}, io.EOF},
		{"truncated", "data: a\n\ndata: b", []event{{"data: a\n\n", false}}, io.ErrUnexpectedEOF},
		{"truncated before blank", "data: a\n", nil, io.ErrUnexpectedEOF},
		{"empty", "", nil, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(t, iotest.OneByteReader(strings.NewReader(tt.in)))
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("event %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestEventReaderLongLine(t *testing.T) {
	long := "data: " + strings.Repeat("x", 100<<10) + "\n\n"
	got, err := readAll(t, strings.NewReader(long+"data: [DONE]\n\n"))
	if err != io.EOF || len(got) != 2 || got[0].raw != long || got[1].raw != "data: [DONE]\n\n" {
		t.Fatalf("long line not kept whole: err=%v n=%d", err, len(got))
	}
	_, err = readAll(t, strings.NewReader("data: "+strings.Repeat("x", MaxEventBytes+10)+"\n\n"))
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("oversized event: err = %v, want ProtocolError", err)
	}
}

func TestUsage(t *testing.T) {
	ev := []byte(`data: {"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}` + "\n\n")
	u, ok := EventUsage(ev)
	if !ok || u.PromptTokens != 3 || u.CompletionTokens != 5 || u.TotalTokens != 8 {
		t.Fatalf("EventUsage = %+v %v", u, ok)
	}
	if _, ok := EventUsage([]byte(`data: {"choices":[{"delta":{}}],"usage":null}` + "\n\n")); ok {
		t.Fatal("null usage reported as usage")
	}
	if !hasUsageObject([]byte(`{"x":"usage","usage" : {"total_tokens":1}}`)) || hasUsageObject([]byte(`{"usage":null,"content":"usage"}`)) {
		t.Fatal("hasUsageObject wrong")
	}
	for _, tc := range []struct {
		data  string
		total int64
		ok    bool
	}{
		// Only a top-level member counts, the last of duplicates wins,
		// as with encoding/json.
		{`{"choices":[{"usage":{"total_tokens":5}}],"usage":null}`, 0, false},
		{`{"meta":{"usage":{"total_tokens":5}},"usage":{"total_tokens":7}}`, 7, true},
		{`{"usage":{"total_tokens":1},"usage":{"total_tokens":2}}`, 2, true},
		{`{"usage":{"total_tokens":1},"usage":null}`, 0, false},
		{`{"x":"\"usage\":{}","usage" : {"total_tokens":4} }`, 4, true},
		{`{"usage":{"total_tokens":"4"}}`, 0, false},
		{`{"usage":{"total_tokens":1.5}}`, 0, false},
		{`{"usage":{"total_tokens":3}`, 0, false}, // cut
		{`["usage",{"total_tokens":3}]`, 0, false},
	} {
		u, ok := EventUsage([]byte("data: " + tc.data + "\n\n"))
		if ok != tc.ok || u.TotalTokens != tc.total {
			t.Errorf("EventUsage(%s) = %+v %v, want total %d %v", tc.data, u, ok, tc.total, tc.ok)
		}
	}
	body := []byte(`{"id":"x","choices":[{"message":{"content":"usage"}}],"usage": {"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	u, ok = TailUsage(body[len(body)-90:])
	if !ok || u.TotalTokens != 3 {
		t.Fatalf("TailUsage = %+v %v", u, ok)
	}
}

// TestTailUsage: usage is found at the end of a body, nested details and
// braces inside strings included; anything cut off or malformed is no usage.
func TestTailUsage(t *testing.T) {
	tests := []struct {
		tail string
		want int64 // total tokens; -1 for none
	}{
		{`"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`, 3},
		{`"usage" : {"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":4},"x":"}"}`, 4},
		{`"content":"say \"usage\": {\"total_tokens\": 9}"},"usage":{"note":"a } and a \" {","total_tokens":5}}`, 5},
		{`"usage":{"total_tokens":6`, -1},
		{`"usage":null}`, -1},
		{`"usage":{"total_tokens":"x"}}`, -1},
		{`no usage here`, -1},
	}
	for _, tt := range tests {
		u, ok := TailUsage([]byte(tt.tail))
		if got := map[bool]int64{true: u.TotalTokens, false: -1}[ok]; got != tt.want {
			t.Errorf("TailUsage(%s) = %d, want %d", tt.tail, got, tt.want)
		}
	}
}

// TestEventKinds: an error object and the [DONE] marker are told apart from
// ordinary chunks, whatever the spacing.
func TestEventKinds(t *testing.T) {
	for _, tt := range []struct {
		ev          string
		err, isDone bool
	}{
		{"data: {\"error\":{\"message\":\"overloaded\"}}\n\n", true, false},
		{"data:{ \"error\" : 1}\n\n", true, false},
		{"event: error\ndata: {\"error\":{}}\n\n", true, false},
		{"data: {\"id\":\"x\",\"error\":null}\n\n", false, false},
		{"data: {\"choices\":[]}\n\n", false, false},
		{"data: [DONE]\n\n", false, true},
		{"data:[DONE]\r\n\r\n", false, true},
		{": keep-alive\n\n", false, false},
		{"data: \"error\"\n\n", false, false},
	} {
		if got := EventIsError([]byte(tt.ev)); got != tt.err {
			t.Errorf("EventIsError(%q) = %v", tt.ev, got)
		}
		if got := EventIsDone([]byte(tt.ev)); got != tt.isDone {
			t.Errorf("EventIsDone(%q) = %v", tt.ev, got)
		}
	}
}

// TestHideUsageJoinedData: a chunk whose data came in several data: lines
// has its usage taken out too (written again as data lines), and a usage
// chunk so sent is dropped with its usage read.
func TestHideUsageJoinedData(t *testing.T) {
	p := PassReader{kind: passChat, hide: true}
	out, err := p.Event(nil, []byte("data: {\"choices\":[{\"delta\":{}}],\r\ndata: \"usage\":null}\r\n\r\n"), true)
	if err != nil || string(out) != "data: {\"choices\":[{\"delta\":{}}]}\n\n" {
		t.Fatalf("Event = %q, %v", out, err)
	}
	out, err = p.Event(nil, []byte("data: {\"choices\":[],\ndata: \"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n"), true)
	if err != nil || len(out) != 0 {
		t.Fatalf("usage chunk relayed: %q, %v", out, err)
	}
	if u, ok := p.Usage(); !ok || u.TotalTokens != 3 {
		t.Fatalf("Usage = %+v, %v", u, ok)
	}
}
