package budget

import (
	"fmt"
	"time"
)

// Per is a budget's window.
type Per string

// The windows of DESIGN 11.1, all in UTC.
const (
	Day   Per = "day"
	Week  Per = "week"
	Month Per = "month"
	Total Per = "total"
)

// Valid reports that p is one of the four windows.
func (p Per) Valid() bool {
	switch p {
	case Day, Week, Month, Total:
		return true
	}
	return false
}

// Start is the start of the window holding now: the UTC calendar day, the
// week from Monday 00:00, the calendar month, or the zero time for Total.
func (p Per) Start(now time.Time) time.Time {
	now = now.UTC()
	y, m, d := now.Date()
	switch p {
	case Day:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	case Week:
		// Monday is 0 days back, Sunday 6.
		back := (int(now.Weekday()) + 6) % 7
		return time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC)
	case Month:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

// End is the end of the window holding now (the next window's start);
// false for Total, which never ends.
func (p Per) End(now time.Time) (time.Time, bool) {
	s := p.Start(now)
	switch p {
	case Day:
		return s.AddDate(0, 0, 1), true
	case Week:
		return s.AddDate(0, 0, 7), true
	case Month:
		return s.AddDate(0, 1, 0), true
	}
	return time.Time{}, false
}

// retryAfter is the time left in the window holding now, at least a
// second (a Retry-After of 0 would invite an immediate retry); 0 for Total.
func (p Per) retryAfter(now time.Time) time.Duration {
	end, ok := p.End(now)
	if !ok {
		return 0
	}
	return max(end.Sub(now).Round(time.Second), time.Second)
}

// windowKey is the part of a key naming the window: its start in Unix
// seconds (0 for Total: the zero time is not Unix 0, and a fixed name reads
// better than a negative number).
func (p Per) windowKey(now time.Time) string {
	if p == Total {
		return "0"
	}
	return fmt.Sprint(p.Start(now).Unix())
}

// Owner is whose budget it is.
type Owner struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Client and Team are the owner kinds.
const (
	Client = "client"
	Team   = "team"
)

// String is how a refusal names the owner: "client search-web".
func (o Owner) String() string { return o.Kind + " " + o.Name }

// Label is the metric label value: "client:search-web".
func (o Owner) Label() string { return o.Kind + ":" + o.Name }

// Limit is one budget: an owner may have one per window.
type Limit struct {
	Owner Owner
	USD   float64
	Per   Per
}
