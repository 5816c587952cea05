package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/budget"
)

// FieldError is a refused admin body: Field names the member at fault
// ("" for the body as a whole), for the error's param.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Change is a parsed create or PATCH body: a nil field was absent. For
// budget and expires_at, which JSON null clears, the Set flag says the
// member was present.
type Change struct {
	Name              *string
	Team              *string
	Models            *[]string
	Priority          *string
	MaxConcurrency    *int
	RequestsPerMinute *int
	TokensPerMinute   *int
	BudgetSet         bool
	Budget            *Budget
	CostInUsage       *bool
	ExpiresSet        bool
	ExpiresAt         *time.Time
	Metadata          *map[string]string
}

// Limits on what a body may hold, so that one key's record stays small
// (docs/keys.md, "Memory").
const (
	maxBody      = 64 << 10
	maxName      = 200
	maxModels    = 256
	maxMetadata  = 64
	maxMetaValue = 1024
	// MaxGrace bounds a rotation's grace: an old secret that works for
	// months is not rotated.
	MaxGrace = 30 * 24 * time.Hour
	// DefaultGrace is a rotation's grace when the body names none.
	DefaultGrace = 24 * time.Hour
)

// keyFields are the members a create or PATCH body may have.
var keyFields = []string{"name", "team", "models", "priority", "max_concurrency", "requests_per_minute",
	"tokens_per_minute", "budget", "cost_in_usage", "expires_at", "metadata"}

// ParseCreate parses a POST /admin/keys body: name is required.
func ParseCreate(body []byte, now time.Time) (Change, error) {
	c, err := parseChange(body, now)
	if err != nil {
		return c, err
	}
	if c.Name == nil {
		return c, fieldErr("name", "is required")
	}
	return c, nil
}

// ParsePatch parses a PATCH /admin/keys/{id} body: any member, at least one.
func ParsePatch(body []byte, now time.Time) (Change, error) {
	c, err := parseChange(body, now)
	if err != nil {
		return c, err
	}
	if c == (Change{}) {
		return c, fieldErr("", "the body changes nothing: name one or more of %s", strings.Join(keyFields, ", "))
	}
	return c, nil
}

// ParseRotate parses a POST /admin/keys/{id}/rotate body, which may be
// empty: the grace during which the old secret still works.
func ParseRotate(body []byte) (time.Duration, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return DefaultGrace, nil
	}
	members, err := members(body, []string{"grace"})
	if err != nil {
		return 0, err
	}
	raw, ok := members["grace"]
	if !ok {
		return DefaultGrace, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, fieldErr("grace", "must be a duration string such as \"24h\" or \"0s\"")
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxGrace {
		return 0, fieldErr("grace", "must be a duration from \"0s\" to \"%s\"", MaxGrace)
	}
	return d, nil
}

// members splits a JSON object into its members, refusing what
// encoding/json would quietly accept: a member not in allowed (it would
// be ignored, so a typo would change nothing without a word), a
// case-variant of an allowed one (encoding/json folds case: "Name" would
// set name), a duplicate (it keeps the last), and anything after the object.
func members(body []byte, allowed []string) (map[string]json.RawMessage, error) {
	if len(body) > maxBody {
		return nil, fieldErr("", "the body is larger than %d bytes", maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fieldErr("", "the body must be a JSON object")
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fieldErr("", "the body is not valid JSON")
		}
		name, _ := tok.(string)
		if !utf8.ValidString(name) {
			return nil, fieldErr("", "a member's name is not valid UTF-8")
		}
		if !contains(allowed, name) {
			for _, a := range allowed {
				if strings.EqualFold(a, name) {
					return nil, fieldErr(a, "member %q is not %q: names are matched exactly", name, a)
				}
			}
			return nil, fieldErr(name, "unknown member; allowed: %s", strings.Join(allowed, ", "))
		}
		if _, dup := out[name]; dup {
			return nil, fieldErr(name, "appears more than once")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fieldErr(name, "is not valid JSON")
		}
		out[name] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, fieldErr("", "the body is not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fieldErr("", "the body has data after its JSON object")
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

func parseChange(body []byte, now time.Time) (Change, error) {
	var c Change
	m, err := members(body, keyFields)
	if err != nil {
		return c, err
	}
	if raw, ok := m["name"]; ok {
		var s string
		if json.Unmarshal(raw, &s) != nil || strings.TrimSpace(s) == "" || len(s) > maxName || s != strings.TrimSpace(s) {
			return c, fieldErr("name", "must be a non-empty string of at most %d bytes without surrounding spaces", maxName)
		}
		c.Name = &s
	}
	if raw, ok := m["team"]; ok {
		var s string
		if json.Unmarshal(raw, &s) != nil || len(s) > maxName || s != strings.TrimSpace(s) {
			return c, fieldErr("team", "must be a string of at most %d bytes without surrounding spaces (\"\" for none)", maxName)
		}
		c.Team = &s
	}
	if raw, ok := m["models"]; ok {
		var list []string
		if json.Unmarshal(raw, &list) != nil || len(list) > maxModels {
			return c, fieldErr("models", "must be an array of at most %d model names or `*` globs ([] for every model)", maxModels)
		}
		for _, s := range list {
			if s == "" || len(s) > maxName {
				return c, fieldErr("models", "an entry is empty or longer than %d bytes", maxName)
			}
		}
		if list == nil {
			list = []string{}
		}
		c.Models = &list
	}
	if raw, ok := m["priority"]; ok {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return c, fieldErr("priority", "must be a string")
		}
		if _, err := admission.ParsePriority(s); err != nil {
			return c, fieldErr("priority", "%v", err)
		}
		c.Priority = &s
	}
	for _, f := range []struct {
		name string
		dst  **int
	}{{"max_concurrency", &c.MaxConcurrency}, {"requests_per_minute", &c.RequestsPerMinute}, {"tokens_per_minute", &c.TokensPerMinute}} {
		raw, ok := m[f.name]
		if !ok {
			continue
		}
		var n int64
		if json.Unmarshal(raw, &n) != nil || n < 0 || n > math.MaxInt32 {
			return c, fieldErr(f.name, "must be a whole number from 0 (no limit) to %d", math.MaxInt32)
		}
		v := int(n)
		*f.dst = &v
	}
	if raw, ok := m["budget"]; ok {
		c.BudgetSet = true
		if !isNull(raw) {
			b, err := parseBudget(raw)
			if err != nil {
				return c, err
			}
			c.Budget = b
		}
	}
	if raw, ok := m["cost_in_usage"]; ok {
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return c, fieldErr("cost_in_usage", "must be true or false")
		}
		c.CostInUsage = &b
	}
	if raw, ok := m["expires_at"]; ok {
		c.ExpiresSet = true
		if !isNull(raw) {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return c, fieldErr("expires_at", "must be an RFC 3339 time (\"2027-01-31T00:00:00Z\") or null")
			}
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return c, fieldErr("expires_at", "must be an RFC 3339 time (\"2027-01-31T00:00:00Z\") or null")
			}
			if !at.After(now) {
				return c, fieldErr("expires_at", "is not in the future (revoke a key to end it now)")
			}
			at = at.UTC().Truncate(time.Microsecond) // what Postgres keeps
			c.ExpiresAt = &at
		}
	}
	if raw, ok := m["metadata"]; ok {
		var md map[string]string
		if json.Unmarshal(raw, &md) != nil || len(md) > maxMetadata {
			return c, fieldErr("metadata", "must be an object of at most %d string values", maxMetadata)
		}
		for k, v := range md {
			if k == "" || len(k) > maxName || len(v) > maxMetaValue {
				return c, fieldErr("metadata", "keys must be 1 to %d bytes and values at most %d", maxName, maxMetaValue)
			}
		}
		if md == nil {
			md = map[string]string{}
		}
		c.Metadata = &md
	}
	return c, nil
}

func parseBudget(raw json.RawMessage) (*Budget, error) {
	m, err := members(raw, []string{"usd", "per"})
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			fe.Field = strings.TrimSuffix("budget."+fe.Field, ".")
		}
		return nil, err
	}
	var b Budget
	if json.Unmarshal(m["usd"], &b.USD) != nil || !(b.USD > 0) || b.USD > 1e12 || math.IsInf(b.USD, 0) {
		return nil, fieldErr("budget.usd", "must be a number of USD above 0")
	}
	if json.Unmarshal(m["per"], &b.Per) != nil || !budget.Per(b.Per).Valid() {
		return nil, fieldErr("budget.per", "must be day, week, month or total")
	}
	return &b, nil
}

// Apply writes c over k (a create starts from the zero Key).
func (c *Change) Apply(k *Key) {
	if c.Name != nil {
		k.Name = *c.Name
	}
	if c.Team != nil {
		k.Team = *c.Team
	}
	if c.Models != nil {
		k.Models = *c.Models
	}
	if c.Priority != nil {
		k.Priority = *c.Priority
	}
	if c.MaxConcurrency != nil {
		k.MaxConcurrency = *c.MaxConcurrency
	}
	if c.RequestsPerMinute != nil {
		k.RequestsPerMinute = *c.RequestsPerMinute
	}
	if c.TokensPerMinute != nil {
		k.TokensPerMinute = *c.TokensPerMinute
	}
	if c.BudgetSet {
		k.Budget = c.Budget
	}
	if c.CostInUsage != nil {
		k.CostInUsage = *c.CostInUsage
	}
	if c.ExpiresSet {
		k.ExpiresAt = c.ExpiresAt
	}
	if c.Metadata != nil {
		k.Metadata = *c.Metadata
	}
	if k.Models == nil {
		k.Models = []string{}
	}
	if k.Metadata == nil {
		k.Metadata = map[string]string{}
	}
}

// Fields is what c writes, by member name, for the audit row.
func (c *Change) Fields() map[string]any {
	out := map[string]any{}
	set := func(name string, present bool, v any) {
		if present {
			out[name] = v
		}
	}
	set("name", c.Name != nil, c.Name)
	set("team", c.Team != nil, c.Team)
	set("models", c.Models != nil, c.Models)
	set("priority", c.Priority != nil, c.Priority)
	set("max_concurrency", c.MaxConcurrency != nil, c.MaxConcurrency)
	set("requests_per_minute", c.RequestsPerMinute != nil, c.RequestsPerMinute)
	set("tokens_per_minute", c.TokensPerMinute != nil, c.TokensPerMinute)
	set("budget", c.BudgetSet, c.Budget)
	set("cost_in_usage", c.CostInUsage != nil, c.CostInUsage)
	set("expires_at", c.ExpiresSet, c.ExpiresAt)
	set("metadata", c.Metadata != nil, c.Metadata)
	return out
}
