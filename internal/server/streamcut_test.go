package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// hangUpOnError sends a streaming chat request over a raw connection and
// closes the connection the moment a data line carries an error object, the
// way the official SDKs hang up. It returns the gateway's request id.
func hangUpOnError(t *testing.T, addr string) (string, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	body := chatBody(true)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	id := resp.Header.Get("X-Request-Id")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"error"`) {
			return id, nil // the deferred Close hangs up right here
		}
	}
	return id, fmt.Errorf("stream ended without an error event (%v)", sc.Err())
}

// TestCutStreamIsNotAClientCancel protects DESIGN section 7's row for a
// stream the upstream cut after bytes were forwarded: failed, 502,
// stream_interrupted. A client that hangs up as soon as it reads the
// gateway's error event must not turn that into a client cancel: the
// outcome is decided from what the upstream did before the event is written.
func TestCutStreamIsNotAClientCancel(t *testing.T) {
	g := start(t, setup{db: true, routes: watchRoutes, primary: mockupstream.Behavior{ResetAfterChunks: 2, Chunks: 5}})
	addr := strings.TrimPrefix(g.URL, "http://")
	const total, parallel = 40, 4
	ids := make(chan string, total)
	errs := make(chan error, total)
	var wg sync.WaitGroup
	work := make(chan struct{}, total)
	for range total {
		work <- struct{}{}
	}
	close(work)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				id, err := hangUpOnError(t, addr)
				if err != nil {
					errs <- err
					continue
				}
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	bad := 0
	for id := range ids {
		req, rows := g.ledger(t, id)
		if len(rows) != 2 || rows[0].String() != "failed/502/stream_interrupted(primary)" ||
			rows[1].String() != "unused/0/(backup)" || req.Status != "failed" || *req.StatusCode != 502 {
			bad++
			t.Errorf("request %s: %s %v, candidates %v", id, req.Status, *req.StatusCode, rows)
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d cut streams recorded wrongly", bad, total)
	}
}

// TestRequestFirstByteAfterFailover: the request row's first_byte_ms is the
// time from receipt to the first byte sent to the client, failover included,
// while each candidate keeps its own time from admission.
func TestRequestFirstByteAfterFailover(t *testing.T) {
	g := start(t, setup{db: true, routes: watchRoutes, primary: mockupstream.Behavior{FirstByteDelay: 2 * time.Second}})
	for _, stream := range []bool{true, false} {
		if !stream {
			// Non-stream attempts have no first-byte deadline: fail the
			// primary slowly instead.
			g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Latency: 400 * time.Millisecond, Status: 503})
		}
		resp, _ := g.post(t, chatBody(stream))
		id := resp.Header.Get("X-Request-Id")
		g.ledger(t, id)
		conn, err := pgx.Connect(context.Background(), g.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		var reqFB, backupFB int
		err = conn.QueryRow(context.Background(), `SELECT r.first_byte_ms, c.first_byte_ms FROM requests r
			JOIN request_candidates c ON c.request_id = r.id AND c.candidate_index = 1 WHERE r.id = $1`, id).Scan(&reqFB, &backupFB)
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// watchRoutes gives the primary a 200ms first-byte deadline; the
		// non-stream primary fails after 400ms.
		if reqFB < 200 || reqFB <= backupFB {
			t.Errorf("stream=%v: request first_byte_ms %d, backup candidate %d; want the request's to include the failed primary (>= 200)",
				stream, reqFB, backupFB)
		}
	}
}
