package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// The trace tests run a real gateway exporting to a collector on
// loopback and read the span trees back from the decoded exports.

const (
	tracePrompt = "SENTINEL-PROMPT-trace-5d1a" // must reach no span
	inboundTID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	inboundSID  = "00f067aa0ba902b7"
)

// traceEnv exports to sink quickly, every span sampled.
func traceEnv(sink *otlpSink, extra ...string) map[string]string {
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL,
		"OTEL_BSP_SCHEDULE_DELAY":     "20",
		"OTEL_SERVICE_NAME":           "llmgw-test",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

func tracedBody(model string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"stream":%v,"max_tokens":77,"temperature":0.25}`,
		model, tracePrompt, stream)
}

// tracedPost sends a chat request carrying an inbound traceparent with
// trace id tid, and returns the response, its body and the request id.
func (g *gateway) tracedPost(t *testing.T, tid, body string) (*http.Response, []byte) {
	t.Helper()
	return g.post(t, body, "Traceparent", "00-"+tid+"-"+inboundSID+"-01")
}

// attemptStatus is an attempt span's candidate status, error type and
// whether the span's status is Error, as "status/error_type/error".
func attemptStatus(sp *tracepb.Span) string {
	s := strAttr(sp, "llmgw.candidate.status") + "/" + strAttr(sp, "llmgw.error_type")
	if sp.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		s += "/error"
	}
	return s
}

// TestTracePlainRequest protects the shape of a request's trace: the
// client's traceparent continued, one server span with the HTTP
// attributes and the request id, one attempt span with the GenAI
// attributes and its events; the same trace id on the request row and the
// access log line; no traceparent to a provider that did not ask for it;
// and no prompt, completion, key or token in any exported byte.
func TestTracePlainRequest(t *testing.T) {
	sink := newHTTPSink(t, false)
	var logBuf syncBuffer
	g := start(t, setup{db: true, env: traceEnv(sink, "GATEWAY_TRACE_URL", "http://viewer.test/trace/{trace_id}"), log: &logBuf})
	resp, body := g.tracedPost(t, inboundTID, tracedBody("gpt-4o-mini", false))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	rid := resp.Header.Get("X-Request-Id")
	tr := treeOf(t, sink.trace(t, inboundTID, 2))
	if got := fmt.Sprintf("%x", tr.server.ParentSpanId); got != inboundSID {
		t.Errorf("server span's parent %s, want the client's %s", got, inboundSID)
	}
	if tr.server.Name != "POST /v1/chat/completions" {
		t.Errorf("server span %q", tr.server.Name)
	}
	wantAttrs(t, tr.server, map[string]any{"http.request.method": "POST", "http.route": "/v1/chat/completions",
		"http.response.status_code": 200, "llmgw.request_id": rid})
	if len(tr.attempts) != 1 {
		t.Fatalf("attempts %s, want one", names(tr.attempts))
	}
	a := tr.attempts[0]
	if a.Name != "chat up-primary-mini" {
		t.Errorf("attempt span %q, want \"chat up-primary-mini\"", a.Name)
	}
	wantAttrs(t, a, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
		"gen_ai.request.model": "up-primary-mini", "gen_ai.response.model": "up-primary-mini",
		"gen_ai.request.max_tokens": 77, "server.address": "127.0.0.1", "llmgw.candidate.index": 0,
		"llmgw.candidate.status": "success", "llmgw.hedge": false, "llmgw.provider": "primary"})
	if v := attr(a, "gen_ai.request.temperature").GetDoubleValue(); v != 0.25 {
		t.Errorf("gen_ai.request.temperature = %v, want 0.25", v)
	}
	if attr(a, "gen_ai.usage.input_tokens") == nil || intAttr(a, "gen_ai.usage.output_tokens") <= 0 {
		t.Errorf("usage attributes missing: %v", a.Attributes)
	}
	if got := finishReasons(a); got != "stop" {
		t.Errorf("gen_ai.response.finish_reasons %q, want [stop]", got)
	}
	if attr(a, "llmgw.admission.wait_ms") == nil {
		t.Errorf("no llmgw.admission.wait_ms")
	}
	if ev := strings.Join(eventNames(a), ","); ev != "admitted,first_byte,committed" {
		t.Errorf("attempt events %s, want admitted,first_byte,committed", ev)
	}
	if a.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("a successful attempt has status Error")
	}

	req, _ := g.ledger(t, rid)
	if req.TraceID == nil || *req.TraceID != inboundTID {
		t.Errorf("request row trace_id %v, want %s", req.TraceID, inboundTID)
	}
	code, tl := g.get(t, "/admin/requests/"+rid, true)
	var answer0 struct {
		TraceURL string `json:"trace_url"`
		Request  struct {
			TraceID string `json:"trace_id"`
		} `json:"request"`
	}
	if code != http.StatusOK || json.Unmarshal(tl, &answer0) != nil || answer0.Request.TraceID != inboundTID ||
		answer0.TraceURL != "http://viewer.test/trace/"+inboundTID {
		t.Errorf("admin timeline %d: %s, want the trace id and its link", code, tl)
	}
	eventually(t, 3*time.Second, "the access log line with the trace id", func() (bool, string) {
		return strings.Contains(logBuf.String(), "trace_id="+inboundTID), logBuf.String()
	})
	// A request refused before planning has its server span and its
	// trace id in its access log line too.
	const refusedTID = "77777777777777777777777777777777"
	if resp, body := g.tracedPost(t, refusedTID, tracedBody("no-such-model", false)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown model: %d %s", resp.StatusCode, body)
	}
	refused := treeOf(t, sink.trace(t, refusedTID, 1))
	wantAttrs(t, refused.server, map[string]any{"http.response.status_code": 404})
	if len(refused.attempts) != 0 || refused.server.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("refused request: attempts %s, status %v; want none and not an Error", names(refused.attempts), refused.server.Status)
	}
	eventually(t, 3*time.Second, "the refusal's access log line with its trace id", func() (bool, string) {
		return strings.Contains(logBuf.String(), "trace_id="+refusedTID), logBuf.String()
	})
	if rec, ok := g.Primary.LastRequestAt(""); !ok || rec.Header.Get("Traceparent") != "" {
		t.Errorf("the provider without propagate_trace got traceparent %q", rec.Header.Get("Traceparent"))
	}

	var answer struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || len(answer.Choices) == 0 || answer.Choices[0].Message.Content == "" {
		t.Fatalf("answer %s", body)
	}
	raw := sink.rawBytes()
	for _, secret := range []string{tracePrompt, answer.Choices[0].Message.Content, primaryKey, backupKey, "admin-SENTINEL-token"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("an export carries %q", secret)
		}
	}
}

// TestTracePropagate: a provider with propagate_trace: true is sent the
// request's trace with the attempt span's own id as parent.
func TestTracePropagate(t *testing.T) {
	sink := newHTTPSink(t, false)
	g := start(t, setup{env: traceEnv(sink), primaryExtra: "    propagate_trace: true"})
	resp, body := g.tracedPost(t, inboundTID, tracedBody("gpt-4o-mini", true))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	tr := treeOf(t, sink.trace(t, inboundTID, 2))
	if got := finishReasons(tr.attempts[0]); got != "stop" {
		t.Errorf("a stream's gen_ai.response.finish_reasons %q, want [stop]", got)
	}
	want := fmt.Sprintf("00-%s-%x-01", inboundTID, tr.attempts[0].SpanId)
	rec, _ := g.Primary.LastRequestAt("")
	if got := rec.Header.Get("Traceparent"); got != want {
		t.Errorf("provider got traceparent %q, want %q", got, want)
	}
}

// TestTraceFailover: a 500 from the primary is an Error attempt span, the
// backup's a success, both under the one request span.
func TestTraceFailover(t *testing.T) {
	sink := newHTTPSink(t, false)
	g := start(t, setup{env: traceEnv(sink), primary: mockupstream.Behavior{Status: 500}})
	const tid = "11111111111111111111111111111111"
	resp, body := g.tracedPost(t, tid, tracedBody("gpt-4o-mini", false))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	tr := treeOf(t, sink.trace(t, tid, 3))
	if len(tr.attempts) != 2 {
		t.Fatalf("attempts %s, want two", names(tr.attempts))
	}
	if got := attemptStatus(tr.attempts[0]); got != "failed/upstream_http_error/error" {
		t.Errorf("primary attempt %s, want failed/upstream_http_error/error", got)
	}
	wantAttrs(t, tr.attempts[0], map[string]any{"http.response.status_code": 500, "llmgw.provider": "primary"})
	if got := attemptStatus(tr.attempts[1]); got != "success/" {
		t.Errorf("backup attempt %s, want success/", got)
	}
	if tr.attempts[1].Name != "chat up-backup-mini" {
		t.Errorf("backup attempt %q", tr.attempts[1].Name)
	}
}

// TestTraceHedge: the hedge that won and the attempt it beat are both on
// the trace, the loser cancelled with hedge_lost (not an Error).
func TestTraceHedge(t *testing.T) {
	sink := newHTTPSink(t, false)
	g := start(t, setup{env: traceEnv(sink), routes: hedgeRoutes,
		primary: mockupstream.Behavior{FirstByteDelay: 3 * time.Second}})
	const tid = "22222222222222222222222222222222"
	resp, body := g.tracedPost(t, tid, tracedBody("gpt-4o-mini", true))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	tr := treeOf(t, sink.trace(t, tid, 3))
	if len(tr.attempts) != 2 {
		t.Fatalf("attempts %s, want two", names(tr.attempts))
	}
	if got := attemptStatus(tr.attempts[0]); got != "cancelled/hedge_lost" {
		t.Errorf("primary attempt %s, want cancelled/hedge_lost", got)
	}
	wantAttrs(t, tr.attempts[0], map[string]any{"llmgw.hedge": false})
	if got := attemptStatus(tr.attempts[1]); got != "success/" {
		t.Errorf("backup attempt %s, want success/", got)
	}
	wantAttrs(t, tr.attempts[1], map[string]any{"llmgw.hedge": true})
}

// TestTraceClientCancel: a client that hangs up mid-stream leaves a
// cancelled attempt span with the tokens streamed until then.
func TestTraceClientCancel(t *testing.T) {
	sink := newHTTPSink(t, false)
	g := start(t, setup{env: traceEnv(sink),
		primary: mockupstream.Behavior{Chunks: 100, ChunkInterval: 20 * time.Millisecond}})
	const tid = "33333333333333333333333333333333"
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(tracedBody("gpt-4o-mini", true)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+tid+"-"+inboundSID+"-01")
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for n := 0; n < 5 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	resp.Body.Close()
	g.client.CloseIdleConnections()
	tr := treeOf(t, sink.trace(t, tid, 2))
	a := tr.attempts[0]
	if got := attemptStatus(a); !strings.HasPrefix(got, "cancelled/") || strings.HasSuffix(got, "/error") {
		t.Errorf("attempt %s, want cancelled and not an Error", got)
	}
	if intAttr(a, "gen_ai.usage.output_tokens") <= 0 {
		t.Errorf("no output tokens on the cancelled attempt: %v", a.Attributes)
	}
}

// TestTraceCutStream: a stream the provider cuts after the commit point is
// a failed, Error attempt, and the request span says the answer was
// aborted.
func TestTraceCutStream(t *testing.T) {
	sink := newHTTPSink(t, false)
	g := start(t, setup{env: traceEnv(sink), primary: mockupstream.Behavior{Chunks: 10, ResetAfterChunks: 3}})
	const tid = "44444444444444444444444444444444"
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(tracedBody("gpt-4o-mini", true)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+tid+"-"+inboundSID+"-01")
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	tr := treeOf(t, sink.trace(t, tid, 2))
	if len(tr.attempts) != 1 {
		t.Fatalf("attempts %s, want one (a cut after commit does not fail over)", names(tr.attempts))
	}
	if got := attemptStatus(tr.attempts[0]); !strings.HasPrefix(got, "failed/") || !strings.HasSuffix(got, "/error") {
		t.Errorf("attempt %s, want failed with status Error", got)
	}
	if got := finishReasons(tr.attempts[0]); got != "" {
		t.Errorf("a cut stream's gen_ai.response.finish_reasons %q, want none", got)
	}
	if tr.server.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("request span status %v, want Error for a cut answer", tr.server.Status)
	}
}

// TestTraceAdmissionRefused: candidates whose gates are full are Error
// attempt spans of admission failures, and the request span answers 429.
func TestTraceAdmissionRefused(t *testing.T) {
	sink := newHTTPSink(t, false)
	g := start(t, setup{env: traceEnv(sink), routes: oneSlotRoutes,
		primary: mockupstream.Behavior{Latency: 800 * time.Millisecond},
		backup:  mockupstream.Behavior{Latency: 800 * time.Millisecond}})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); g.post(t, chatBody(false)) }()
	}
	eventually(t, 5*time.Second, "primary and backup each busy", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1 && g.Backup.Stats().InFlight == 1, ""
	})
	const tid = "55555555555555555555555555555555"
	resp, body := g.tracedPost(t, tid, tracedBody("gpt-4o-mini", false))
	wg.Wait()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	tr := treeOf(t, sink.trace(t, tid, 3))
	wantAttrs(t, tr.server, map[string]any{"http.response.status_code": 429})
	for _, a := range tr.attempts {
		if got := attemptStatus(a); !strings.HasPrefix(got, "failed/gateway_admission") || !strings.HasSuffix(got, "/error") {
			t.Errorf("attempt %q %s, want failed/gateway_admission.../error", a.Name, got)
		}
		if len(a.Events) != 0 {
			t.Errorf("a refused attempt has events %s", eventNames(a))
		}
	}
}

// TestTraceGRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports the same tree to
// a TraceService on loopback, under the configured service name.
func TestTraceGRPC(t *testing.T) {
	sink := newGRPCSink(t)
	g := start(t, setup{env: traceEnv(sink, "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
		primary: mockupstream.Behavior{Status: 500}})
	const tid = "66666666666666666666666666666666"
	resp, body := g.tracedPost(t, tid, tracedBody("gpt-4o-mini", true))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	tr := treeOf(t, sink.trace(t, tid, 3))
	if len(tr.attempts) != 2 || attemptStatus(tr.attempts[0]) != "failed/upstream_http_error/error" ||
		attemptStatus(tr.attempts[1]) != "success/" {
		t.Fatalf("attempts %s, want a failed primary and a successful backup", names(tr.attempts))
	}
	sink.mu.Lock()
	svc := sink.svc[0]
	sink.mu.Unlock()
	if svc != "llmgw-test" {
		t.Errorf("service.name %q, want llmgw-test", svc)
	}
	if bytes.Contains(sink.rawBytes(), []byte(tracePrompt)) {
		t.Errorf("an export carries the prompt")
	}
}

// TestTraceExporterDown: a collector that hangs, and one that is not
// there, slow no request; what cannot be exported is counted dropped.
func TestTraceExporterDown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint func(t *testing.T) string
	}{
		{"slow", func(t *testing.T) string { return newHTTPSink(t, true).URL }},
		{"down", func(*testing.T) string { return "http://127.0.0.1:1" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := start(t, setup{env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": tc.endpoint(t),
				"OTEL_BSP_SCHEDULE_DELAY":     "10",
				"OTEL_BSP_MAX_QUEUE_SIZE":     "4",
				"OTEL_EXPORTER_OTLP_TIMEOUT":  "300",
			}})
			begin := time.Now()
			const n = 40
			for range n {
				resp, body := g.post(t, chatBody(false))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
			}
			// Each request alone takes a few milliseconds here; one that
			// waited for the exporter would take its 300ms timeout.
			if took := time.Since(begin); took > n*100*time.Millisecond {
				t.Errorf("%d requests took %v: the exporter slowed them", n, took)
			}
			eventually(t, 5*time.Second, "dropped spans counted", func() (bool, string) {
				got := g.scrape(t)["gateway_trace_spans_dropped_total{}"]
				return got > 0, fmt.Sprintf("dropped %v", got)
			})
		})
	}
}

// TestTraceSkipped: a provider that cannot be reached fails its first
// candidate and skips its second (provider_failed); the skip is an event
// on the request span, not an attempt span.
func TestTraceSkipped(t *testing.T) {
	sink := newHTTPSink(t, false)
	g := start(t, setup{env: traceEnv(sink), routes: `
providers:
  - name: dead
    base_url: http://127.0.0.1:1/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
%[3]s
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: dead, model: m1, priority: 0 }
      - { provider: dead, model: m2, priority: 1 }
      - { provider: backup, model: up-backup-mini, priority: 2 }
`})
	const tid = "88888888888888888888888888888888"
	resp, body := g.tracedPost(t, tid, tracedBody("gpt-4o-mini", false))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	tr := treeOf(t, sink.trace(t, tid, 3))
	if len(tr.attempts) != 2 || attemptStatus(tr.attempts[0]) != "failed/upstream_connect_error/error" ||
		attemptStatus(tr.attempts[1]) != "success/" {
		var got []string
		for _, a := range tr.attempts {
			got = append(got, a.Name+" "+attemptStatus(a))
		}
		t.Fatalf("attempts %v, want dead's failed and backup's success", got)
	}
	var skips []string
	for _, e := range tr.server.Events {
		if e.Name != "skipped" {
			continue
		}
		for _, a := range e.Attributes {
			if a.Key == "llmgw.skip_reason" {
				skips = append(skips, a.Value.GetStringValue())
			}
		}
	}
	if len(skips) != 1 || skips[0] != "provider_failed" {
		t.Errorf("skip events %v, want one provider_failed", skips)
	}
}
