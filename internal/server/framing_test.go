package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRequestFramingKeepsConnection: however the body is framed, the gateway
// reads exactly the request (no more, no less) and the client's connection
// stays usable for the next request, pipelined or not. The handler reads a
// Content-Length body into a buffer of that size and closes it early (to keep
// net/http from discarding a rest mid-stream), so this guards keep-alive.
// A chunked request is answered whole and then closes its connection
// (TestAmbiguousFramingClosed says why).
func TestRequestFramingKeepsConnection(t *testing.T) {
	g := start(t, setup{})
	plain, stream := chatBody(false), chatBody(true)
	lengthFramed := func(body string) string {
		return fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	chunked := func(body string) string {
		half := len(body) / 2
		return fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n",
			half, body[:half], len(body)-half, body[half:])
	}
	tests := []struct {
		name     string
		requests []string // written one after another on one connection
		pipeline bool     // all written before reading any answer
		closes   bool     // the last answer closes the connection
	}{
		{"content-length, sequential", []string{lengthFramed(plain), lengthFramed(stream), lengthFramed(plain)}, false, false},
		{"content-length, pipelined", []string{lengthFramed(stream), lengthFramed(plain)}, true, false},
		{"chunked", []string{chunked(plain)}, false, true},
		{"chunked stream", []string{chunked(stream)}, false, true},
		{"empty body then a good one", []string{lengthFramed(""), lengthFramed(plain)}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			if tt.pipeline {
				if _, err := io.WriteString(conn, strings.Join(tt.requests, "")); err != nil {
					t.Fatal(err)
				}
			}
			for i, raw := range tt.requests {
				if !tt.pipeline {
					if _, err := io.WriteString(conn, raw); err != nil {
						t.Fatalf("request %d: write: %v (connection closed after the previous answer?)", i, err)
					}
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("request %d: body: %v", i, err)
				}
				want := http.StatusOK
				if strings.Contains(raw, "Content-Length: 0\r\n") {
					want = http.StatusBadRequest
				}
				if resp.StatusCode != want {
					t.Fatalf("request %d: status %d, want %d: %s", i, resp.StatusCode, want, b)
				}
				if last := i == len(tt.requests)-1; resp.Close != (tt.closes && last) {
					t.Fatalf("request %d: connection closed after the answer: %v, want %v", i, resp.Close, tt.closes && last)
				}
				if strings.Contains(raw, `"stream":true`) && !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
					t.Fatalf("request %d: stream incomplete: %q", i, b)
				}
			}
		})
	}
}

// TestAmbiguousFramingClosed: a request with both Content-Length and
// Transfer-Encoding: chunked is answered once and its connection closed
// (RFC 9112 section 6.1), so the bytes after the chunked terminator, which a
// proxy reading the Content-Length took for body, never run as a second
// request: the provider sees one request, the client one answer and then
// the end of the connection.
func TestAmbiguousFramingClosed(t *testing.T) {
	g := start(t, setup{})
	body := chatBody(false)
	smuggled := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
	chunkedBody := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	raw := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
		fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(chunkedBody)+len(smuggled)) +
		chunkedBody + smuggled
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Fatalf("first answer %d (Connection: close %v): %s, want 200 closing the connection", resp.StatusCode, resp.Close, b)
	}
	if second, err := http.ReadResponse(br, nil); err == nil {
		second.Body.Close()
		t.Fatalf("the smuggled request was answered: %s", second.Status)
	}
	if n := g.Primary.Stats().Requests; n != 1 {
		t.Fatalf("the provider got %d requests, want 1", n)
	}
}
