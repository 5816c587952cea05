// Package secret provides String, a string type for credentials (provider keys,
// client tokens, DSNs with passwords) that cannot be printed by accident: fmt,
// slog and encoding/json all see a redacted placeholder. Code that must use the
// value calls Reveal, which makes every use greppable.
package secret

import (
	"fmt"
	"log/slog"
)

const redacted = "[REDACTED]"

// String holds a credential. The zero value is the empty secret.
type String struct{ v string }

// New wraps a credential.
func New(v string) String { return String{v: v} }

// Reveal returns the credential itself; call it only where the value goes on
// the wire (an Authorization header, a database connection).
func (s String) Reveal() string { return s.v }

// Empty reports whether no credential is set.
func (s String) Empty() bool { return s.v == "" }

// String implements fmt.Stringer with a placeholder.
func (s String) String() string {
	if s.v == "" {
		return ""
	}
	return redacted
}

// Format implements fmt.Formatter so that %v, %s, %q, %x and %#v all redact.
func (s String) Format(f fmt.State, _ rune) { _, _ = fmt.Fprint(f, s.String()) }

// LogValue implements slog.LogValuer.
func (s String) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps secrets out of JSON and YAML encodings.
func (s String) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText lets env and YAML decoders fill a String.
func (s *String) UnmarshalText(b []byte) error {
	s.v = string(b)
	return nil
}
