package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"time"
)

// SecretPrefix starts every issued secret, so a leaked one is recognisable
// (secret scanners, logs) and cannot be mistaken for a provider's key.
const SecretPrefix = "sk-gw-"

// Budget is a key's own spending limit (DESIGN 11.1): USD per window.
type Budget struct {
	USD float64 `json:"usd"`
	Per string  `json:"per"` // day, week, month or total
}

// Key is one issued key's record: everything but the secret, which is
// never stored. Its JSON is the admin API's record (contract, docs/keys.md).
type Key struct {
	ID                string            `json:"id"`
	Name              string            `json:"name"`
	Team              string            `json:"team"`
	Hint              string            `json:"hint"`
	Models            []string          `json:"models"` // allowed model names, `*` globs; empty: all
	Priority          string            `json:"priority"`
	MaxConcurrency    int               `json:"max_concurrency"`
	RequestsPerMinute int               `json:"requests_per_minute"`
	TokensPerMinute   int               `json:"tokens_per_minute"`
	Budget            *Budget           `json:"budget"`
	CostInUsage       bool              `json:"cost_in_usage"`
	ExpiresAt         *time.Time        `json:"expires_at"`
	Metadata          map[string]string `json:"metadata"`
	CreatedAt         time.Time         `json:"created_at"`
	UpdatedAt         time.Time         `json:"updated_at"`
	RevokedAt         *time.Time        `json:"revoked_at"`
	// PreviousExpiresAt is when the secret a rotation replaced stops
	// working; nil when there is none (never rotated, or its grace ended
	// at the rotation).
	PreviousExpiresAt *time.Time `json:"previous_expires_at"`

	// Digest is the SHA-256 of the current secret; Previous that of the
	// rotated-out one (HasPrevious). Not in the API's JSON: a hash is not
	// a secret, but nobody reading a record needs it.
	Digest      [sha256.Size]byte `json:"-"`
	Previous    [sha256.Size]byte `json:"-"`
	HasPrevious bool              `json:"-"`
}

// Expired reports whether the key's expiry has passed at now.
func (k *Key) Expired(now time.Time) bool {
	return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)
}

// NewSecret returns a fresh secret: SecretPrefix and 32 bytes of
// crypto/rand in unpadded base64url (256 bits: a digest lookup needs no
// other protection against guessing, docs/keys.md).
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Digest is the SHA-256 of a secret, the form it is stored and looked up in.
func Digest(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// DigestHex is Digest in lower-case hex (the api_keys column, the routes
// file's key_sha256).
func DigestHex(secret string) string {
	d := Digest(secret)
	return hex.EncodeToString(d[:])
}

// Hint is the display form of a secret: the prefix, its next four and its
// last four characters ("sk-gw-AbCd…wxYz"). 8 of 43 random characters
// leave 210 bits unknown.
func Hint(secret string) string {
	body := secret[min(len(SecretPrefix), len(secret)):]
	if len(body) < 8 {
		return SecretPrefix + "…"
	}
	return SecretPrefix + body[:4] + "…" + body[len(body)-4:]
}

// Allowed reports whether model is one of the key's models: an empty list
// allows every model; an entry matches exactly or as a glob whose `*`
// stands for any run of characters, `/` included ("gpt-4o*",
// "openai/*"). It does not allocate.
func (k *Key) Allowed(model string) bool {
	return AllowedBy(k.Models, model)
}

// AllowedBy is Allowed for a bare list.
func AllowedBy(patterns []string, model string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if glob(p, model) {
			return true
		}
	}
	return false
}

// glob matches s against p, whose only special character is `*`. The
// classic linear algorithm: on a mismatch, go back to the last star and
// let it take one more character.
func glob(p, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && p[pi] == s[si]:
			pi++
			si++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
