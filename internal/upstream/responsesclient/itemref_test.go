package responsesclient

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestResponsesToChatItemReference: the items of a translated answer (a
// message and a function call, non-stream and stream) resolve the
// item_references of the next request (the Vercel AI SDK's tool round trip
// with its default store) into the assistant turn they were; a reference
// to an item not held is refused naming it and the way out.
func TestResponsesToChatItemReference(t *testing.T) {
	_, fromBody, err := ChatToResponseItems([]byte(`{"choices":[{"message":{"content":"Let me look.","tool_calls":[{"id":"c1","function":{"name":"lookup","arguments":"{\"identity\":\"x\"}"}}]},"finish_reason":"tool_calls"}]}`), "m")
	if err != nil {
		t.Fatal(err)
	}
	tr := NewStreamTranslator("m")
	var out []byte
	for _, d := range []string{textChunk("Let me "), textChunk("look."),
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"lookup","arguments":"{\"identity\":\"x\"}"}}]}}]}`,
		finishChunk("tool_calls")} {
		if out, err = tr.Data(out, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	if tr.Items() != nil {
		t.Fatal("a stream not yet whole has items")
	}
	_ = tr.Finish(out)
	fromStream := tr.Items()
	const want = `{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"identity\":\"x\"}"}}]}`
	for name, items := range map[string][]Item{"body": fromBody, "stream": fromStream} {
		if len(items) != 2 || !strings.HasPrefix(items[0].ID, "msg_") || !strings.HasPrefix(items[1].ID, "fc_") {
			t.Fatalf("%s: items %+v, want a message and a function call", name, items)
		}
		stored := Items{}
		for _, it := range items {
			stored[it.ID] = it.JSON
		}
		body := `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"item_reference","id":"` + items[0].ID + `"},` +
			`{"type":"item_reference","id":"` + items[1].ID + `"},{"type":"function_call_output","call_id":"c1","output":"42"}]}`
		if refs := References([]byte(body)); !slices.Equal(refs, []string{items[0].ID, items[1].ID}) {
			t.Errorf("%s: References %v", name, refs)
		}
		got, err := ResponsesToChat([]byte(body), "up", stored)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(string(got), want+`,{"role":"tool","content":"42","tool_call_id":"c1"}`) {
			t.Errorf("%s: %s\nwant the text and the call as one assistant turn, then the result: %s", name, got, want)
		}
		_, err = ResponsesToChat([]byte(body), "up", nil)
		var re *RequestError
		if !errors.As(err, &re) || re.Param != "input[1].id" || !strings.Contains(re.Message, items[0].ID) || !strings.Contains(re.Message, "store to false") {
			t.Errorf("%s, nothing stored: got %v, want input[1].id refused naming the item and the way out", name, err)
		}
	}
	// The same conversation with the items sent whole needs nothing stored.
	got, err := ResponsesToChat([]byte(`{"model":"m","store":false,"input":[{"role":"user","content":"hi"},{"role":"assistant","content":"Let me look."},`+
		`{"type":"function_call","call_id":"c1","name":"lookup","arguments":"{\"identity\":\"x\"}"}]}`), "up", nil)
	if err != nil || !strings.Contains(string(got), want) {
		t.Fatalf("%s, %v; want %s", got, err, want)
	}
}
