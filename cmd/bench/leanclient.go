package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// leanClient sends HTTP/1.1 requests over keep-alive connections of its own,
// writing each request and reading its answer on the calling goroutine.
// net/http's client hands every request to its connection's write goroutine
// and the answer back from its read goroutine: on this 2-CPU VM those two
// wake-ups were about 0.1 ms of each request's total (the instant mock took
// 0.51 ms through it, a cache hit 0.58 ms, the bare proxy 0.96 ms), the same
// for every target, so they pull a ratio of totals toward 1. The cache phase
// times its hit against the bare proxy with this client; everything else
// uses net/http's.
type leanClient struct {
	addr string // host:port
	head []byte // request line and headers, Content-Length last
	body []byte

	mu   sync.Mutex
	idle []*leanConn
}

type leanConn struct {
	c  net.Conn
	br *bufio.Reader
}

// newLeanClient prepares rq for POSTs to rawURL.
func newLeanClient(rawURL string, rq *request) (*leanClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("lean client: %s: http only", rawURL)
	}
	var h bytes.Buffer
	fmt.Fprintf(&h, "POST %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), u.Host)
	if err := rq.header.Write(&h); err != nil {
		return nil, err
	}
	fmt.Fprintf(&h, "Content-Length: %d\r\n\r\n", len(rq.body))
	return &leanClient{addr: u.Host, head: h.Bytes(), body: rq.body}, nil
}

func (l *leanClient) conn(ctx context.Context) (*leanConn, error) {
	l.mu.Lock()
	if n := len(l.idle); n > 0 {
		c := l.idle[n-1]
		l.idle = l.idle[:n-1]
		l.mu.Unlock()
		return c, nil
	}
	l.mu.Unlock()
	c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", l.addr)
	if err != nil {
		return nil, err
	}
	return &leanConn{c: c, br: bufio.NewReaderSize(c, 4096)}, nil
}

// do sends the request and reads the whole answer, timing from start; a
// connection goes back to the pool only after a complete answer.
func (l *leanClient) do(ctx context.Context, start time.Time) sample {
	lc, err := l.conn(ctx)
	if err != nil {
		return sample{err: classify(err)}
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = lc.c.SetDeadline(dl)
	}
	resp, err := l.roundTrip(lc)
	if err != nil {
		lc.c.Close()
		return sample{err: classify(err)}
	}
	if resp.StatusCode != http.StatusOK {
		lc.c.Close()
		return sample{err: fmt.Sprintf("status %d", resp.StatusCode)}
	}
	s := sample{total: time.Since(start)}
	if resp.Close {
		lc.c.Close()
		return s
	}
	l.mu.Lock()
	l.idle = append(l.idle, lc)
	l.mu.Unlock()
	return s
}

func (l *leanClient) roundTrip(lc *leanConn) (*http.Response, error) {
	bufs := net.Buffers{l.head, l.body}
	if _, err := bufs.WriteTo(lc.c); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(lc.br, nil)
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("empty body")
	}
	return resp, nil
}

// close closes the idle connections.
func (l *leanClient) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.idle {
		c.c.Close()
	}
	l.idle = nil
}
