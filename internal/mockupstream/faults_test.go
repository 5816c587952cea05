package mockupstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// target is a model endpoint as the fault tests drive it.
type target struct {
	name, path string
	body       string
	streamBody string // "" for an endpoint without streams
	headers    []string
}

var targets = []target{
	{"chat", pathChat, chatBody, streamBody, nil},
	{"messages", pathMessages, messagesBody, messagesStreamBody, anthropicAuth},
	{"messages without v1", "/messages", messagesBody, messagesStreamBody, anthropicAuth},
	{"responses", pathResponses, responsesBody, responsesStreamBody, nil},
	{"embeddings", pathEmbeddings, `{"model":"e","input":"x"}`, "", nil},
}

func (tg target) post(t *testing.T, ctx context.Context, ts *httptest.Server, body string, headers ...string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+tg.path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	all := append(append([]string(nil), tg.headers...), headers...)
	for i := 0; i+1 < len(all); i += 2 {
		req.Header.Set(all[i], all[i+1])
	}
	return ts.Client().Do(req)
}

// TestFaultsEveryEndpoint: the non-stream fault controls mean the same on every model
// endpoint: latency, the shared fail-rate schedule, hangs that only the client ends;
// and each outcome is counted for that endpoint and in the totals.
func TestFaultsEveryEndpoint(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			s, ts := start(t, Behavior{})

			begin := time.Now()
			resp, err := tg.post(t, context.Background(), ts, tg.body, HeaderLatency, "40ms")
			if err != nil {
				t.Fatal(err)
			}
			if raw := readAll(t, resp); resp.StatusCode != 200 || time.Since(begin) < 40*time.Millisecond {
				t.Errorf("latency: got %d after %v: %s", resp.StatusCode, time.Since(begin), raw)
			}

			var got []int
			for range 4 {
				resp, err := tg.post(t, context.Background(), ts, tg.body, HeaderFailRate, "0.5", HeaderStatus, "502", HeaderRetryAfter, "1")
				if err != nil {
					t.Fatal(err)
				}
				readAll(t, resp)
				got = append(got, resp.StatusCode)
				if resp.StatusCode == 502 && resp.Header.Get("Retry-After") != "1" {
					t.Errorf("failed answer without Retry-After")
				}
			}
			if fmt.Sprint(got) != "[200 502 200 502]" {
				t.Errorf("fail-rate outcomes = %v, want [200 502 200 502]", got)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			resp, err = tg.post(t, ctx, ts, tg.body, HeaderHangRate, "1")
			cancel()
			if err == nil {
				resp.Body.Close()
				t.Errorf("hang: got status %d, want no answer before the client gave up", resp.StatusCode)
			}

			waitIdle(t, s)
			want := Stats{Requests: 6, Completed: 3, Failed: 2, Cancelled: 1}
			if st, ok := s.StatsFor(tg.path); !ok || st != want {
				t.Errorf("StatsFor(%s) = %+v, want %+v", tg.path, st, want)
			}
			if st := s.Stats(); st != want {
				t.Errorf("Stats = %+v, want %+v", st, want)
			}
		})
	}
}

// TestStreamFaultsEveryEndpoint: the stream timeline's controls act on every streaming
// endpoint: keep-alive comments and the first-byte delay before the first event, a
// stall after the headers, a cut connection, a slow first byte flagged in the headers.
func TestStreamFaultsEveryEndpoint(t *testing.T) {
	for _, tg := range targets {
		if tg.streamBody == "" {
			continue
		}
		t.Run(tg.name+" first byte", func(t *testing.T) {
			_, ts := start(t, Behavior{})
			begin := time.Now()
			resp, err := tg.post(t, context.Background(), ts, tg.streamBody, HeaderComments, "1", HeaderFirstByteDelay, "80ms")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if d := time.Since(begin); d >= 80*time.Millisecond {
				t.Errorf("headers after %v, want them before the first-byte delay", d)
			}
			br := bufio.NewReader(resp.Body)
			if ev, err := nextEvent(br); err != nil || ev != ": keep-alive" {
				t.Fatalf("first event %q (%v), want the keep-alive comment", ev, err)
			}
			ev, err := nextEvent(br)
			if d := time.Since(begin); err != nil || d < 80*time.Millisecond || strings.HasPrefix(ev, ":") {
				t.Errorf("first data event %q after %v (%v), want one after 80ms", ev, d, err)
			}
			if _, err := io.Copy(io.Discard, br); err != nil {
				t.Fatal(err)
			}
		})
		t.Run(tg.name+" stall after headers", func(t *testing.T) {
			s, ts := start(t, Behavior{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := tg.post(t, ctx, ts, tg.streamBody, HeaderHangRate, "1")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("got %v %v, want 200 headers", resp, err)
			}
			read := make(chan error, 1)
			go func() {
				_, err := resp.Body.Read(make([]byte, 1))
				read <- err
			}()
			select {
			case err := <-read:
				t.Fatalf("a byte or an end (%v) arrived from a stalled stream", err)
			case <-time.After(80 * time.Millisecond):
			}
			cancel()
			<-read
			resp.Body.Close()
			waitIdle(t, s)
			if st, _ := s.StatsFor(tg.path); st.Cancelled != 1 {
				t.Errorf("stats = %+v, want Cancelled 1", st)
			}
		})
		t.Run(tg.name+" reset", func(t *testing.T) {
			s, ts := start(t, Behavior{})
			resp, err := tg.post(t, context.Background(), ts, tg.streamBody, HeaderResetAfterChunks, "1")
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(string(raw), "Hello from mock chunk 1") || strings.Contains(string(raw), " 2") {
				t.Errorf("read error %v after %q, want a cut after chunk 1", err, raw)
			}
			waitIdle(t, s)
			if st, _ := s.StatsFor(tg.path); st.Resets != 1 {
				t.Errorf("stats = %+v, want Resets 1", st)
			}
		})
		t.Run(tg.name+" slow", func(t *testing.T) {
			_, ts := start(t, Behavior{})
			resp, err := tg.post(t, context.Background(), ts, tg.streamBody, HeaderSlowRate, "1", HeaderSlowDelay, "1ms")
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if resp.Header.Get(HeaderSlowed) != "true" {
				t.Errorf("%s missing on a slow stream", HeaderSlowed)
			}
		})
	}
}
