package mockupstream

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestKeyStatus: one account whose keys fare differently. A token listed in
// KeyStatus gets its own status (200 succeeds even when Status fails the
// rest); any other token, or none, follows Status. Gateway health tests rely
// on it to rate-limit or revoke one key of a provider while the others serve.
func TestKeyStatus(t *testing.T) {
	b := Behavior{
		Status:     503,
		RetryAfter: "2",
		KeyStatus:  map[string]int{"sk-limited": 429, "sk-revoked": 401, "sk-good": 200},
	}
	tests := []struct {
		name           string
		auth           string
		wantStatus     int
		wantRetryAfter string
	}{
		{"rate limited key", "Bearer sk-limited", 429, "2"},
		{"revoked key", "Bearer sk-revoked", 401, "2"},
		{"key that succeeds", "Bearer sk-good", 200, ""},
		{"unlisted key follows Status", "Bearer sk-other", 503, "2"},
		{"no bearer follows Status", "", 503, "2"},
		{"not a bearer token", "Basic sk-limited", 503, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, b)
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			resp := post(t, context.Background(), ts, chatBody, hdr...)
			raw := readAll(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tt.wantStatus, raw)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.wantRetryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.wantRetryAfter)
			}
			waitIdle(t, s)
			st := s.Stats()
			if tt.wantStatus == 200 && st.Completed != 1 || tt.wantStatus != 200 && st.Failed != 1 {
				t.Errorf("stats = %+v after a %d answer", st, tt.wantStatus)
			}
		})
	}
}

// TestKeyStatusValidate: a KeyStatus entry must be a usable status, and the
// error names the field but never the key (it may be a real credential).
func TestKeyStatusValidate(t *testing.T) {
	for _, st := range []int{0, 42, 600} {
		err := Behavior{KeyStatus: map[string]int{"sk-SECRET": st}}.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "KeyStatus" {
			t.Errorf("KeyStatus %d: Validate = %v, want a FieldError for KeyStatus", st, err)
			continue
		}
		if strings.Contains(err.Error(), "sk-SECRET") {
			t.Errorf("KeyStatus %d: error %q names the key", st, err)
		}
	}
	if err := (Behavior{KeyStatus: map[string]int{"k": 200, "j": 429}}).Validate(); err != nil {
		t.Errorf("valid KeyStatus: Validate = %v", err)
	}
}
