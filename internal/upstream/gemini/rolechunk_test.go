package gemini

import "testing"

// TestRoleChunkIsWrite: the appended role chunk is the bytes the
// encoding/json path writes, with and without the usage member.
func TestRoleChunkIsWrite(t *testing.T) {
	for _, usage := range []bool{false, true} {
		tr := NewStreamTranslator(`m"<&>`, 1700000000, usage)
		tr.id = `chatcmpl-r"1`
		empty := ""
		c := chunk{ID: tr.id, Object: "chat.completion.chunk", Created: tr.created, Model: tr.model,
			Choices: []chunkChoice{{Delta: chunkDelta{Role: "assistant", Content: &empty}}}}
		var slow []byte
		if usage {
			slow = frame(nil, chunkWithNullUsage{chunk: c})
		} else {
			slow = frame(nil, c)
		}
		fast := tr.roleChunk([]byte("before"))
		if string(fast) != "before"+string(slow) {
			t.Errorf("usage %v:\nfast %s\nslow %s", usage, fast, slow)
		}
		if again := tr.roleChunk(nil); len(again) != 0 {
			t.Errorf("a second role chunk: %s", again)
		}
	}
}
