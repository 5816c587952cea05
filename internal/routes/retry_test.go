package routes

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRetryBlock: a provider's retry block takes its defaults field by
// field when absent, keeps a zero written on purpose (attempts: 0 turns the
// retry off, backoff: 0s retries at once, max_wait: 0s never waits for a
// Retry-After), and a value out of range is refused naming its path and
// line.
func TestRetryBlock(t *testing.T) {
	const head = "providers:\n  - name: a\n    base_url: http://a.example/v1\n    api_keys: [ka]\n    max_concurrency: 1\n"
	const model = "models:\n  - name: m\n    candidates: [ { provider: a } ]\n"
	ms := func(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }
	for _, tt := range []struct {
		name, block string
		want        RetryConfig
	}{
		{"absent", "", RetryConfig{Attempts: 1, Backoff: ms(250), MaxWait: ms(5000)}},
		{"empty block", "    retry: {}\n", RetryConfig{Attempts: 1, Backoff: ms(250), MaxWait: ms(5000)}},
		{"off", "    retry: { attempts: 0 }\n", RetryConfig{Attempts: 0, Backoff: ms(250), MaxWait: ms(5000)}},
		{"all set", "    retry: { attempts: 5, backoff: 1s, max_wait: 30s }\n", RetryConfig{Attempts: 5, Backoff: ms(1000), MaxWait: ms(30000)}},
		{"zeros kept", "    retry: { backoff: 0s, max_wait: 0s }\n", RetryConfig{Attempts: 1}},
		{"block form", "    retry:\n      attempts: 2\n      backoff: 100ms\n", RetryConfig{Attempts: 2, Backoff: ms(100), MaxWait: ms(5000)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(head+tt.block+model), env(map[string]string{}))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Providers[0].Retry; got != tt.want {
				t.Fatalf("effective retry %+v, want %+v", got, tt.want)
			}
		})
	}

	for _, tt := range []struct{ block, path, want string }{
		{"    retry: { attempts: 6 }\n", "providers[0].retry.attempts",
			"line 6: providers[0].retry.attempts must be between 0 and 5, got 6 (0 turns the retry off)"},
		{"    retry: { attempts: -1 }\n", "providers[0].retry.attempts",
			"line 6: providers[0].retry.attempts must be between 0 and 5, got -1 (0 turns the retry off)"},
		{"    retry: { attempts: one }\n", "providers[0].retry.attempts",
			`line 6: providers[0].retry.attempts: "one" is not a whole number`},
		{"    retry: { backoff: -250ms }\n", "providers[0].retry.backoff",
			`line 6: providers[0].retry.backoff: "-250ms" is negative`},
		{"    retry:\n      max_wait: later\n", "providers[0].retry.max_wait",
			`line 7: providers[0].retry.max_wait: "later" is not a duration (write it like 250ms, 30s or 2m)`},
		{"    retry: { max_wait: -1s }\n", "providers[0].retry.max_wait",
			`line 6: providers[0].retry.max_wait: "-1s" is negative`},
		{"    retry: { attempt: 2 }\n", "providers[0].retry",
			`line 6: providers[0].retry: unknown field "attempt" (did you mean "attempts"?)`},
		{"    retry: 2\n", "providers[0].retry",
			`line 6: providers[0].retry: expected a mapping`},
	} {
		_, err := Parse([]byte(head+tt.block+model), env(map[string]string{}))
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
			t.Errorf("retry %q: error %v, want a FieldError", tt.block, err)
			continue
		}
		if fe.Path != tt.path || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("retry %q: error %q at %q, want %q at %q", tt.block, err, fe.Path, tt.want, tt.path)
		}
	}
}
