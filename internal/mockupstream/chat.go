package mockupstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxBodyBytes is far above any real chat body; the gateway enforces the real limit and
// the mock must not be the one that rejects a large test body.
const maxBodyBytes = 64 << 20

// chatRequest is the part of the body the mock acts on. Messages decode into empty
// structs: their presence is checked, their content is not kept.
type chatRequest struct {
	Model         string     `json:"model"`
	Messages      []struct{} `json:"messages"`
	Stream        bool       `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// buffers are reused across requests: one for the per-stream chunk prefix, one for the
// event or body being written.
type buffers struct{ prefix, out []byte }

var bufPool = sync.Pool{New: func() any {
	return &buffers{prefix: make([]byte, 0, 256), out: make([]byte, 0, 1024)}
}}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request) {
	s.begin()
	o := outcomeCancelled
	// Deferred so that the outcome is counted on every path, including the deliberate
	// panic(http.ErrAbortHandler) of a reset.
	defer func() { s.end(o) }()

	body, err := readBody(w, r)
	if err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large", "invalid_request_error", "", "request_too_large")
			o = outcomeRejected
		}
		return // otherwise the client went away while sending
	}
	s.record(r, body)

	b, err := applyOverrides(*s.behavior.Load(), r.Header)
	if err != nil {
		field := ""
		if fe := (*FieldError)(nil); errors.As(err, &fe) {
			field = fe.Field
		}
		writeError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", field, "invalid_mock_header")
		o = outcomeRejected
		return
	}
	var req chatRequest
	if msg, param := parseChat(body, &req); msg != "" {
		writeError(w, http.StatusBadRequest, msg, "invalid_request_error", param, "invalid_request")
		o = outcomeRejected
		return
	}

	if b.Identity == "" {
		b.Identity = DefaultIdentity
	}
	if b.Chunks == 0 {
		b.Chunks = DefaultChunks
	}
	id := s.nextID.Add(1)
	h := w.Header()
	h[HeaderIdentity] = []string{b.Identity}
	// Real providers send their own request id; a gateway that copied upstream headers
	// blindly would leak it next to its own X-Request-Id.
	h["X-Request-Id"] = []string{"req_mock_" + strconv.FormatInt(id, 10)}

	if status, fail := s.injectedStatus(&b, r.Header); fail {
		if !sleep(r.Context(), b.Latency) {
			return
		}
		if b.RetryAfter != "" {
			h["Retry-After"] = []string{b.RetryAfter}
		}
		typ, code := errorKind(status)
		writeError(w, status, "mock error", typ, "", code)
		o = outcomeFailed
		return
	}

	if s.hangs(&b) {
		if !req.Stream {
			<-r.Context().Done() // no status, no byte: only the caller's timeout ends it
			return
		}
		b.StallAfterHeaders = true
	} else if req.Stream && s.slow(&b) {
		b.FirstByteDelay = b.SlowDelay
		h[HeaderSlowed] = []string{"true"}
	}

	c := completion{
		id:       id,
		created:  s.now().Unix(),
		model:    req.Model,
		identity: b.Identity,
		chunks:   b.Chunks,
		promptN:  (len(body) + 3) / 4,
	}
	if !req.Stream {
		o = serveNonStream(w, r, &b, &c)
		return
	}
	includeUsage := b.Usage && req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	o = serveStream(w, r, &b, &c, includeUsage)
	if o == outcomeReset {
		// ErrAbortHandler makes net/http drop the connection (HTTP/1) or reset the stream
		// (HTTP/2) without the terminating chunk, and without logging a panic.
		panic(http.ErrAbortHandler)
	}
}

// parseChat returns an error message and the offending parameter, or "" when the body is
// a usable chat request. Being strict here lets tests notice a gateway that mangles the
// body it forwards.
func parseChat(body []byte, req *chatRequest) (msg, param string) {
	if err := json.Unmarshal(body, req); err != nil {
		return "invalid JSON body: " + err.Error(), ""
	}
	if req.Model == "" {
		return "missing required parameter: 'model'", "model"
	}
	if len(req.Messages) == 0 {
		return "missing required parameter: 'messages'", "messages"
	}
	return "", ""
}

// injectedStatus decides whether this request answers with an error status.
func (s *Server) injectedStatus(b *Behavior, h http.Header) (int, bool) {
	if len(b.KeyStatus) > 0 {
		auth, _ := headerValue(h, "Authorization")
		if key, ok := strings.CutPrefix(auth, "Bearer "); ok {
			if st, ok := b.KeyStatus[key]; ok {
				return st, st != http.StatusOK
			}
		}
	}
	status := b.Status
	if status == http.StatusOK {
		status = 0
	}
	switch {
	case b.FailRate <= 0:
		return status, status != 0
	case status == 0:
		status = http.StatusInternalServerError
	}
	if b.FailRate >= 1 {
		return status, true
	}
	return status, failsAt(s.failSeq.Add(1)-1, failRatePPM(b.FailRate))
}

// hangs decides whether this request hangs (Behavior.HangRate).
func (s *Server) hangs(b *Behavior) bool {
	switch {
	case b.HangRate <= 0:
		return false
	case b.HangRate >= 1:
		return true
	}
	return failsAt(s.hangSeq.Add(1)-1, failRatePPM(b.HangRate))
}

// slow decides whether this stream is one of SlowRate's share.
func (s *Server) slow(b *Behavior) bool {
	switch {
	case b.SlowRate <= 0:
		return false
	case b.SlowRate >= 1:
		return true
	}
	return failsAt(s.slowSeq.Add(1)-1, failRatePPM(b.SlowRate))
}

// readBody reads the whole body into a fresh slice (LastRequest keeps it), sized from
// Content-Length so a typical body costs one allocation.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	size := r.ContentLength
	if size < 0 || size > maxBodyBytes {
		size = 512
	}
	rd := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	buf := make([]byte, 0, size+1) // +1: the read that returns io.EOF needs room
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func serveNonStream(w http.ResponseWriter, r *http.Request, b *Behavior, c *completion) outcome {
	if !sleep(r.Context(), b.Latency) {
		return outcomeCancelled
	}
	bufs := bufPool.Get().(*buffers)
	defer bufPool.Put(bufs)
	bufs.out = c.appendBody(bufs.out[:0])
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(bufs.out))}
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(bufs.out); err != nil {
		return outcomeCancelled
	}
	return outcomeCompleted
}

// serveStream writes the SSE answer; see the package comment for the timeline. Each
// event is one Write into the ResponseWriter's buffer and one Flush, so the gateway
// sees it at once and as a single read where possible.
func serveStream(w http.ResponseWriter, r *http.Request, b *Behavior, c *completion, includeUsage bool) outcome {
	ctx := r.Context()
	if !sleep(ctx, b.Latency) {
		return outcomeCancelled
	}
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return outcomeCancelled
	}
	if b.StallAfterHeaders {
		<-ctx.Done()
		return outcomeCancelled
	}

	bufs := bufPool.Get().(*buffers)
	defer bufPool.Put(bufs)
	send := func(event []byte) bool {
		if _, err := w.Write(event); err != nil {
			return false
		}
		return rc.Flush() == nil
	}

	for range b.Comments {
		bufs.out = append(bufs.out[:0], commentEvent...)
		if !send(bufs.out) || !sleep(ctx, b.CommentInterval) {
			return outcomeCancelled
		}
	}
	if !sleep(ctx, b.FirstByteDelay) {
		return outcomeCancelled
	}

	bufs.prefix = c.appendChunkPrefix(bufs.prefix[:0])
	bufs.out = append(append(bufs.out[:0], bufs.prefix...), roleDelta...)
	if !send(bufs.out) {
		return outcomeCancelled
	}
	for i := 1; i <= c.chunks; i++ {
		if !sleep(ctx, b.ChunkInterval) {
			return outcomeCancelled
		}
		bufs.out = c.appendContentChunk(bufs.out[:0], bufs.prefix, i)
		if !send(bufs.out) {
			return outcomeCancelled
		}
		if i == b.StallAfterChunks {
			<-ctx.Done()
			return outcomeCancelled
		}
		if i == b.ResetAfterChunks {
			return outcomeReset
		}
		if i == b.ErrorAfterChunks {
			bufs.out = append(bufs.out[:0], "data: "...)
			bufs.out = append(appendErrorBody(bufs.out, "mock stream error", "server_error", "", "server_error"), '\n')
			if !send(bufs.out) {
				return outcomeCancelled
			}
			return outcomeFailed
		}
	}
	if includeUsage {
		bufs.out = c.appendUsageChunk(bufs.out[:0], bufs.prefix)
		if !send(bufs.out) {
			return outcomeCancelled
		}
	}
	if !send(append(bufs.out[:0], doneEvent...)) {
		return outcomeCancelled
	}
	return outcomeCompleted
}

// sleep waits d unless ctx ends first, and reports whether the request is still wanted.
// With d <= 0 it only checks ctx, so back-to-back chunks still notice a cancellation.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
