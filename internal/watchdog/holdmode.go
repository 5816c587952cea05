package watchdog

import "strings"

// HoldMode says how long a successful streaming attempt keeps its slot of the
// global upstream execution gate. The target slot is not governed by it: the
// provider keeps generating until the body ends, so that slot is held until then.
type HoldMode uint8

const (
	// HoldFirstBody releases the global slot once the first body event has been
	// forwarded to the client: the candidate has really started, so the gate
	// stops counting it against new admissions.
	HoldFirstBody HoldMode = iota
	// HoldHeaders releases the global slot as soon as upstream headers arrive.
	HoldHeaders
	// HoldResponse keeps the global slot until the stream ends.
	HoldResponse
)

// String returns the canonical spelling, used in logs and metric labels.
func (m HoldMode) String() string {
	switch m {
	case HoldHeaders:
		return "headers"
	case HoldResponse:
		return "response"
	default:
		return "first_body"
	}
}

// ParseHoldMode maps an operator's spelling to a mode. ok is false for a value
// that is not one of the known spellings; the mode is then first_body and the
// caller warns, naming the variable.
func ParseHoldMode(s string) (m HoldMode, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "headers", "header", "off", "none", "disabled", "disable", "0":
		return HoldHeaders, true
	case "response", "full", "body", "stream", "1":
		return HoldResponse, true
	case "first_body":
		return HoldFirstBody, true
	default:
		return HoldFirstBody, false
	}
}
