package mockupstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHangRate protects the hanging provider that health tests and the demo rely on: the
// chosen share of requests gets no first byte (a stream only its 200 headers) until the
// client gives up, the schedule is as predictable as FailRate's, and a request failed by
// FailRate never also counts as a hang.
func TestHangRate(t *testing.T) {
	const ok, fail, hang = "200", "502", "hang"
	tests := []struct {
		name    string
		b       Behavior
		body    string
		headers []string
		want    []string
	}{
		{"quarter of non-stream requests", Behavior{HangRate: 0.25}, chatBody, nil,
			[]string{ok, ok, ok, hang, ok, ok, ok, hang}},
		{"quarter of streams, after the headers", Behavior{HangRate: 0.25}, streamBody, nil,
			[]string{ok, ok, ok, hang, ok, ok, ok, hang}},
		{"every request by header", Behavior{}, streamBody, []string{HeaderHangRate, "1"},
			[]string{hang, hang}},
		{"header 0 turns it off", Behavior{HangRate: 1}, chatBody, []string{HeaderHangRate, "0"},
			[]string{ok, ok}},
		{"hangs only among requests that did not fail", Behavior{FailRate: 0.5, Status: 502, HangRate: 0.5}, chatBody, nil,
			[]string{ok, fail, hang, fail, ok, fail, hang, fail}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.b)
			var got []string
			for i := range tt.want {
				got = append(got, sendMaybeHanging(t, ts, tt.body, tt.want[i] == hang, tt.headers...))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("outcomes = %v, want %v", got, tt.want)
			}
			waitIdle(t, s)
			var wantHangs, wantFails uint64
			for _, w := range tt.want {
				switch w {
				case hang:
					wantHangs++
				case fail:
					wantFails++
				}
			}
			st := s.Stats()
			if st.Cancelled != wantHangs || st.Failed != wantFails || st.Completed != uint64(len(tt.want))-wantHangs-wantFails {
				t.Errorf("stats = %+v, want Cancelled %d, Failed %d, the rest Completed", st, wantHangs, wantFails)
			}
		})
	}
}

// sendMaybeHanging sends one request and reports its status code, or "hang" when no
// response byte arrived (for a stream: no byte after the 200 headers) within a grace
// period; it then cancels the request. expectHang only shortens the wait for answers
// that are not expected to hang.
func sendMaybeHanging(t *testing.T, ts *httptest.Server, body string, expectHang bool, headers ...string) string {
	t.Helper()
	const grace = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	type result struct {
		status int
		first  error // error of the first body read; nil when a byte came
		err    error
	}
	done := make(chan result, 1)
	drained := make(chan error, 1) // the rest of an answer, read in full
	go func() {
		resp, err := ts.Client().Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var one [1]byte
		_, ferr := io.ReadFull(resp.Body, one[:])
		done <- result{status: resp.StatusCode, first: ferr}
		_, err = io.Copy(io.Discard, resp.Body)
		drained <- err
	}()
	wait := 5 * time.Second
	if expectHang {
		wait = grace
	}
	select {
	case r := <-done:
		if r.err != nil || r.first != nil {
			t.Fatalf("request failed: %v %v", r.err, r.first)
		}
		// Cancelling before the answer ends would count it as cancelled.
		if err := <-drained; err != nil {
			t.Fatalf("read the answer: %v", err)
		}
		return fmt.Sprint(r.status)
	case <-time.After(wait):
	}
	cancel()
	if r := <-done; r.err == nil && r.first == nil {
		t.Errorf("a byte arrived after the hang was noticed (status %d)", r.status)
	}
	return "hang"
}
