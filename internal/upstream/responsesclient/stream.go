package responsesclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// StreamTranslator turns a chat completions SSE stream (its events' data,
// one at a time) into the Responses API's event stream: response.created
// and response.in_progress first, then one output item per text run or
// tool call (output_item.added, the part or the argument deltas, their
// .done events, output_item.done), and response.completed or
// response.incomplete with the whole response and its usage last. Items
// are emitted one after another, as OpenAI streams them. It is not safe
// for concurrent use; one translator serves one stream.
type StreamTranslator struct {
	resp     response
	seq      int64
	started  bool
	done     bool
	whole    bool   // the terminal response.completed or .incomplete was written
	finish   string // the finish_reason, once one was given
	finished bool

	open     int // kind of the open item: noItem, textItem, callItem
	itemID   string
	text     strings.Builder // the open message's text, or the open call's arguments
	callKey  int
	callID   string
	callName string
	keys     []int // keys of every call started, in order

	usage *chatUsage
}

const (
	noItem = iota
	textItem
	toolItem
)

// NewStreamTranslator starts a translation for a client that asked for
// model (echoed in every response it writes).
func NewStreamTranslator(model string) *StreamTranslator {
	return &StreamTranslator{resp: newResponse(model, 0)}
}

// Started reports whether response.created was written.
func (t *StreamTranslator) Started() bool { return t.started }

// Done reports whether the terminal event was written or an error
// returned; later events are ignored.
func (t *StreamTranslator) Done() bool { return t.done }

// Finished reports whether the provider gave a finish_reason: a stream that
// ends after it without [DONE] is whole.
func (t *StreamTranslator) Finished() bool { return t.finished }

// Items is the output items of the whole response, once its terminal
// event was written (a stream cut or failed has none): what its
// response.completed (or .incomplete) carries, item by item.
func (t *StreamTranslator) Items() []Item {
	if !t.whole {
		return nil
	}
	return t.resp.items()
}

// ResponseID is the id of the response the stream writes.
func (t *StreamTranslator) ResponseID() string { return t.resp.ID }

// chunk is what Data reads of a chat completion chunk.
type chunk struct {
	Created int64           `json:"created"`
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

// Data translates the data of one chat SSE event, appending Responses
// events to dst. "[DONE]" ends the response. An error object is a
// *ProviderError, a chunk that is not one wraps ErrBadResponse; after
// either the translator is Done, and what was appended before is returned
// with the error, to be sent first.
func (t *StreamTranslator) Data(dst, data []byte) ([]byte, error) {
	if t.done {
		return dst, nil
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return dst, nil
	}
	if string(data) == "[DONE]" {
		return t.Finish(dst), nil
	}
	var c chunk
	if data[0] != '{' || json.Unmarshal(data, &c) != nil {
		t.done = true
		return dst, fmt.Errorf("%w: stream chunk is not a JSON object", ErrBadResponse)
	}
	if !isNull(c.Error) {
		t.done = true
		return dst, &ProviderError{Data: bytes.TrimSpace(c.Error)}
	}
	if c.Usage != nil {
		t.usage = c.Usage
	}
	if !t.started {
		if c.Created != 0 {
			t.resp.CreatedAt = c.Created
		}
		dst = t.start(dst)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // the gateway never asks for n > 1
		}
		d := ch.Delta
		if d.Content != nil && *d.Content != "" {
			dst = t.textDelta(dst, *d.Content)
		}
		if d.Refusal != nil && *d.Refusal != "" {
			dst = t.textDelta(dst, *d.Refusal)
		}
		for _, tc := range d.ToolCalls {
			key := 0
			if tc.Index != nil {
				key = *tc.Index
			}
			var err error
			if dst, err = t.toolDelta(dst, key, tc.ID, tc.Function.Name, tc.Function.Arguments); err != nil {
				t.done = true
				return dst, err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			t.finish, t.finished = *ch.FinishReason, true
		}
	}
	return dst, nil
}

// Finish closes the open item and writes the terminal event, unless the
// stream is Done. Call it only for a Finished stream (or at [DONE]): one
// that never said why it finished was cut, and ends with an error event.
func (t *StreamTranslator) Finish(dst []byte) []byte {
	if t.done {
		return dst
	}
	if !t.started {
		dst = t.start(dst)
	}
	dst = t.closeItem(dst)
	t.done, t.whole = true, true
	t.resp.Status, t.resp.IncompleteDetails = status(t.finish)
	t.resp.Usage = t.usage.responses()
	name := "response.completed"
	if t.resp.Status == "incomplete" {
		name = "response.incomplete"
	}
	return t.event(dst, name, struct {
		Response *response `json:"response"`
	}{&t.resp})
}

func (t *StreamTranslator) start(dst []byte) []byte {
	t.started = true
	type wrap struct {
		Response *response `json:"response"`
	}
	dst = t.event(dst, "response.created", wrap{&t.resp})
	return t.event(dst, "response.in_progress", wrap{&t.resp})
}

// event appends one event: its name, and data whose type and
// sequence_number lead the members of v (a struct with at least one).
func (t *StreamTranslator) event(dst []byte, name string, v any) []byte {
	b, _ := json.Marshal(v) // the structs here always encode
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, name...)
	dst = append(dst, `","sequence_number":`...)
	dst = strconv.AppendInt(dst, t.seq, 10)
	t.seq++
	dst = append(dst, ',')
	dst = append(dst, b[1:]...)
	return append(dst, "\n\n"...)
}

// itemEvent is output_item.added and .done.
type itemEvent struct {
	OutputIndex int        `json:"output_index"`
	Item        outputItem `json:"item"`
}

// partEvent is content_part.added and .done.
type partEvent struct {
	ItemID       string     `json:"item_id"`
	OutputIndex  int        `json:"output_index"`
	ContentIndex int        `json:"content_index"`
	Part         outputText `json:"part"`
}

func (t *StreamTranslator) textDelta(dst []byte, s string) []byte {
	if t.open != textItem {
		dst = t.closeItem(dst)
		t.open, t.itemID = textItem, newID("msg_")
		t.text.Reset()
		it := messageItem(t.itemID, "in_progress", "")
		it.Content = &[]outputText{}
		dst = t.event(dst, "response.output_item.added", itemEvent{t.index(), it})
		dst = t.event(dst, "response.content_part.added", partEvent{t.itemID, t.index(), 0, outputText{Type: "output_text", Annotations: []struct{}{}}})
	}
	t.text.WriteString(s)
	return t.event(dst, "response.output_text.delta", struct {
		ItemID       string     `json:"item_id"`
		OutputIndex  int        `json:"output_index"`
		ContentIndex int        `json:"content_index"`
		Delta        string     `json:"delta"`
		Logprobs     []struct{} `json:"logprobs"`
	}{t.itemID, t.index(), 0, s, []struct{}{}})
}

// toolDelta appends one tool call fragment. OpenAI streams calls one after
// another; a fragment for a call already closed cannot be delivered.
func (t *StreamTranslator) toolDelta(dst []byte, key int, id, name string, rawArgs json.RawMessage) ([]byte, error) {
	args := ""
	var s string
	if json.Unmarshal(rawArgs, &s) == nil {
		args = s
	} else if len(rawArgs) > 0 && rawArgs[0] == '{' {
		var compact bytes.Buffer
		_ = json.Compact(&compact, rawArgs) // an object sent whole
		args = compact.String()
	}
	if t.open != toolItem || t.callKey != key {
		for _, k := range t.keys {
			if k == key {
				if args == "" {
					return dst, nil
				}
				return dst, fmt.Errorf("%w: arguments for tool call %d arrived after a later call began", ErrBadResponse, key)
			}
		}
		dst = t.closeItem(dst)
		t.open, t.itemID, t.callKey = toolItem, newID("fc_"), key
		t.keys = append(t.keys, key)
		t.callID, t.callName = id, name
		if t.callID == "" {
			t.callID = newID("call_")
		}
		t.text.Reset()
		dst = t.event(dst, "response.output_item.added", itemEvent{t.index(), callItem(t.itemID, "in_progress", t.callID, t.callName, "")})
	}
	if args == "" {
		return dst, nil
	}
	t.text.WriteString(args)
	return t.event(dst, "response.function_call_arguments.delta", struct {
		ItemID      string `json:"item_id"`
		OutputIndex int    `json:"output_index"`
		Delta       string `json:"delta"`
	}{t.itemID, t.index(), args}), nil
}

// index is the open item's output_index: the items before it are in
// resp.Output.
func (t *StreamTranslator) index() int { return len(t.resp.Output) }

// closeItem writes the open item's .done events and keeps it for the
// terminal response.
func (t *StreamTranslator) closeItem(dst []byte) []byte {
	i := t.index()
	switch t.open {
	case textItem:
		text := t.text.String()
		dst = t.event(dst, "response.output_text.done", struct {
			ItemID       string     `json:"item_id"`
			OutputIndex  int        `json:"output_index"`
			ContentIndex int        `json:"content_index"`
			Text         string     `json:"text"`
			Logprobs     []struct{} `json:"logprobs"`
		}{t.itemID, i, 0, text, []struct{}{}})
		dst = t.event(dst, "response.content_part.done", partEvent{t.itemID, i, 0, outputText{Type: "output_text", Text: text, Annotations: []struct{}{}}})
		it := messageItem(t.itemID, "completed", text)
		dst = t.event(dst, "response.output_item.done", itemEvent{i, it})
		t.resp.Output = append(t.resp.Output, it)
	case toolItem:
		args := t.text.String()
		if args == "" {
			args = "{}"
		}
		dst = t.event(dst, "response.function_call_arguments.done", struct {
			ItemID      string `json:"item_id"`
			OutputIndex int    `json:"output_index"`
			Name        string `json:"name"`
			Arguments   string `json:"arguments"`
		}{t.itemID, i, t.callName, args})
		it := callItem(t.itemID, "completed", t.callID, t.callName, args)
		dst = t.event(dst, "response.output_item.done", itemEvent{i, it})
		t.resp.Output = append(t.resp.Output, it)
	}
	t.open = noItem
	return dst
}
