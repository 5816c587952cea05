package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// stopAsync starts the drain (as SIGTERM does) and returns a channel with
// Run's result.
func (g *gateway) stopAsync() <-chan error {
	g.stop()
	g.stop = nil
	return g.runErr
}

// TestGracefulDrain: /readyz fails at once; during the shutdown delay
// requests are still served; then new connections are refused while the
// stream in flight runs to completion; Run returns cleanly.
func TestGracefulDrain(t *testing.T) {
	g := start(t, setup{
		env:     map[string]string{"GATEWAY_SHUTDOWN_DELAY": "400ms", "GATEWAY_SHUTDOWN_GRACE": "5s"},
		primary: mockupstream.Behavior{Chunks: 10, ChunkInterval: 100 * time.Millisecond},
	})
	var wg sync.WaitGroup
	var streamBody []byte
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, streamBody = g.post(t, chatBody(true))
	}()
	eventually(t, 5*time.Second, "the primary busy with one request", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1, fmt.Sprintf("%+v", g.Primary.Stats())
	})
	done := g.stopAsync()
	eventually(t, 5*time.Second, "/readyz answering 503 once the shutdown began", func() (bool, string) {
		code, _ := g.get(t, "/readyz", false)
		return code == 503, fmt.Sprint(code)
	})
	if resp, _ := g.post(t, chatBody(false)); resp.StatusCode != 200 {
		t.Fatalf("during the shutdown delay: %d, want still served", resp.StatusCode)
	}
	// The end of the delay shows only in how new requests are answered, so
	// keep sending them on fresh connections: each is served until the delay
	// ends, then refused or answered 503 shutting_down; nothing else.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	served := 0
	eventually(t, 5*time.Second, "new requests refused once the 400ms shutdown delay ended", func() (bool, string) {
		resp, err := fresh.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(false)))
		if err != nil {
			return true, "" // the listener is closed
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == 503 && strings.Contains(string(b), "shutting_down"):
			return true, ""
		case resp.StatusCode == 200:
			served++
			return false, fmt.Sprintf("%d more requests served", served)
		}
		t.Fatalf("after the shutdown began: %d %s, want served, refused or 503 shutting_down", resp.StatusCode, b)
		return false, ""
	})
	wg.Wait()
	if d := sseData(streamBody); len(d) == 0 || d[len(d)-1] != "[DONE]" {
		t.Fatalf("in-flight stream was not allowed to finish: %q", d)
	}
	if err := await(t, done, 10*time.Second, "drain"); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestGraceExpiryCutsStreams: streams still running when the grace ends
// are cut with the error event, never a clean end.
func TestGraceExpiryCutsStreams(t *testing.T) {
	g := start(t, setup{
		db:      true,
		env:     map[string]string{"GATEWAY_SHUTDOWN_GRACE": "300ms"},
		primary: mockupstream.Behavior{Chunks: 100, ChunkInterval: 100 * time.Millisecond},
	})
	// The writer connects and migrates the fresh database in the background;
	// a shutdown before that ends leaves the records in the spool for the
	// next process (by design), not in Postgres, which is what this test
	// reads. Under load the first connect outlasts the whole test.
	eventually(t, 10*time.Second, "/readyz reports the store ok", func() (bool, string) {
		_, b := g.get(t, "/readyz", false)
		return strings.Contains(string(b), `"report":"ok"`), string(b)
	})
	var wg sync.WaitGroup
	var body []byte
	var rerr error
	var id string
	wg.Add(1)
	go func() {
		defer wg.Done()
		var resp *http.Response
		resp, body, rerr = g.postRaw(t, chatBody(true))
		id = resp.Header.Get("X-Request-Id")
	}()
	eventually(t, 5*time.Second, "the primary busy with one request", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1, fmt.Sprintf("%+v", g.Primary.Stats())
	})
	begin := time.Now()
	done := g.stopAsync()
	wg.Wait()
	if took := time.Since(begin); took > 3*time.Second {
		t.Fatalf("stream cut after %v, want soon after the 300ms grace", took)
	}
	d := sseData(body)
	if len(d) == 0 || !strings.Contains(d[len(d)-1], "stream_interrupted") || rerr == nil {
		t.Fatalf("stream not cut with the error event (read err %v): %q", rerr, d)
	}
	if err := await(t, done, 10*time.Second, "drain after the grace"); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if !g.Scheduler.Idle() {
		t.Fatal("slots left after shutdown")
	}
	// The records were flushed to Postgres before Run returned: none
	// spooled, none dropped.
	if st := g.Reports.Stats(); st.Spooled != 0 || st.Dropped != 0 {
		t.Fatalf("report writer after Run: %+v, want every record written", st)
	}
	req, rows := g.ledger(t, id)
	wantRows(t, rows, "failed/502/gateway_shutdown(primary)", "unused/0/(backup)")
	if req.Status != "failed" {
		t.Fatalf("request %+v", req)
	}
}
