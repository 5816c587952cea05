package anthropicclient

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzStreamTranslator: whatever a provider sends, the translator never
// panics and writes only well-formed "event: X\ndata: <JSON>\n\n" frames; a
// stream that ends without error is in the order the SDKs expect.
func FuzzStreamTranslator(f *testing.F) {
	files, _ := filepath.Glob("testdata/streams/*.openai.sse")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":{\"a\":[1,{\"b\":null}]}}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"id\":\"\\u0063hat\",\"choices\":[{\"delta\":{\"content\":\"\\ud83d\\ude00\\u0000\"}}],\"usage\":{\"prompt_tokens\":1e3}}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":99999999999999999999,\"id\":\"x\"}]}}]}\r\n\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, events := range [][][]byte{splitEvents(body), {body}} {
			tr := NewStreamTranslator("m\x00\xff")
			var out []byte
			var err error
			for _, ev := range events {
				if out, err = feed(tr, out, ev); err != nil {
					break
				}
			}
			if err == nil {
				out = tr.Finish(out)
			} else if !tr.Done() {
				t.Fatalf("error %v but not Done", err)
			}
			frames, perr := parseFrames(out)
			if perr != nil {
				t.Fatalf("malformed output: %v\n%q", perr, out)
			}
			if err == nil {
				if oerr := checkOrder(frames); oerr != nil {
					t.Fatalf("order: %v\n%s", oerr, out)
				}
			}
		}
	})
}

// FuzzMessagesToChat: any body either is refused with an error or becomes a
// valid chat request for the given model.
func FuzzMessagesToChat(f *testing.F) {
	files, _ := filepath.Glob("testdata/requests/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		var fx struct {
			Request json.RawMessage `json:"request"`
		}
		if json.Unmarshal(b, &fx) == nil {
			f.Add([]byte(fx.Request))
		}
	}
	f.Add([]byte(`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, _, err := MessagesToChat(body, "m")
		if err != nil {
			if _, ok := err.(*RequestError); !ok {
				t.Fatalf("error %T %v is not a *RequestError", err, err)
			}
			return
		}
		var req struct {
			Model     string            `json:"model"`
			Messages  []json.RawMessage `json:"messages"`
			MaxTokens int64             `json:"max_tokens"`
		}
		if !json.Valid(chat) || json.Unmarshal(chat, &req) != nil {
			t.Fatalf("invalid chat JSON: %s", chat)
		}
		if req.Model != "m" || req.MaxTokens < 1 {
			t.Fatalf("model %q max_tokens %d", req.Model, req.MaxTokens)
		}
	})
}
