package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// otlpSink is a collector on loopback: it decodes every export with the
// OTLP protobuf types and keeps the spans and the raw bytes (for the
// no-secrets check). Over HTTP/protobuf (newHTTPSink) or gRPC
// (newGRPCSink).
type otlpSink struct {
	URL string

	mu    sync.Mutex
	raw   [][]byte
	spans []*tracepb.Span
	svc   []string // service.name of each export's resources
	hold  chan struct{}
	coltracepb.UnimplementedTraceServiceServer
}

func (s *otlpSink) keep(raw []byte, req *coltracepb.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw = append(s.raw, raw)
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				s.svc = append(s.svc, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			s.spans = append(s.spans, ss.GetSpans()...)
		}
	}
}

// newHTTPSink serves POST /v1/traces. With slow set, each export waits
// until the test ends (an exporter that hangs).
func newHTTPSink(t *testing.T, slow bool) *otlpSink {
	s := &otlpSink{hold: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if slow {
			select {
			case <-s.hold:
			case <-r.Context().Done():
			}
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			t.Errorf("export is not an ExportTraceServiceRequest: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.keep(raw, &req)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	s.URL = srv.URL
	t.Cleanup(func() { close(s.hold); srv.Close() })
	return s
}

// newGRPCSink implements the collector's TraceService over gRPC.
func newGRPCSink(t *testing.T) *otlpSink {
	s := &otlpSink{hold: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, s)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(ln) }()
	s.URL = "http://" + ln.Addr().String()
	t.Cleanup(func() { gs.Stop(); <-done })
	return s
}

// Export implements the gRPC TraceService.
func (s *otlpSink) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	raw, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	s.keep(raw, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// trace waits until the trace tid has n spans and returns them.
func (s *otlpSink) trace(t *testing.T, tid string, n int) []*tracepb.Span {
	t.Helper()
	var got []*tracepb.Span
	eventually(t, 10*time.Second, fmt.Sprintf("%d spans of trace %s exported", n, tid), func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		got = got[:0]
		for _, sp := range s.spans {
			if hex.EncodeToString(sp.TraceId) == tid {
				got = append(got, sp)
			}
		}
		return len(got) >= n, fmt.Sprintf("%d spans: %s", len(got), names(got))
	})
	return got
}

// rawBytes is every export received so far, back to back.
func (s *otlpSink) rawBytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Join(s.raw, nil)
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, sp.Name)
	}
	return out
}

// spanTree is one request's spans: its server span and its attempts in
// candidate order of their start.
type spanTree struct {
	server   *tracepb.Span
	attempts []*tracepb.Span
}

func treeOf(t *testing.T, spans []*tracepb.Span) spanTree {
	t.Helper()
	var tr spanTree
	for _, sp := range spans {
		switch sp.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			if tr.server != nil {
				t.Fatalf("two server spans: %s", names(spans))
			}
			tr.server = sp
		case tracepb.Span_SPAN_KIND_CLIENT:
			tr.attempts = append(tr.attempts, sp)
		default:
			t.Fatalf("span %q of kind %v", sp.Name, sp.Kind)
		}
	}
	if tr.server == nil {
		t.Fatalf("no server span among %s", names(spans))
	}
	for i := 1; i < len(tr.attempts); i++ { // by candidate index
		for j := i; j > 0 && intAttr(tr.attempts[j], "llmgw.candidate.index") < intAttr(tr.attempts[j-1], "llmgw.candidate.index"); j-- {
			tr.attempts[j], tr.attempts[j-1] = tr.attempts[j-1], tr.attempts[j]
		}
	}
	for _, a := range tr.attempts {
		if !bytes.Equal(a.ParentSpanId, tr.server.SpanId) {
			t.Errorf("attempt %q's parent %x, want the server span %x", a.Name, a.ParentSpanId, tr.server.SpanId)
		}
		if a.EndTimeUnixNano < a.StartTimeUnixNano || a.EndTimeUnixNano == 0 {
			t.Errorf("attempt %q not ended properly: %d..%d", a.Name, a.StartTimeUnixNano, a.EndTimeUnixNano)
		}
	}
	return tr
}

func attr(sp *tracepb.Span, key string) *commonpb.AnyValue {
	for _, a := range sp.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return nil
}

func strAttr(sp *tracepb.Span, key string) string { return attr(sp, key).GetStringValue() }

func intAttr(sp *tracepb.Span, key string) int64 { return attr(sp, key).GetIntValue() }

func eventNames(sp *tracepb.Span) []string {
	var out []string
	for _, e := range sp.Events {
		out = append(out, e.Name)
	}
	return out
}

// wantAttrs checks string, int and bool attributes of sp.
func wantAttrs(t *testing.T, sp *tracepb.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		a := attr(sp, k)
		var got any
		switch v.(type) {
		case string:
			got = a.GetStringValue()
		case int:
			got = int(a.GetIntValue())
		case bool:
			got = a.GetBoolValue()
		}
		if a == nil || got != v {
			t.Errorf("span %q: %s = %v, want %v", sp.Name, k, a, v)
		}
	}
}
