package mockupstream

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestSlowRate protects the slow tail the benchmark's hedging phase relies on: the
// chosen share of streams, and only streams that neither failed nor hung, waits
// SlowDelay for its first byte, the schedule is as predictable as FailRate's, and the
// response says which streams were chosen.
func TestSlowRate(t *testing.T) {
	const fast, slow, fail = "fast", "slow", "502"
	tests := []struct {
		name    string
		b       Behavior
		body    string
		headers []string
		want    []string
	}{
		{"quarter of streams", Behavior{SlowRate: 0.25, SlowDelay: time.Hour}, streamBody, nil,
			[]string{fast, fast, fast, slow, fast, fast, fast, slow}},
		{"by header", Behavior{}, streamBody, []string{HeaderSlowRate, "0.5", HeaderSlowDelay, "1h"},
			[]string{fast, slow, fast, slow}},
		{"header 0 turns it off", Behavior{SlowRate: 1, SlowDelay: time.Hour}, streamBody, []string{HeaderSlowRate, "0"},
			[]string{fast, fast}},
		{"non-stream requests are never slow", Behavior{SlowRate: 1, SlowDelay: time.Hour}, chatBody, nil,
			[]string{fast, fast}},
		{"slow only among streams that did not fail", Behavior{FailRate: 0.5, Status: 502, SlowRate: 0.5, SlowDelay: time.Hour}, streamBody, nil,
			[]string{fast, fail, slow, fail, fast, fail, slow, fail}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.b)
			var got []string
			for range tt.want {
				// A stream wrongly made slow would wait an hour: the bound turns that
				// into a failed read instead of a hung test.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				resp := post(t, ctx, ts, tt.body, tt.headers...)
				switch {
				case resp.Header.Get(HeaderSlowed) == "true":
					got = append(got, slow)
					resp.Body.Close() // the mock would wait SlowDelay: leave
				case resp.StatusCode != 200:
					readAll(t, resp)
					got = append(got, fmt.Sprint(resp.StatusCode))
				default:
					readAll(t, resp)
					got = append(got, fast)
				}
				cancel()
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("outcomes = %v, want %v", got, tt.want)
			}
			waitIdle(t, s)
		})
	}
}

// TestSlowDelayReplacesFirstByteDelay checks what a chosen stream waits: SlowDelay
// before its first data event, instead of FirstByteDelay rather than on top of it.
func TestSlowDelayReplacesFirstByteDelay(t *testing.T) {
	const slowDelay = 150 * time.Millisecond
	tests := []struct {
		name    string
		b       Behavior
		atLeast time.Duration // from sending the request to the first data event
	}{
		{"slow waits SlowDelay", Behavior{SlowRate: 1, SlowDelay: slowDelay}, slowDelay},
		// FirstByteDelay added on top would outlast the request's bound.
		{"not on top of FirstByteDelay", Behavior{SlowRate: 1, SlowDelay: slowDelay, FirstByteDelay: time.Hour}, slowDelay},
		{"zero SlowDelay sends at once", Behavior{SlowRate: 1, FirstByteDelay: time.Hour}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.b)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			// Timed from the send, not from the headers: the mock starts its wait
			// when it flushes the headers, and the client sees them a little later,
			// so a wait timed from their arrival can read a hair short of SlowDelay
			// (149.6ms on a loaded CI machine).
			sent := time.Now()
			resp := post(t, ctx, ts, streamBody)
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadBytes('\n')
				if err != nil {
					resp.Body.Close()
					t.Fatalf("no data event: %v (FirstByteDelay applied?)", err)
				}
				if bytes.HasPrefix(line, []byte("data: ")) {
					break
				}
			}
			if d := time.Since(sent); d < tt.atLeast {
				t.Errorf("first data event %v after the request, want at least %v", d, tt.atLeast)
			}
			if _, err := io.Copy(io.Discard, br); err != nil {
				t.Errorf("rest of the stream: %v", err)
			}
			resp.Body.Close()
			waitIdle(t, s)
			if st := s.Stats(); st.Completed != 1 {
				t.Errorf("stats = %+v, want the stream Completed", st)
			}
		})
	}
}
