package routes

import "time"

// RetryConfig is a provider's last-resort retry of the same candidate
// before the walk fails over (internal/candidates, retry.go): a 5xx or a
// broken connection is retried after Backoff, and a 429 or 503 whose
// Retry-After is at most MaxWait after that wait when no other candidate is
// left. Each field absent takes DefaultRetry's; a zero written is kept:
// attempts 0 turns the retry off.
type RetryConfig struct {
	// Attempts bounds the retries of one candidate within a request.
	Attempts int `yaml:"attempts"`
	// Backoff is the wait before retrying a 5xx or a broken connection.
	Backoff Duration `yaml:"backoff"`
	// MaxWait is the longest Retry-After the walk waits out.
	MaxWait Duration `yaml:"max_wait"`
}

// DefaultRetry is the retry of a provider that sets none.
var DefaultRetry = RetryConfig{Attempts: 1, Backoff: Duration(250 * time.Millisecond), MaxWait: Duration(5 * time.Second)}

// MaxRetryAttempts bounds retry.attempts: more retries of one candidate
// than this only multiply an outage.
const MaxRetryAttempts = 5

// retry validates a provider's retry block and fills in its defaults, field
// by field. Negative durations are refused when decoded.
func (v *validator) retry(r *RetryConfig, path string) error {
	if _, written := v.lines[path+".attempts"]; !written {
		r.Attempts = DefaultRetry.Attempts
	} else if r.Attempts < 0 || r.Attempts > MaxRetryAttempts {
		return v.fail(path+".attempts", " must be between 0 and %d, got %d (0 turns the retry off)", MaxRetryAttempts, r.Attempts)
	}
	if _, written := v.lines[path+".backoff"]; !written {
		r.Backoff = DefaultRetry.Backoff
	}
	if _, written := v.lines[path+".max_wait"]; !written {
		r.MaxWait = DefaultRetry.MaxWait
	}
	return nil
}
