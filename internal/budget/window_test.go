package budget

import (
	"testing"
	"time"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestWindows protects the window bounds of DESIGN 11.1: UTC calendar day,
// week from Monday 00:00, calendar month, total from zero with no end.
func TestWindows(t *testing.T) {
	tests := []struct {
		per        Per
		now        string
		start, end string // end "" for none
	}{
		{Day, "2026-12-02T13:06:00Z", "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z"},
		{Day, "2026-12-02T23:59:59Z", "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z"},
		{Day, "2026-12-03T00:00:00Z", "2026-12-03T00:00:00Z", "2026-12-04T00:00:00Z"},
		// Not UTC in: the window is still the UTC day (01:00+02:00 is 23:00 UTC the day before).
		{Day, "2026-12-03T01:00:00+02:00", "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z"},
		{Week, "2026-12-02T13:00:00Z", "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"}, // Wednesday
		{Week, "2026-11-30T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"}, // Monday 00:00
		{Week, "2026-12-06T23:59:59Z", "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"}, // Sunday
		{Week, "2027-01-01T12:00:00Z", "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z"}, // across a year
		{Month, "2026-12-31T23:59:59Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{Month, "2028-02-29T10:00:00Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z"},
		{Month, "2026-02-10T10:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		{Total, "2026-12-02T13:00:00Z", "0001-01-01T00:00:00Z", ""},
	}
	for _, tt := range tests {
		now := ts(tt.now)
		if got := tt.per.Start(now); !got.Equal(ts(tt.start)) || got.Location() != time.UTC {
			t.Errorf("%s.Start(%s) = %s, want %s UTC", tt.per, tt.now, got, tt.start)
		}
		end, ok := tt.per.End(now)
		if tt.end == "" {
			if ok {
				t.Errorf("%s.End(%s) = %s, want none", tt.per, tt.now, end)
			}
			continue
		}
		if !ok || !end.Equal(ts(tt.end)) {
			t.Errorf("%s.End(%s) = %s %v, want %s", tt.per, tt.now, end, ok, tt.end)
		}
	}
}

// TestRetryAfter: a refusal's Retry-After is the time to the window's end
// (UTC midnight for a day), at least a second, none for total.
func TestRetryAfter(t *testing.T) {
	tests := []struct {
		per  Per
		now  string
		want time.Duration
	}{
		{Day, "2026-12-02T23:00:00Z", time.Hour},
		{Day, "2026-12-02T23:59:59.9Z", time.Second},
		{Week, "2026-12-06T22:00:00Z", 2 * time.Hour},
		{Month, "2026-12-31T12:00:00Z", 12 * time.Hour},
		{Total, "2026-12-31T12:00:00Z", 0},
	}
	for _, tt := range tests {
		if got := tt.per.retryAfter(ts(tt.now)); got != tt.want {
			t.Errorf("%s at %s: retry after %s, want %s", tt.per, tt.now, got, tt.want)
		}
	}
}

// TestMicros: rounding never lets spend pass a limit.
func TestMicros(t *testing.T) {
	if got := limitMicros(0.0000019); got != 1 {
		t.Errorf("limit 0.0000019 = %d micros, want 1 (down)", got)
	}
	if got := limitMicros(20); got != 20_000_000 {
		t.Errorf("limit 20 = %d, want 20000000", got)
	}
	if got := spendMicros(0.0000011); got != 2 {
		t.Errorf("spend 0.0000011 = %d micros, want 2 (up)", got)
	}
	if got := spendMicros(0.1 + 0.2); got != 300_000 {
		t.Errorf("spend 0.1+0.2 = %d, want 300000 (float noise is not a micro-dollar)", got)
	}
}
