package responsesclient

import (
	"encoding/json"
	"fmt"
)

// Stored output items. OpenAI keeps every response's output items (store
// defaults to true) and its clients may name one in a later request's input
// as {"type":"item_reference","id":...} instead of sending it: the Vercel
// AI SDK does so for the assistant's text and tool calls of a tool round
// trip. Toward providers that keep nothing the gateway keeps the items it
// made (package api stores them); this file is the translation's side:
// the items of an answer (Item), the ids a request names (References), and
// the stored items a translation resolves them from (Items).

// Item is one output item of a translated answer: a message or a
// function_call, as its Responses JSON (what OpenAI's GET of an item
// answers, and what the item's reference stands for).
type Item struct {
	ID   string
	JSON []byte
}

// Items are stored output items by id: what ResponsesToChat resolves a
// request's item_reference inputs from. A nil Items resolves nothing.
type Items map[string][]byte

// MaxReferences bounds the references of one request that are resolved:
// each is a store lookup. A conversation with more assistant turns than
// this is sent with its items whole (store: false) or kept shorter.
const MaxReferences = 1000

// References is the ids of the item_reference inputs of a Responses request
// body, each once, in order, at most MaxReferences: the items its
// translation needs. A body whose input is not a list names none (its
// translation says what is wrong with it).
func References(body []byte) []string {
	var req struct {
		Input []struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		} `json:"input"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var ids []string
	seen := map[string]bool{}
	for _, it := range req.Input {
		if it.Type != "item_reference" || it.ID == "" || seen[it.ID] {
			continue
		}
		if len(ids) == MaxReferences {
			break
		}
		seen[it.ID] = true
		ids = append(ids, it.ID)
	}
	return ids
}

// items is r's output items, each encoded.
func (r *response) items() []Item {
	out := make([]Item, 0, len(r.Output))
	for _, it := range r.Output {
		b, err := json.Marshal(it)
		if err != nil {
			continue // the structs here always encode
		}
		out = append(out, Item{ID: it.ID, JSON: b})
	}
	return out
}

// resolve is the item an item_reference input (input[i], param) names,
// from stored. One that is not there (never made, made for another client,
// expired, or the store did not answer in time) is the client's 400: the
// conversation cannot be sent without it, and dropping it would silently
// cut the assistant's turns out.
func resolve(ref item, stored Items, param string) (item, error) {
	b, ok := stored[ref.ID]
	var it item
	if ok && json.Unmarshal(b, &it) == nil && (it.Type == "message" || it.Type == "function_call") {
		return it, nil
	}
	if ref.ID == "" {
		return item{}, &RequestError{Param: param + ".id", Message: "an item_reference needs the id of the item it names"}
	}
	return item{}, &RequestError{Param: param + ".id", Message: fmt.Sprintf("item %q is not held by this gateway for this client: "+
		"this model's providers store no responses, and the gateway keeps the output items it made for one hour, for the client they were made for, "+
		"unless the request set store to false; send the item itself "+
		"(with the Vercel AI SDK, set providerOptions.openai.store to false)", ref.ID)}
}
