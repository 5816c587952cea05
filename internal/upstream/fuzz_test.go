package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/jsontext"
	"github.com/llmgw/gateway/internal/secret"
)

// Fuzz targets for every reader of provider bytes: a non-streaming body's
// usage (TailUsage, BodyUsage), a chunk's usage (EventUsage), the usage
// object's own decoder (decodeUsage), the JSON skipper they share with the
// request parser, an error answer (Send) and its Retry-After.
// FuzzEventReader (sse_test.go) covers SSE framing, FuzzEventReaderBuffered
// the reader's look-ahead. Each asserts what the function must compute, not
// only that it returns.

// usageSeeds are well-formed bodies, for the fuzzer to cut and mangle.
var usageSeeds = []string{
	`{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	`{"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":4},"x":"}"}`,
	`{"content":"say \"usage\": {\"total_tokens\": 9}","usage":{"note":"a } and a \" {","total_tokens":5}}`,
	`{"usage":{"total_tokens":1},"x":"say \"usage"}`,
	`{"usage":null,"usage":{"total_tokens":2}}`,
	`{"usage" : {"total_tokens":1}, "Usage":{"total_tokens":2}}`,
	`{"choices":[{"usage":{"total_tokens":7}}],"usage":{"total_tokens":8}}`,
	"{\"usage\"\r\n:\t{\"total_tokens\":4}}",
	`{"\"usage":{"total_tokens":2},"usage":{"total_tokens":3}}`,
	`{"usage":{"total_tokens":18446744073709551616}}`,
	`{"usage":{"total_tokens":-9223372036854775808,"prompt_tokens":1e2}}`,
	`{"usage":{"total_tokens":"\u0033"}}`,
	`["usage",{"usage":{"total_tokens":1}}]`,
	`"usage"`,
}

// addBodySeeds gives f the well-formed bodies, the malformed ones of
// usage_test.go (cut, escaped, exactly an allocator size class) and each
// well-formed body cut at every byte near its usage object.
func addBodySeeds(f *testing.F) {
	for _, s := range usageSeeds {
		f.Add([]byte(s))
		for i := max(0, strings.LastIndex(s, `"usage"`)-2); i < len(s); i += 3 {
			f.Add([]byte(s[:i]))
		}
	}
	for _, s := range malformedBodies() {
		f.Add([]byte(s))
	}
	f.Add([]byte("\xef\xbb\xbf" + usageSeeds[0]))
}

// usageKeyCensus counts the object keys of valid JSON b that encoding/json
// could take for the body's usage: exact top-level "usage" keys, top-level
// keys that only fold to it ("Usage", "uſage"), and exact "usage" keys
// nested deeper. ok is false when b does not decode as one value.
type usageKeyCensus struct{ top, topFolded, nested int }

func censusUsageKeys(b []byte) (c usageKeyCensus, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct{ object, wantKey bool }
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return c, true
		}
		if err != nil {
			return c, false
		}
		n := len(stack)
		if d, isDelim := tok.(json.Delim); isDelim {
			switch d {
			case '{', '[':
				if n > 0 && stack[n-1].object {
					stack[n-1].wantKey = true // after this value, a key
				}
				stack = append(stack, frame{object: d == '{', wantKey: true})
			default:
				stack = stack[:n-1]
			}
			continue
		}
		if n == 0 || !stack[n-1].object {
			continue
		}
		if !stack[n-1].wantKey {
			stack[n-1].wantKey = true
			continue
		}
		stack[n-1].wantKey = false
		switch k := tok.(string); {
		case n == 1 && k == "usage":
			c.top++
		case n == 1 && strings.EqualFold(k, "usage"):
			c.topFolded++
		case n > 1 && k == "usage":
			c.nested++
		}
	}
}

// jsonUsage is the specification: what encoding/json finds as the body's
// usage when it decodes the whole body.
func jsonUsage(b []byte) (Usage, bool) {
	var v struct {
		Usage *Usage `json:"usage"`
	}
	if json.Unmarshal(b, &v) != nil || v.Usage == nil {
		return Usage{}, false
	}
	return *v.Usage, true
}

// judgeable reports whether b is a body on which the raw-byte readers must
// agree with encoding/json: valid JSON, no \u escapes (which could spell a
// key the byte search cannot see) and one top-level usage key at most,
// spelled exactly. nestedOK allows "usage" keys deeper down, which the
// chunk filter tolerates and the tail reader, by design, does not.
func judgeable(b []byte, nestedOK bool) bool {
	if !json.Valid(b) || bytes.Contains(b, []byte(`\u`)) {
		return false
	}
	c, ok := censusUsageKeys(b)
	return ok && c.top <= 1 && c.topFolded == 0 && (nestedOK || c.nested == 0)
}

// FuzzTailUsage: no tail panics TailUsage, and on a body it can judge, it
// finds exactly the usage encoding/json finds.
func FuzzTailUsage(f *testing.F) {
	addBodySeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)] // reading past the end must fault, not read slack
		u, ok := TailUsage(b)
		if !judgeable(b, false) {
			return
		}
		want, wantOK := jsonUsage(b)
		if ok != wantOK || u != want {
			t.Fatalf("TailUsage(%q) = %+v %v, encoding/json finds %+v %v", b, u, ok, want, wantOK)
		}
	})
}

// FuzzBodyUsage: BodyUsage is encoding/json itself; any bytes at all, and
// it agrees with TailUsage wherever TailUsage can judge.
func FuzzBodyUsage(f *testing.F) {
	addBodySeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		u, ok := BodyUsage(b)
		if ok && !json.Valid(b) {
			t.Fatalf("BodyUsage(%q) = %+v from invalid JSON", b, u)
		}
		if !judgeable(b, false) {
			return
		}
		if tu, tok := TailUsage(b); tok != ok || tu != u {
			t.Fatalf("BodyUsage(%q) = %+v %v, TailUsage = %+v %v", b, u, ok, tu, tok)
		}
	})
}

// FuzzEventUsage: any event bytes are safe, and data lines holding a JSON
// body yield exactly the usage encoding/json finds in it: the cheap filter
// in front of the decoder never drops a real usage object.
func FuzzEventUsage(f *testing.F) {
	addBodySeeds(f)
	f.Add([]byte("{\"usage\":\r{\"total_tokens\":1}}"))
	f.Add([]byte("data: {\"usage\":\r{\"total_tokens\":1}}\r\n\r\n"))
	f.Add([]byte("event: x\ndata:{\"usage\":{\"total_tokens\":1}}\ndata: more\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		EventUsage(b) // the raw bytes as a whole event, framing and all
		// The body as an event's data: one data: line per line of it (a
		// line of data ends at any SSE line end), which ParseEvent joins
		// with "\n", JSON whitespace like the line end it replaced.
		norm := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\r", "\n")
		ev := exact("data: " + strings.ReplaceAll(norm, "\n", "\ndata: ") + "\n\n")
		u, ok := EventUsage(ev)
		if !judgeable([]byte(norm), true) {
			return
		}
		want, wantOK := jsonUsage([]byte(norm))
		if ok != wantOK || u != want {
			t.Fatalf("EventUsage(%q) = %+v %v, encoding/json finds %+v %v", ev, u, ok, want, wantOK)
		}
	})
}

// FuzzSkipValue: on any bytes and any start the skipper stays within the
// slice, and on a valid JSON document it finds the document's end.
func FuzzSkipValue(f *testing.F) {
	addBodySeeds(f)
	for _, s := range []string{`"a\"b"`, `[1,"]",{"}":[]}]`, " 12.5e3 ", `"\\"`, `{"model":"m","messages":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		// Every start of a short input; on a long one the ends and a stride,
		// which keeps an exec linear in practice instead of quadratic.
		for i := 0; i <= len(b); i++ {
			if len(b) > 512 && i > 64 && i < len(b)-64 && i%61 != 0 {
				continue
			}
			if j := jsontext.SkipValue(b, i); j < i || j > len(b) {
				t.Fatalf("jsontext.SkipValue(%q, %d) = %d, want in [%d, %d]", b, i, j, i, len(b))
			}
			if i < len(b) && b[i] == '"' {
				if j := jsontext.SkipString(b, i); j <= i || j > len(b) {
					t.Fatalf("jsontext.SkipString(%q, %d) = %d, want in (%d, %d]", b, i, j, i, len(b))
				}
			}
		}
		if json.Valid(b) {
			start := jsontext.SkipSpace(b, 0)
			if got, want := jsontext.SkipValue(b, start), len(bytes.TrimRight(b, " \t\r\n")); got != want {
				t.Fatalf("jsontext.SkipValue(%q, %d) = %d, want the document's end %d", b, start, got, want)
			}
		}
	})
}

// FuzzParseRetryAfter: a provider's Retry-After, whatever it says, is a wait
// in [0, maxRetryAfter]; delay-seconds are taken as said up to that bound.
func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).Unix()
	for _, s := range []string{
		"", "0", "1", "30", "-1", "+5", " 5", "5 ", "1.5", "0x10", "86400", "86401",
		"9223372036", "9223372037", "9223372036854775807", "9223372036854775808", "99999999999999999999",
		"Mon, 30 Nov 2026 12:00:30 GMT", "Mon, 30 Nov 2026 11:59:30 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Mon, 30 Nov 2026 12:00:30 GM", "\xff",
	} {
		f.Add(s, now)
	}
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", int64(-1<<62))
	f.Fuzz(func(t *testing.T, v string, unix int64) {
		d := parseRetryAfter(v, time.Unix(unix, 0))
		if d < 0 || d > maxRetryAfter {
			t.Fatalf("parseRetryAfter(%q) = %v, want in [0, %v]", v, d, maxRetryAfter)
		}
		if strings.Trim(v, "0123456789") == "" && v != "" {
			s, err := strconv.ParseInt(v, 10, 64)
			want := maxRetryAfter
			if err == nil && s < int64(maxRetryAfter/time.Second) {
				want = time.Duration(s) * time.Second
			}
			if d != want {
				t.Fatalf("parseRetryAfter(%q) = %v, want %v", v, d, want)
			}
		}
	})
}

// errorAnswer is what the fuzzed provider answers; the test sends it as the
// request body, so the handler needs no shared state.
type errorAnswer struct {
	Status     int
	RetryAfter string
	Body       []byte
}

// validHeaderValue mirrors what net/http lets a server send as a field value.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// FuzzErrorAnswer drives Send against a loopback provider answering any
// status, Retry-After and body: a 2xx body comes back whole and open, any
// other answer becomes a *StatusError with its status, the body's first
// maxErrorBody bytes, and a Retry-After within bounds.
func FuzzErrorAnswer(f *testing.F) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a errorAnswer
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			http.Error(w, err.Error(), http.StatusTeapot)
			return
		}
		if validHeaderValue(a.RetryAfter) {
			w.Header().Set("Retry-After", a.RetryAfter)
		}
		w.Header().Set("Content-Type", "application/json") // a 2xx of another type is a protocol error
		w.WriteHeader(a.Status)
		_, _ = w.Write(a.Body)
	}))
	c := NewClient(ClientOptions{Provider: "fuzz"})
	f.Cleanup(func() { c.CloseIdle(); ts.Close() })

	for _, s := range malformedBodies()[:12] {
		f.Add(uint16(229), "30", []byte(s)) // 429
	}
	f.Add(uint16(0), "", []byte(`{"id":"x","usage":{"a":"\`))
	f.Add(uint16(300), "99999999999", []byte(`{"error":{"message":"x"}}`))
	f.Add(uint16(303), "Fri, 31 Dec 9999 23:59:59 GMT", []byte(strings.Repeat("e", maxErrorBody+1)))
	f.Add(uint16(304), "1", []byte(strings.Repeat("e", maxErrorBody)))
	f.Add(uint16(4), "1", []byte("no body allowed"))
	f.Fuzz(func(t *testing.T, code uint16, retryAfter string, body []byte) {
		a := errorAnswer{Status: 200 + int(code)%400, RetryAfter: retryAfter, Body: body}
		req, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Send(context.Background(), &Call{URL: ts.URL, Key: secret.New("sk-fuzz"), Body: req})
		want := body
		if a.Status == http.StatusNoContent || a.Status == http.StatusNotModified {
			want = nil // net/http sends no body with these
		}
		if a.Status < 300 {
			if err != nil {
				t.Fatalf("status %d: %v", a.Status, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != a.Status || !bytes.Equal(got, want) {
				t.Fatalf("status %d: got %d, %d bytes, %v", a.Status, resp.StatusCode, len(got), err)
			}
			return
		}
		var se *StatusError
		if !errors.As(err, &se) {
			t.Fatalf("status %d: err = %v, want *StatusError", a.Status, err)
		}
		if se.Code != a.Status || !bytes.Equal(se.Body, want[:min(len(want), maxErrorBody)]) {
			t.Fatalf("status %d: StatusError %d with %d body bytes, want %d bytes", a.Status, se.Code, len(se.Body), min(len(want), maxErrorBody))
		}
		if se.RetryAfter < 0 || se.RetryAfter > maxRetryAfter {
			t.Fatalf("Retry-After %q became %v", retryAfter, se.RetryAfter)
		}
	})
}

// FuzzEventKinds: the commit point's checks on provider events never panic,
// an event is never both an error object and [DONE], and each verdict
// matches the event's data line.
func FuzzEventKinds(f *testing.F) {
	for _, s := range []string{
		"data: {\"error\":{\"message\":\"x\"}}\n\n", "data: [DONE]\n\n", "data:[DONE]", "data: {\"error\"",
		"data: {", "data:", ": keep-alive\n\n", "event: error\ndata: {\"error\":1}\n\n", "data: \"error\"",
		"data: {\"id\":1,\"error\":null}\n\n", "\xff\xfedata: [DONE]", "data: { \t\r\n\"error\":1}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, ev []byte) {
		ev = ev[:len(ev):len(ev)]
		isErr, isDone := EventIsError(ev), EventIsDone(ev)
		if isErr && isDone {
			t.Fatalf("%q is both an error object and [DONE]", ev)
		}
		d := eventData(ev)
		if isErr && !bytes.HasPrefix(bytes.TrimLeft(d, " \t\r\n"), []byte("{")) {
			t.Fatalf("%q judged an error object, data %q", ev, d)
		}
		if isDone != (string(bytes.TrimSpace(d)) == "[DONE]") {
			t.Fatalf("%q: [DONE] judged %v, data %q", ev, isDone, d)
		}
	})
}

// onceReader returns its data in as few reads as the buffer allows, then
// io.EOF, and counts reads.
type onceReader struct {
	data  []byte
	reads int
	eof   bool // io.EOF was returned
}

func (r *onceReader) Read(p []byte) (int, error) {
	r.reads++
	if len(r.data) == 0 {
		r.eof = true
		return 0, io.EOF
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// FuzzEventReaderBuffered: Buffered says an event is in the buffer exactly
// when Next returns one without reading. The relay holds a flush on it, so
// a false yes would leave an event waiting on the provider's next one; a
// false no only costs a flush, and there is none either.
func FuzzEventReaderBuffered(f *testing.F) {
	for _, s := range []string{
		"data: a\n\ndata: b\n\n",
		"data: a\n\ndata: b",
		"data: a\n\n\n\n",
		"data: a\n\n\r\n\r\r\n",
		"data: a\r\n\r\ndata: b\r\n\r\n",
		": ping\n\ndata: [DONE]\n\n",
		"data: a\n\nevent: x\ndata: b\ndata: c\n\nid: 1\n",
		"\n\n\ndata: a\n\n",
		"data: a\r\rdata: b\r\r",
		"data: a\r\n\r",
		"\xef\xbb\xbfdata: a\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<12 {
			return
		}
		src := &onceReader{data: bytes.Clone(b)}
		r := NewEventReader(src)
		defer r.Close()
		for {
			buffered := r.Buffered()
			reads := src.reads
			_, _, err := r.Next()
			read := src.reads != reads
			if buffered && (read || err != nil) {
				t.Fatalf("%q: Buffered said yes, Next read %v and returned %v", b, read, err)
			}
			if !buffered && !read && err == nil && !src.eof {
				t.Fatalf("%q: Buffered said no, Next returned an event without reading", b)
			}
			if err != nil {
				return
			}
		}
	})
}

// FuzzDecodeUsage: on any bytes at all, decodeUsage returns what
// encoding/json reads (unmarshalUsage), the details' cached and reasoning
// counts included.
func FuzzDecodeUsage(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":12,"completion_tokens":900,"total_tokens":912}`,
		`{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"accepted_prediction_tokens":0}}`,
		`{"prompt_tokens":1000,"completion_tokens":200,"prompt_tokens_details":{"cached_tokens":400},"completion_tokens_details":{"reasoning_tokens":50}}`,
		`{"prompt_tokens_details":{"cached_tokens":4},"prompt_tokens_details":{"audio_tokens":1}}`,
		`{"prompt_tokens_details":{"cached_tokens":4,"cached_tokens":5}}`,
		`{"prompt_tokens_details":{"Cached_Tokens":4}}`,
		`{"Prompt_Tokens_Details":{"cached_tokens":4}}`,
		`{"prompt_tokens_details":null,"completion_tokens_details":"x"}`,
		`{"prompt_tokens_details":{"cached_tokens":"4"}}`,
		`{"prompt_tokens_details":{"cached_tokens":1e3}}`,
		`{"prompt_tokens_details":[1]}`,
		`{"prompt_tokens":1,"cost":0.00012,"is_byok":false,"cost_details":{"upstream_inference_cost":null},"total_tokens":2}`,
		`{"total_tokens":5,"total_tokens":null}`,
		`{"total_tokens":5,"Total_Tokens":7}`,
		`{"TOTAL_TOKENS":7}`,
		`{"total\u005ftokens":7}`,
		`{"total_tokens":1.0}`,
		`{"total_tokens":1e2}`,
		`{"total_tokens":"3"}`,
		`{"total_tokens":-0}`,
		`{"total_tokens":9223372036854775808}`,
		`{"total_tokens":01}`,
		`{"x":[1,{"y":[true,false,null,"s"]}],"total_tokens":3}`,
		"{\"x\":\"caf\xc3\xa9 \xff\",\"total_tokens\":3}",
		`{"x":"a\nb","total_tokens":3}`,
		"{ \"total_tokens\" :\t3 ,\r\n\"prompt_tokens\": 1 }",
		`{}`, ` {} `, `{} x`, `{,}`, `{"a":1,}`, `{"a"}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		u, ok := decodeUsage(b)
		want, wantOK := unmarshalUsage(b)
		if ok != wantOK || u != want {
			t.Fatalf("decodeUsage(%q) = %+v %v, encoding/json: %+v %v", b, u, ok, want, wantOK)
		}
	})
}
