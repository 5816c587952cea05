package admission

import (
	"fmt"
	"strconv"
	"strings"
)

// Priority is the class of an attempt. Lower values are served first.
type Priority uint8

const (
	// Urgent is reserved for admin traffic; it is already the top class, so
	// it never ages.
	Urgent Priority = iota
	// Interactive is the default class and the ceiling of aging.
	Interactive
	Foreground
	Background
	Maintenance

	numPriorities = int(Maintenance) + 1
)

var priorityNames = [numPriorities]string{
	Urgent:      "urgent",
	Interactive: "interactive",
	Foreground:  "foreground",
	Background:  "background",
	Maintenance: "maintenance",
}

// ParsePriority parses a class name case-insensitively after trimming
// spaces; an empty string means Interactive. It accepts "urgent" too: only
// the HTTP layer knows who may ask for it.
func ParsePriority(s string) (Priority, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Interactive, nil
	}
	for p, name := range priorityNames {
		if strings.EqualFold(s, name) {
			return Priority(p), nil
		}
	}
	// The allowed list leaves out urgent on purpose: the message reaches
	// clients through the HTTP layer, and urgent is not theirs to ask for.
	return Interactive, fmt.Errorf("unknown priority %q: allowed values are interactive, foreground, background, maintenance", s)
}

// String returns the lower-case class name used in headers, config and logs.
func (p Priority) String() string {
	if int(p) < numPriorities {
		return priorityNames[p]
	}
	return "priority(" + strconv.Itoa(int(p)) + ")"
}

// valid reports whether p is one of the defined classes.
func (p Priority) valid() bool { return int(p) < numPriorities }

// MarshalText lets a Priority appear as its name in JSON, YAML and logs.
func (p Priority) MarshalText() ([]byte, error) {
	if !p.valid() {
		return nil, fmt.Errorf("invalid priority %d", uint8(p))
	}
	return []byte(priorityNames[p]), nil
}

// UnmarshalText parses like ParsePriority, so config files and env vars
// (through encoding.TextUnmarshaler) accept the same spellings as the header.
func (p *Priority) UnmarshalText(b []byte) error {
	v, err := ParsePriority(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}
