package upstream

import (
	"bytes"
	"unicode/utf8"
)

// This file names the policy members, the top-level members of a request
// the gateway reads or rewrites, and finds them by exact and by case-folded
// name (ParseRequest refuses a member a case-insensitive decoder would read
// as a policy member).

// twinError refuses a member that folds to a policy member's name.
func twinError(got, name string) *RequestError {
	return &RequestError{Param: got, Message: "'" + got + "' is read as '" + name +
		"' by decoders that ignore case; send '" + name + "' once, spelled exactly"}
}

// The policy members: the top-level members the gateway reads or rewrites
// (model, stream, stream_options, the required fields, the token limits a
// budget reserves on) and those the translators read (internal/upstream/
// anthropic and anthropicclient). Their index is their bit in
// requestParse.seen.
const (
	memModel = iota
	memMessages
	memInput
	memPreviousResponseID
	memStream
	memStreamOptions
	memMaxTokens
	memMaxCompletionTokens
	memMaxOutputTokens
	memSystem
	memMetadata
	memStop
	memStopSequences
	memTemperature
	memTopP
	memTopK
	memTools
	memToolChoice
	memParallelToolCalls
	memOutputConfig
	memOutputFormat
	memUser
	memSafetyIdentifier
	memN
	memStore
	numPolicyMembers
)

var policyNames = [numPolicyMembers]string{
	"model", "messages", "input", "previous_response_id", "stream", "stream_options",
	"max_tokens", "max_completion_tokens", "max_output_tokens", "system", "metadata", "stop",
	"stop_sequences", "temperature", "top_p", "top_k", "tools", "tool_choice",
	"parallel_tool_calls", "output_config", "output_format", "user", "safety_identifier", "n",
	"store",
}

// maxPolicyName is the longest policy member name (max_completion_tokens).
const maxPolicyName = 21

// policyMember is the index of the policy member named exactly key, or -1.
// A switch on string(key) does not allocate.
func policyMember(key []byte) int {
	switch string(key) {
	case "model":
		return memModel
	case "messages":
		return memMessages
	case "input":
		return memInput
	case "previous_response_id":
		return memPreviousResponseID
	case "stream":
		return memStream
	case "stream_options":
		return memStreamOptions
	case "max_tokens":
		return memMaxTokens
	case "max_completion_tokens":
		return memMaxCompletionTokens
	case "max_output_tokens":
		return memMaxOutputTokens
	case "system":
		return memSystem
	case "metadata":
		return memMetadata
	case "stop":
		return memStop
	case "stop_sequences":
		return memStopSequences
	case "temperature":
		return memTemperature
	case "top_p":
		return memTopP
	case "top_k":
		return memTopK
	case "tools":
		return memTools
	case "tool_choice":
		return memToolChoice
	case "parallel_tool_calls":
		return memParallelToolCalls
	case "output_config":
		return memOutputConfig
	case "output_format":
		return memOutputFormat
	case "user":
		return memUser
	case "safety_identifier":
		return memSafetyIdentifier
	case "n":
		return memN
	case "store":
		return memStore
	}
	return -1
}

// foldedPolicyMember is the index of the policy member that key is not but
// that bytes.EqualFold (encoding/json's key matching) takes it for, or -1.
// The names are lower-case ASCII, and the only runes outside ASCII that
// simple folding maps into it are U+017F (ſ, to s) and U+212A (the Kelvin
// sign, to k): key is folded to ASCII in a stack buffer and looked up. Most
// keys are lower-case ASCII already and leave at the first byte check.
func foldedPolicyMember(key []byte) int {
	var buf [maxPolicyName]byte
	n, changed := 0, false
	for i := 0; i < len(key); {
		if n == len(buf) {
			return -1
		}
		c := key[i]
		switch {
		case c < utf8.RuneSelf:
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
				changed = true
			}
			i++
		case c == 0xc5 && i+1 < len(key) && key[i+1] == 0xbf: // U+017F
			c, changed = 's', true
			i += 2
		case c == 0xe2 && i+2 < len(key) && key[i+1] == 0x84 && key[i+2] == 0xaa: // U+212A
			c, changed = 'k', true
			i += 3
		default:
			return -1 // folds to nothing ASCII
		}
		buf[n] = c
		n++
	}
	if !changed {
		return -1
	}
	return policyMember(buf[:n])
}

// foldsTo reports whether key is not name but encoding/json would match
// it to name (lower-case ASCII).
func foldsTo(key []byte, name string) bool {
	return string(key) != name && bytes.EqualFold(key, []byte(name))
}
