package mockupstream

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// The part of the streaming timeline every endpoint shares: Latency, 200 headers,
// StallAfterHeaders, keep-alive comments, FirstByteDelay before the first event, and
// after each content chunk the StallAfterChunks / ResetAfterChunks / ErrorAfterChunks /
// EndAfterChunks checks. What the events say is the endpoint's.

// sseStream is an SSE answer whose headers are sent.
type sseStream struct {
	ctx context.Context
	w   http.ResponseWriter
	rc  http.ResponseController // a value, so that a stream costs no allocation of its own
}

// openStream runs the timeline up to the first data event. It reports false when the
// stream ends before it: the client left, or StallAfterHeaders held it until it did.
func openStream(w http.ResponseWriter, r *http.Request, b *Behavior, bufs *buffers) (sseStream, bool) {
	return openStreamAs(w, r, b, bufs, "text/event-stream")
}

// openStreamAs is openStream for a stream of contentType (Bedrock's eventstream
// frames); Comments are SSE's and are not sent on any other.
func openStreamAs(w http.ResponseWriter, r *http.Request, b *Behavior, bufs *buffers, contentType string) (sseStream, bool) {
	st := sseStream{ctx: r.Context(), w: w, rc: *http.NewResponseController(w)}
	if !sleep(st.ctx, b.Latency) {
		return st, false
	}
	h := w.Header()
	h["Content-Type"] = []string{contentType}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	if st.rc.Flush() != nil {
		return st, false
	}
	if b.StallAfterHeaders {
		<-st.ctx.Done()
		return st, false
	}
	for n := 0; n < b.Comments && contentType == "text/event-stream"; n++ {
		bufs.out = append(bufs.out[:0], commentEvent...)
		if !st.send(bufs.out) || !sleep(st.ctx, b.CommentInterval) {
			return st, false
		}
	}
	return st, sleep(st.ctx, b.FirstByteDelay)
}

// send writes one event (or several that belong together) and flushes it, so the
// gateway sees it at once and as a single read where possible.
func (st *sseStream) send(event []byte) bool {
	if _, err := st.w.Write(event); err != nil {
		return false
	}
	return st.rc.Flush() == nil
}

// The events MalformedAfterChunks sends: the endpoint's data event, cut short.
const (
	malformedChat      = "data: {not json\n\n"
	malformedMessages  = "event: content_block_delta\ndata: {not json\n\n"
	malformedResponses = "event: response.output_text.delta\ndata: {not json\n\n"
)

// afterChunk applies the fault due once content chunk i (1-based) is sent, and reports
// whether the stream ends there and how. MalformedAfterChunks sends malformed first
// and does not end the stream by itself. StallAfterChunks wins over ResetAfterChunks,
// which wins over ErrorAfterChunks, which wins over EndAfterChunks, at the same chunk.
// appendError appends the endpoint's mid-stream error event(s); the stream ends
// cleanly after them. EndAfterChunks ends it cleanly with nothing more.
func (st *sseStream) afterChunk(b *Behavior, i int, bufs *buffers, appendError func([]byte) []byte, malformed string) (outcome, bool) {
	if i == b.MalformedAfterChunks && !st.send(append(bufs.out[:0], malformed...)) {
		return outcomeCancelled, true
	}
	switch i {
	case b.StallAfterChunks:
		<-st.ctx.Done()
		return outcomeCancelled, true
	case b.ResetAfterChunks:
		return outcomeReset, true
	case b.ErrorAfterChunks:
		bufs.out = appendError(bufs.out[:0])
		if !st.send(bufs.out) {
			return outcomeCancelled, true
		}
		return outcomeFailed, true
	case b.EndAfterChunks:
		return outcomeFailed, true
	}
	return outcomeCompleted, false
}

// appendNamedEvent appends "event: <name>\ndata: ", the start of an event of the
// Anthropic and Responses streams; the caller appends the JSON and "\n\n".
func appendNamedEvent(dst []byte, name string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	return append(dst, "\ndata: "...)
}

// writeAnswer writes a whole 200 JSON body.
func writeAnswer(w http.ResponseWriter, body []byte) outcome {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body); err != nil {
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
