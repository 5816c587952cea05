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
	}{
		{"content-length, sequential", []string{lengthFramed(plain), lengthFramed(stream), lengthFramed(plain)}, false},
		{"content-length, pipelined", []string{lengthFramed(stream), lengthFramed(plain)}, true},
		{"chunked", []string{chunked(plain), chunked(stream)}, false},
		{"empty body then a good one", []string{lengthFramed(""), lengthFramed(plain)}, false},
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
				if resp.Close {
					t.Fatalf("request %d: the gateway closes the connection after answering", i)
				}
				if strings.Contains(raw, `"stream":true`) && !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
					t.Fatalf("request %d: stream incomplete: %q", i, b)
				}
			}
		})
	}
}
