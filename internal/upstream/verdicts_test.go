package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestReusedConnectionClosedIsRetried: a pooled connection the provider
// closed just as a request went out on it (no byte of an answer came back)
// is retried once on a new connection, so the attempt succeeds instead of
// failing over; the provider sees the request once per connection, and the
// marker that makes the request replayable is never sent.
func TestReusedConnectionClosedIsRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns, served, sawKey atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func(c net.Conn, n int32) {
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, has := req.Header["Idempotency-Key"]; has {
						sawKey.Add(1)
					}
					if n == 1 && i == 1 {
						return // the second request on the first connection: closed unanswered
					}
					served.Add(1)
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
				}
			}(c, n)
		}
	}()
	c := NewClient(ClientOptions{Provider: "p"})
	defer c.CloseIdle()
	call := &Call{URL: "http://" + ln.Addr().String() + "/v1/chat/completions", Body: []byte(`{"model":"m"}`)}
	for i := range 2 {
		resp, err := c.Send(context.Background(), call)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if conns.Load() != 2 || served.Load() != 2 {
		t.Fatalf("%d connections, %d answers; want 2 and 2 (the closed one retried on a new connection)", conns.Load(), served.Load())
	}
	if sawKey.Load() != 0 {
		t.Fatal("the provider received an Idempotency-Key header the client never sent")
	}
}

// TestDialFailureIsTransport: a provider nobody listens for is a dial
// failure (the transport scope); a connection that breaks after it was
// made is not.
func TestDialFailureIsTransport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	c := NewClient(ClientOptions{Provider: "p"})
	defer c.CloseIdle()
	_, err = c.Send(context.Background(), &Call{URL: "http://" + addr + "/v1/chat/completions", Body: []byte(`{}`)})
	var ce *ConnectError
	if !errors.As(err, &ce) || !ce.Dial {
		t.Fatalf("refused dial: %v (%T), want a ConnectError with Dial", err, err)
	}

	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	go func() {
		for {
			conn, err := ln2.Accept()
			if err != nil {
				return
			}
			_, _ = http.ReadRequest(bufio.NewReader(conn))
			conn.Close() // a fresh connection closed unanswered: not retried, not a dial failure
		}
	}()
	_, err = c.Send(context.Background(), &Call{URL: "http://" + ln2.Addr().String() + "/v1/chat/completions", Body: []byte(`{}`)})
	if !errors.As(err, &ce) || ce.Dial {
		t.Fatalf("closed after the dial: %v, want a ConnectError without Dial", err)
	}
}

// TestContextLengthAndKeyWide: the provider answers that speak for the
// request's size, and the 429s that speak for the whole key.
func TestContextLengthAndKeyWide(t *testing.T) {
	for _, tc := range []struct {
		code int
		body string
		want bool
	}{
		{400, `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`, true},
		{413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, true},
		{413, `<html>too big</html>`, true},
		{400, `{"error":{"message":"filtered","type":null,"param":"prompt","code":"content_filter","status":400}}`, false},
		{400, `{"error":{"message":"prompt is too long","type":"invalid_request_error","code":null}}`, true},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: field required"}}`, false},
		{400, `not json`, false},
		{422, `{"error":{"code":"context_length_exceeded"}}`, false},
	} {
		se := &StatusError{Code: tc.code, Body: []byte(tc.body)}
		if got := se.ContextLength(); got != tc.want {
			t.Errorf("%d %s: ContextLength %v, want %v", tc.code, tc.body, got, tc.want)
		}
	}
	for _, tc := range []struct {
		header string
		body   string
		want   bool
	}{
		{"0", `{}`, true},
		{" 0 ", `{}`, true},
		{"12", `{}`, false},
		{"", `{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}`, true},
		{"", `{"error":{"code":"rate_limit_exceeded"}}`, false},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("x-ratelimit-remaining-requests", tc.header)
		}
		if got := keyWide(h, []byte(tc.body)); got != tc.want {
			t.Errorf("header %q body %s: keyWide %v, want %v", tc.header, strings.TrimSpace(tc.body), got, tc.want)
		}
	}
}
