package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/llmgw/gateway/internal/upstream/anthropic"
)

// The SSE reader's tests: each rule of the WHATWG interpretation on its
// own (TestEventReaderRules, TestParseEventRules), every way reads can cut
// a stream (TestEventReaderSplits), and arbitrary input held to a reference
// written from the spec (FuzzEventReader).

// refLine is one line as the spec tokenizes a stream: the longest match of
// "any run of characters but CR and LF, then CRLF, CR or LF" (leftmost
// alternative first, so "\r\n" is one line end).
var refLine = regexp.MustCompile(`(?s)^([^\r\n]*)(\r\n|\r|\n)`)

// refEvent is an event as the reference reads it.
type refEvent struct {
	raw     string
	comment bool
	fields  refFields
}

type refFields struct {
	name, data, id string
	hasData, hasID bool
	retry          int64
	dataLines      int
}

// referenceEvents is the framing and parse EventReader and ParseEvent must
// implement, written the obvious way over the whole input: a leading BOM is
// dropped, lines are cut by refLine, a blank line ends the event, blank
// lines before an event's first line are dropped, and an event is a comment
// when all its lines start with ':'. Text after the last line end, or an
// event without its blank line, is a cut: io.ErrUnexpectedEOF.
func referenceEvents(in string) ([]refEvent, error) {
	in = strings.TrimPrefix(in, "\xef\xbb\xbf")
	var out []refEvent
	var raw string
	var lines []string
	for {
		m := refLine.FindStringSubmatch(in)
		if m == nil {
			break
		}
		in = in[len(m[0]):]
		switch {
		case m[1] == "" && raw == "":
		case m[1] == "":
			comment := true
			for _, l := range lines {
				comment = comment && l[0] == ':'
			}
			out = append(out, refEvent{raw + m[0], comment, referenceFields(lines)})
			raw, lines = "", nil
		default:
			raw += m[0]
			lines = append(lines, m[1])
		}
	}
	if in != "" || raw != "" {
		return out, io.ErrUnexpectedEOF
	}
	return out, io.EOF
}

// referenceFields interprets an event's lines as the spec's steps say.
func referenceFields(lines []string) refFields {
	f := refFields{retry: -1}
	var data strings.Builder
	for _, l := range lines {
		if strings.HasPrefix(l, ":") {
			continue
		}
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			f.name = value
		case "data":
			data.WriteString(value + "\n")
			f.hasData = true
			f.dataLines++
		case "id":
			if !strings.Contains(value, "\x00") {
				f.id, f.hasID = value, true
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				if n, err := strconv.ParseInt(value, 10, 64); err == nil {
					f.retry = n
				}
			}
		}
	}
	f.data = strings.TrimSuffix(data.String(), "\n")
	return f
}

// fieldsOf is ParseEvent's reading of ev, as a refFields: dataLines is 0,
// 1 or 2 (joined from several).
func fieldsOf(ev []byte) refFields {
	f := ParseEvent(ev)
	lines := 0
	if f.HasData {
		lines = 1
		if f.Joined {
			lines = 2
		}
	}
	return refFields{name: string(f.Name), data: string(f.Data), id: string(f.ID), hasData: f.HasData, hasID: f.HasID, retry: f.Retry, dataLines: lines}
}

// readEvents reads r to its end, each event with ParseEvent's fields.
func readEvents(r io.Reader) ([]refEvent, error) {
	er := NewEventReader(r)
	defer er.Close()
	var out []refEvent
	for {
		ev, c, err := er.Next()
		if err != nil {
			return out, err
		}
		out = append(out, refEvent{string(ev), c, fieldsOf(ev)})
	}
}

// sameEvents fails unless got matches want (one or two data lines stand for
// "joined or not").
func sameEvents(t *testing.T, how string, got, want []refEvent, err, wantErr error) {
	t.Helper()
	if err != wantErr {
		t.Fatalf("%s: err = %v, want %v", how, err, wantErr)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events %+v, want %d %+v", how, len(got), got, len(want), want)
	}
	for i := range got {
		w := want[i]
		w.fields.dataLines = min(w.fields.dataLines, 2)
		if got[i] != w {
			t.Fatalf("%s: event %d = %+v, want %+v", how, i, got[i], w)
		}
	}
}

// FuzzEventReader holds EventReader and ParseEvent to referenceEvents on
// any input, read whole, one byte at a time, and in two reads cut at every
// point (a short input) or at a point the input picks, so every buffer
// boundary is exercised.
func FuzzEventReader(f *testing.F) {
	f.Add([]byte("data: a\n\n: c\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: a\r\n\r\nevent: x\ndata: y"))
	f.Add([]byte("\n\r\n:x\ndata: " + strings.Repeat("y", 1500) + "\n\n"))
	f.Add([]byte("\xef\xbb\xbfdata: a\rdata:b\rid: 1\x00\rretry: 12\r\r"))
	f.Add([]byte("event:e\r\ndata\r\nretry: -1\nid\n\r\n\xef\xbb\xbfdata: x\r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantErr := referenceEvents(string(b))
		got, err := readEvents(bytes.NewReader(b))
		sameEvents(t, "whole", got, want, err, wantErr)
		got, err = readEvents(iotest.OneByteReader(bytes.NewReader(b)))
		sameEvents(t, "byte by byte", got, want, err, wantErr)
		cuts := []int{0}
		for _, c := range b {
			cuts[0] = cuts[0]*31 + int(c)
		}
		cuts[0] = (cuts[0] & 0xffff) % (len(b) + 1)
		if len(b) <= 64 {
			cuts = cuts[:0]
			for k := range len(b) + 1 {
				cuts = append(cuts, k)
			}
		}
		for _, k := range cuts {
			got, err = readEvents(io.MultiReader(bytes.NewReader(b[:k]), bytes.NewReader(b[k:])))
			sameEvents(t, "cut at "+strconv.Itoa(k), got, want, err, wantErr)
		}
	})
}

// FuzzParseEvent holds ParseEvent to the spec's field steps on any bytes:
// the lines of the first event (blank lines before it skipped; one not
// ended by a blank line ends with the input), cut by refLine.
func FuzzParseEvent(f *testing.F) {
	f.Add([]byte("event: e\r\ndata: a\rdata:\n:c\nid: 1\nretry: 5\n\ndata: next\n\n"))
	f.Add([]byte("\n\rdata\r\ndata:  x"))
	f.Add([]byte("id: a\x00b\rretry: 1x\revent\r\r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := string(b)
		var lines []string
		for in != "" {
			line := in
			if m := refLine.FindStringSubmatch(in); m != nil {
				line, in = m[1], in[len(m[0]):]
			} else {
				in = ""
			}
			if line == "" {
				if lines != nil {
					break
				}
				continue
			}
			lines = append(lines, line)
		}
		want := referenceFields(lines)
		want.dataLines = min(want.dataLines, 2)
		if got := fieldsOf(b); got != want {
			t.Fatalf("ParseEvent(%q) = %+v, want %+v", b, got, want)
		}
	})
}

// TestEventReaderRules: each framing rule, read one byte at a time.
func TestEventReaderRules(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // raw events
		err  error
	}{
		{"LF", "data: a\n\ndata: b\n\n", []string{"data: a\n\n", "data: b\n\n"}, io.EOF},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"data: a\r\n\r\n", "data: b\r\n\r\n"}, io.EOF},
		{"bare CR", "data: a\r\rdata: b\r\r", []string{"data: a\r\r", "data: b\r\r"}, io.EOF},
		{"mixed", "data: a\r\ndata: b\r\n\revent: x\rdata: c\n\r\n", []string{"data: a\r\ndata: b\r\n\r", "event: x\rdata: c\n\r\n"}, io.EOF},
		{"CR then LF is one line end", "data: a\r\n\n", []string{"data: a\r\n\n"}, io.EOF},
		{"CR at the end of the body", "data: a\r\r", []string{"data: a\r\r"}, io.EOF},
		{"BOM dropped", "\xef\xbb\xbfdata: a\n\n", []string{"data: a\n\n"}, io.EOF},
		{"BOM only at the start", "\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n", []string{"\xef\xbb\xbfdata: a\n\n"}, io.EOF},
		{"part of a BOM", "\xef\xbbdata: a\n\n", []string{"\xef\xbbdata: a\n\n"}, io.EOF},
		{"BOM alone", "\xef\xbb\xbf", nil, io.EOF},
		{"leading blank lines", "\r\n\r\rdata: x\n\n", []string{"data: x\n\n"}, io.EOF},
		{"comment event", ": keep-alive\r\r", []string{": keep-alive\r\r"}, io.EOF},
		{"cut after CR", "data: a\r", nil, io.ErrUnexpectedEOF},
		{"cut mid line", "data: a\n\ndata: b", []string{"data: a\n\n"}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readEvents(iotest.OneByteReader(strings.NewReader(tt.in)))
			if err != tt.err {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %q", got, tt.want)
			}
			for i := range got {
				if got[i].raw != tt.want[i] {
					t.Fatalf("event %d = %q, want %q", i, got[i].raw, tt.want[i])
				}
			}
		})
	}
}

// TestEventReaderCRBeforeRead: an event whose blank line is a '\r' ending
// a read is not returned before the next byte says whether a '\n' follows
// (the '\n' is the event's, and no second, empty line), and Buffered
// agrees.
func TestEventReaderCRBeforeRead(t *testing.T) {
	src := &onceReader{data: []byte("data: a\r\n\r")}
	r := NewEventReader(io.MultiReader(src, strings.NewReader("\ndata: b\r\n\r\n")))
	defer r.Close()
	ev, _, err := r.Next()
	if err != nil || string(ev) != "data: a\r\n\r\n" {
		t.Fatalf("Next = %q, %v", ev, err)
	}
	if r.Buffered() != true {
		t.Fatal("second event not reported buffered")
	}
	if ev, _, err = r.Next(); err != nil || string(ev) != "data: b\r\n\r\n" {
		t.Fatalf("Next = %q, %v", ev, err)
	}
	if _, _, err = r.Next(); err != io.EOF {
		t.Fatalf("err = %v", err)
	}
}

// TestEventReaderSplits: the same stream read whole, one byte at a time
// and in two reads cut at every point gives the same events, raw bytes and
// fields.
func TestEventReaderSplits(t *testing.T) {
	streams := []string{
		"\xef\xbb\xbfevent: message_start\r\ndata: {\"a\":1}\r\n\r\n: ping\r\n\r\ndata: x\r\ndata: y\r\n\r\n",
		"data: a\rid: 7\rretry: 30\r\rdata: b\r\r",
		"data: a\n\r\n\r\ndata: b\r\n\n",
		"event: e\ndata\n\n\n\ndata:  two spaces\n\n",
	}
	for _, s := range streams {
		want, wantErr := readEvents(strings.NewReader(s))
		if wantErr != io.EOF || len(want) == 0 {
			t.Fatalf("%q: %d events, %v", s, len(want), wantErr)
		}
		got, err := readEvents(iotest.OneByteReader(strings.NewReader(s)))
		sameEvents(t, "byte by byte", got, want, err, wantErr)
		for k := range len(s) + 1 {
			got, err := readEvents(io.MultiReader(strings.NewReader(s[:k]), strings.NewReader(s[k:])))
			sameEvents(t, strconv.Quote(s)+" cut at "+strconv.Itoa(k), got, want, err, wantErr)
		}
	}
}

// TestParseEventRules: each field rule of the spec.
func TestParseEventRules(t *testing.T) {
	tests := []struct {
		name string
		ev   string
		want EventFields
	}{
		{"data", "data: x\n\n", EventFields{Data: []byte("x"), HasData: true, Retry: -1}},
		{"no space after the colon", "data:x\n\n", EventFields{Data: []byte("x"), HasData: true, Retry: -1}},
		{"only one space removed", "data:  x \n\n", EventFields{Data: []byte(" x "), HasData: true, Retry: -1}},
		{"lines joined with LF", "data: a\r\ndata:\rdata: c\n\n", EventFields{Data: []byte("a\n\nc"), HasData: true, Joined: true, Retry: -1}},
		{"field without colon", "data\n\n", EventFields{Data: []byte{}, HasData: true, Retry: -1}},
		{"event name, the last wins", "event: a\nevent: b\ndata: x\n\n", EventFields{Name: []byte("b"), Data: []byte("x"), HasData: true, Retry: -1}},
		{"event name not trimmed", "event:  b \ndata: x\n\n", EventFields{Name: []byte(" b "), Data: []byte("x"), HasData: true, Retry: -1}},
		{"comment", ": data: no\ndata: x\n\n", EventFields{Data: []byte("x"), HasData: true, Retry: -1}},
		{"id", "id: 42\ndata: x\n\n", EventFields{ID: []byte("42"), HasID: true, Data: []byte("x"), HasData: true, Retry: -1}},
		{"empty id", "id\n\n", EventFields{ID: []byte{}, HasID: true, Retry: -1}},
		{"id with NUL ignored", "id: 4\x002\n\n", EventFields{Retry: -1}},
		{"retry", "retry: 3000\n\n", EventFields{Retry: 3000}},
		{"retry not digits ignored", "retry: 30s\nretry: -1\nretry: +1\nretry:\n\n", EventFields{Retry: -1}},
		{"unknown field ignored", "Data: x\nfoo: y\n\n", EventFields{Retry: -1}},
		{"no data", "event: ping\n\n", EventFields{Name: []byte("ping"), Retry: -1}},
		{"first event only", "\n\ndata: a\n\ndata: b\n\n", EventFields{Data: []byte("a"), HasData: true, Retry: -1}},
		{"bare CR lines", "event: e\rdata: a\r\r", EventFields{Name: []byte("e"), Data: []byte("a"), HasData: true, Retry: -1}},
		{"no blank line", "data: a", EventFields{Data: []byte("a"), HasData: true, Retry: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseEvent([]byte(tt.ev))
			if string(got.Name) != string(tt.want.Name) || string(got.Data) != string(tt.want.Data) ||
				got.HasData != tt.want.HasData || got.Joined != tt.want.Joined ||
				string(got.ID) != string(tt.want.ID) || got.HasID != tt.want.HasID || got.Retry != tt.want.Retry {
				t.Fatalf("ParseEvent(%q) = %+v, want %+v", tt.ev, got, tt.want)
			}
		})
	}
}

// TestParseEventNoAlloc: one data line is a subslice of the event; the hot
// path allocates nothing.
func TestParseEventNoAlloc(t *testing.T) {
	ev := []byte(benchChunk)
	if n := testing.AllocsPerRun(100, func() { ParseEvent(ev) }); n != 0 {
		t.Fatalf("ParseEvent allocates %v times", n)
	}
}

// streamCase is an anthropic translator fixture (anthropic/testdata).
type streamCase struct {
	Name         string `json:"name"`
	SSE          string `json:"sse"`
	Want         string `json:"want"`
	IncludeUsage bool   `json:"include_usage"`
	ErrorType    string `json:"error_type"`
}

// TestTranslatedFixtures replays the Anthropic stream fixtures through the
// SSE reader, one byte at a time, and the translating reader, with each
// line ending: the client gets exactly the fixture's OpenAI bytes.
func TestTranslatedFixtures(t *testing.T) {
	var cases []streamCase
	b, err := os.ReadFile("anthropic/testdata/streams.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		raw, err := os.ReadFile("anthropic/testdata/streams/" + tc.SSE)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile("anthropic/testdata/streams/" + tc.Want)
		if err != nil {
			t.Fatal(err)
		}
		for _, end := range []string{"\n", "\r\n", "\r"} {
			t.Run(tc.Name+"/"+strconv.Quote(end), func(t *testing.T) {
				stream := strings.ReplaceAll(string(raw), "\n", end)
				rd := &fromAnthropic{t: anthropic.NewStreamTranslator("gpt-4o", 1700000000, tc.IncludeUsage)}
				er := NewEventReader(iotest.OneByteReader(strings.NewReader(stream)))
				defer er.Close()
				var out []byte
				for {
					ev, _, err := er.Next()
					if err != nil {
						break
					}
					if out, err = rd.Event(out, ev, true); err != nil {
						var ee *EventError
						if tc.ErrorType == "" || !errors.As(err, &ee) {
							t.Fatalf("event %q: %v", ev, err)
						}
						break
					}
				}
				if !bytes.Equal(out, want) {
					t.Fatalf("output:\n got %q\nwant %q", out, want)
				}
			})
		}
	}
}
