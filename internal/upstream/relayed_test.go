package upstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// FuzzRelayedError: whatever a provider answers a client-fault status
// with, the client gets a JSON object labelled application/json: the
// provider's JSON (rewritten for another format) or, for anything else,
// the route's error shape that no byte of the provider's body shapes. Seeds: HTML, JSON
// labelled otherwise, JSON cut short, a bare array, an encoded body.
func FuzzRelayedError(f *testing.F) {
	f.Add(uint8(0), "text/html", "", []byte("<html><script>x</script></html>"))
	f.Add(uint8(1), "text/plain", "", []byte(`{"error":{"message":"m"}}`))
	f.Add(uint8(0), "application/json", "", []byte(`{"error":{"message":"m"`))
	f.Add(uint8(1), "application/json", "", []byte(`[1,2]`))
	f.Add(uint8(2), "application/json", "gzip", []byte("\x1f\x8b\x08"))
	f.Add(uint8(3), "", "", []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"m"}}`))
	f.Add(uint8(0), "application/json; charset=\"", "", []byte(`{}`))
	eps := []*Endpoint{}
	for _, format := range []string{FormatOpenAI, FormatAnthropic} {
		ep, err := NewEndpoint(format, "http://p.example/v1", nil, Auth{}, nil, 0)
		if err != nil {
			f.Fatal(err)
		}
		eps = append(eps, ep)
	}
	f.Fuzz(func(t *testing.T, which uint8, ct, ce string, body []byte) {
		route := []Route{RouteChat, RouteMessages}[which%2]
		ep := eps[(which/2)%2]
		r := &ChatRequest{Route: route}
		se := &StatusError{Code: http.StatusBadRequest, Header: http.Header{}, Body: append([]byte(nil), body...)}
		if ct != "" {
			se.Header.Set("Content-Type", ct)
		}
		if ce != "" {
			se.Header.Set("Content-Encoding", ce)
		}
		wasJSON := jsonObject(se)
		r.Relayed(ep, se)
		if got := se.Header.Get("Content-Type"); !wasJSON && got != "application/json" {
			t.Fatalf("Content-Type %q after relaying %q", got, ct)
		}
		if !wasJSON {
			if !json.Valid(se.Body) || se.Header.Get("Content-Encoding") != "" {
				t.Fatalf("not a plain JSON error: %q", se.Body)
			}
			// The answer does not depend on the provider's bytes at all:
			// the same headers with another body give the same answer.
			other := &StatusError{Code: se.Code, Header: http.Header{}, Body: []byte("<other>")}
			if ct != "" {
				other.Header.Set("Content-Type", ct)
			}
			r.Relayed(ep, other)
			if !bytes.Equal(other.Body, se.Body) {
				t.Fatalf("the provider's bytes shaped the answer: %q vs %q", se.Body, other.Body)
			}
		}
	})
}
