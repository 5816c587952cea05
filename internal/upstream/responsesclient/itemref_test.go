package responsesclient

import (
	"errors"
	"strings"
	"testing"
)

// TestResponsesToChatItemReference: an item_reference (the Vercel AI SDK's
// default for the assistant's earlier text: its store option defaults to
// true) is refused naming the item, and the message says how to send the
// item itself; the same conversation with the item sent whole translates.
func TestResponsesToChatItemReference(t *testing.T) {
	const call = `{"type":"function_call","call_id":"c1","name":"lookup","arguments":"{\"identity\":\"x\"}"},{"type":"function_call_output","call_id":"c1","output":"42"}`
	_, err := ResponsesToChat([]byte(`{"model":"m","input":[{"role":"user","content":"hi"},{"type":"item_reference","id":"msg_1"},`+call+`]}`), "up")
	var re *RequestError
	if !errors.As(err, &re) || re.Param != "input[1].type" || !strings.Contains(re.Message, "store to false") {
		t.Fatalf("got %v, want input[1].type refused with the way out", err)
	}
	out, err := ResponsesToChat([]byte(`{"model":"m","store":false,"input":[{"role":"user","content":"hi"},{"role":"assistant","content":"Let me look."},`+call+`]}`), "up")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"identity\":\"x\"}"}}]}`; !strings.Contains(string(out), want) {
		t.Fatalf("%s\nwant the text and the call as one assistant turn: %s", out, want)
	}
}
