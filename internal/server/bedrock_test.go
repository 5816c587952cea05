package server_test

import (
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// bedrockRoutes: the primary mock as a bedrock provider (tier 0; base_url
// overrides the regional host) with static credentials from the
// environment, the backup as an openai one (tier 1). %[3]s is
// primaryExtra (a stream_commit, for the exception-before-commit case).
const bedrockRoutes = `
providers:
` + brProvider + `    health: { failures: 1, cooldown: 1m }
%[3]s
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: claude-br
    candidates:
      - { provider: br, model: "anthropic.claude-3-5-haiku-20241022-v1:0", priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
  - name: nova-br
    candidates:
      - { provider: br, model: "amazon.nova-lite-v1:0", priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
`

// brProvider is the primary mock as provider br, format bedrock, signing
// with the sentinel credentials (bedrockSetup's environment).
const brProvider = `  - name: br
    format: bedrock
    base_url: %[1]s
    bedrock: { region: us-east-1 }
    aws: { access_key_id: "${BR_KEY_ID}", secret_access_key: "${BR_SECRET}", session_token: "${BR_TOKEN}" }
    max_concurrency: 8
`

// The sentinel credentials: none may show anywhere but in the signature
// the mock checks.
const (
	brKeyID  = "AKIASENTINEL7Q2X4Z9"
	brSecret = "wJalrSENTINELsecretK7MDENGbPxRfiCYEXAMPLEKEY"
	brToken  = "FwoGZXIvYXdzSENTINELsessionTokenEXAMPLE0123456789"
	// The built-in price of anthropic.claude-3-5-haiku-20241022-v1:0.
	brIn, brOut, brCached, brWrite = 0.80, 4.00, 0.08, 1.00
	brModelPath                    = "/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse"
)

// bedrockSetup is a setup whose primary verifies every request's SigV4
// signature with the sentinel credentials, as AWS would.
func bedrockSetup(s setup) setup {
	s.routes, s.db = bedrockRoutes, true
	s.env = map[string]string{"BR_KEY_ID": brKeyID, "BR_SECRET": brSecret, "BR_TOKEN": brToken}
	s.prepare = func(g *gateway) { g.Primary.EnableBedrock("us-east-1", brKeyID, brSecret, brToken) }
	return s
}

func brChat(model string, stream bool, extra string) string {
	return `{"model":"` + model + `","stream":` + map[bool]string{false: "false", true: "true"}[stream] +
		`,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
}

// TestBedrockProvider: OpenAI and Anthropic clients, stream and not, reach
// a bedrock candidate through a signature the mock re-computes: answer,
// finish reason and usage (cache reads and writes inside the prompt)
// reach the client, the rows and the cost at the built-in bedrock price;
// tool calls come back as tool calls both ways.
func TestBedrockProvider(t *testing.T) {
	const cached, written = 4, 2
	g := start(t, bedrockSetup(setup{primary: mockupstream.Behavior{CachedTokens: cached, CacheWriteTokens: written}}))
	const want = "Hello from primary chunk 1 2 3"
	for _, tc := range []struct {
		name, path, body string
		want             []string
	}{
		{"chat", "/v1/chat/completions", brChat("claude-br", false, ""),
			[]string{`"content":"` + want + `"`, `"finish_reason":"stop"`, `"cached_tokens":4`}},
		{"chat stream", "/v1/chat/completions", brChat("claude-br", true, `,"stream_options":{"include_usage":true}`),
			[]string{`"content":"Hello from primary chunk 1"`, `"finish_reason":"stop"`, `"cached_tokens":4`, "data: [DONE]"}},
		{"messages", "/v1/messages", `{"model":"claude-br","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"text":"` + want + `"`, `"stop_reason":"end_turn"`, `"output_tokens":3`}},
		{"messages stream", "/v1/messages", `{"model":"claude-br","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"text":"Hello from primary chunk 1"`, `"stop_reason":"end_turn"`, "event: message_stop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := g.postStream(t, tc.path, tc.body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %v: %s", resp.StatusCode, err, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("%s not in the answer: %s", w, body)
				}
			}
			id := resp.Header.Get("X-Request-Id")
			req, rows := g.ledger(t, id)
			wantRows(t, rows, "success/200/(br)", "unused/0/(backup)")
			c := g.costOf(t, id)
			if req.PromptTokens == nil || req.TotalTokens == nil || c.cost == nil || ip(c.cached) != "4" {
				t.Fatalf("request row: prompt %s total %s cost %s cached %s", ip(req.PromptTokens), ip(req.TotalTokens), fp(c.cost), ip(c.cached))
			}
			completion := *req.TotalTokens - *req.PromptTokens
			if completion != 3 {
				t.Fatalf("completion tokens %d, want 3", completion)
			}
			cost := (float64(*req.PromptTokens-cached-written)*brIn + cached*brCached + written*brWrite + float64(completion)*brOut) / 1e6
			if math.Abs(*c.cost-cost) > 1e-12 {
				t.Fatalf("cost %s, want %v", fp(c.cost), cost)
			}
		})
	}
	for _, path := range []string{brModelPath, brModelPath + "-stream"} {
		last, ok := g.Primary.LastRequestAt(path)
		if !ok {
			t.Fatalf("no request at %s", path)
		}
		if a := last.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential="+brKeyID+"/") ||
			!strings.Contains(a, "/us-east-1/bedrock/aws4_request") || last.Header.Get("X-Amz-Security-Token") != brToken {
			t.Fatalf("%s: not signed for bedrock: %v", path, last.Header)
		}
		if strings.Contains(string(last.Body), brSecret) || strings.Contains(last.Header.Get("Authorization"), brSecret) {
			t.Fatalf("the secret key travelled: %v", last.Header)
		}
	}
	if n := g.Backup.Stats().Requests; n != 0 {
		t.Fatalf("the backup got %d requests", n)
	}

	t.Run("tools", func(t *testing.T) {
		g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", ToolUse: mockupstream.ToolUseFirst})
		defer g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary"})
		tools := `,"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]`
		for _, stream := range []bool{false, true} {
			resp, b, err := g.postStream(t, "/v1/chat/completions", brChat("claude-br", stream, tools))
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %v: %s", resp.StatusCode, err, b)
			}
			for _, w := range []string{`"name":"lookup"`, `"finish_reason":"tool_calls"`, `identity`, `"id":"tooluse_mock_`} {
				if !strings.Contains(string(b), w) {
					t.Errorf("stream %v: %s not in %s", stream, w, b)
				}
			}
		}
		last, _ := g.Primary.LastRequestAt(brModelPath)
		if !strings.Contains(string(last.Body), `"toolConfig":{"tools":[{"toolSpec":{"name":"lookup","inputSchema":{"json":{"type":"object"}}}}]}`) {
			t.Fatalf("the tools were not translated: %s", last.Body)
		}
		resp, b, _ := g.postStream(t, "/v1/messages", `{"model":"claude-br","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"lookup","input_schema":{"type":"object"}}]}`)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"type":"tool_use"`) || !strings.Contains(string(b), `"stop_reason":"tool_use"`) {
			t.Fatalf("messages tools: %d %s", resp.StatusCode, b)
		}
	})
}

// TestBedrockFailover: a bedrock candidate answering 5xx (an AWS
// exception type in x-amzn-ErrorType), a 424 model error, a 408, an
// exception frame or a frame whose CRC is wrong before the commit point,
// or a stream that stalls before its first frame fails over to the
// openai candidate, which answers; the rows say so.
func TestBedrockFailover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     mockupstream.Behavior
		extra string
		row   string
	}{
		{"503", mockupstream.Behavior{Status: http.StatusServiceUnavailable}, "", "failed/503/upstream_http_error(br)"},
		{"500", mockupstream.Behavior{Status: http.StatusInternalServerError}, "", "failed/500/upstream_http_error(br)"},
		{"424", mockupstream.Behavior{Status: http.StatusFailedDependency}, "", "failed/424/upstream_http_error(br)"},
		{"408", mockupstream.Behavior{Status: http.StatusRequestTimeout}, "", "failed/408/upstream_http_error(br)"},
		{"exception frame", mockupstream.Behavior{ErrorAfterChunks: 1}, "    stream_commit: { events: 3 }", "failed/502/upstream_stream_error(br)"},
		{"bad CRC", mockupstream.Behavior{MalformedAfterChunks: 1}, "    stream_commit: { events: 3 }", "failed/502/stream_interrupted(br)"},
		{"stall", mockupstream.Behavior{StallAfterHeaders: true}, "    timeouts: { first_byte: 300ms }", "failed/504/stream_first_byte_timeout(br)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := start(t, bedrockSetup(setup{primary: tc.b, primaryExtra: tc.extra}))
			for _, stream := range []bool{false, true} {
				if tc.extra != "" && !stream {
					continue
				}
				resp, b, err := g.postStream(t, "/v1/chat/completions", brChat("claude-br", stream, ""))
				if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from backup") || strings.Contains(string(b), "primary") {
					t.Fatalf("stream %v: %d %v: %s", stream, resp.StatusCode, err, b)
				}
				_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
				if len(rows) == 2 && rows[0].Status == "skipped" {
					continue // the first failure cooled the model (failures: 1)
				}
				wantRows(t, rows, tc.row, "success/200/(backup)")
			}
		})
	}
}

// TestBedrockValidationError: a 400 ValidationException blames the
// request: it reaches the client as 400 in its own shape with AWS's
// message, and no other candidate is tried; one for the input's size
// fails over as a context-length refusal.
func TestBedrockValidationError(t *testing.T) {
	g := start(t, bedrockSetup(setup{primary: mockupstream.Behavior{Status: http.StatusBadRequest}}))
	const awsMsg = "Malformed input request, please reformat your input and try again."
	resp, b := g.post(t, brChat("claude-br", false, ""))
	if e := decodeError(t, b); resp.StatusCode != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || e.Error.Message != awsMsg {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/400/upstream_http_error(br)", "unused/0/(backup)")

	resp, b, _ = g.postStream(t, "/v1/messages", `{"model":"claude-br","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"type":"error"`) || !strings.Contains(string(b), awsMsg) {
		t.Fatalf("messages: %d %s", resp.StatusCode, b)
	}
	// A field Converse cannot honour is refused by the gateway, naming it.
	resp, b = g.post(t, brChat("claude-br", false, `,"logprobs":true`))
	if e := decodeError(t, b); resp.StatusCode != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != "logprobs" {
		t.Fatalf("logprobs: %d %s", resp.StatusCode, b)
	}
	if n := g.Backup.Stats().Requests; n != 0 {
		t.Fatalf("the backup got %d requests", n)
	}

	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", ErrorKind: mockupstream.ErrorContextLength})
	resp, b = g.post(t, brChat("claude-br", false, ""))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from backup") {
		t.Fatalf("too long: %d %s", resp.StatusCode, b)
	}
	_, rows = g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/400/context_length_exceeded(br)", "success/200/(backup)")
}

// TestBedrockThrottleKeyScoped: a ThrottlingException speaks for the AWS
// credentials (the account's quota in the region): it fails over, and the
// credentials cool at once (failures: 1) for every model, so a request
// for another model does not try them either. A 403 AccessDenied is the
// key's too.
func TestBedrockThrottleKeyScoped(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusForbidden} {
		g := start(t, bedrockSetup(setup{primary: mockupstream.Behavior{Status: status}}))
		resp, b := g.post(t, brChat("claude-br", false, ""))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from backup") {
			t.Fatalf("%d: %d %s", status, resp.StatusCode, b)
		}
		before := g.Primary.Stats().Requests
		if resp, b := g.post(t, brChat("nova-br", false, "")); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from backup") {
			t.Fatalf("after the %d: %d %s", status, resp.StatusCode, b)
		}
		if n := g.Primary.Stats().Requests; n != before {
			t.Fatalf("%d: the cooled credentials were tried again for another model (%d -> %d requests)", status, before, n)
		}
	}
}

// TestBedrockCredentialsNeverShown: the AWS secret key and session token
// appear in no client answer, row, admin answer or log line, whatever the
// provider answered: a success, a 403, a relayed 400, an exception frame
// after the commit, and a refused signature whose message quotes the
// session token, as AWS's do. Each on a gateway of its own, as a 403
// cools the credentials for the rest.
func TestBedrockCredentialsNeverShown(t *testing.T) {
	for _, tc := range []struct {
		name      string
		b         mockupstream.Behavior
		badSecret bool
		kept      string // a text some row must hold, so the checks are not vacuous
	}{
		{"success", mockupstream.Behavior{}, false, ""},
		{"403", mockupstream.Behavior{Status: http.StatusForbidden}, false, "mock error"},
		{"400", mockupstream.Behavior{Status: http.StatusBadRequest}, false, "Malformed input"},
		{"exception after commit", mockupstream.Behavior{ErrorAfterChunks: 2}, false, ""},
		{"refused signature", mockupstream.Behavior{}, true, "Canonical String"},
	} {
		t.Run(tc.name, func(t *testing.T) { bedrockLeaks(t, tc.b, tc.badSecret, tc.kept) })
	}
}

func bedrockLeaks(t *testing.T, b mockupstream.Behavior, badSecret bool, kept string) {
	log := &syncBuffer{}
	s := bedrockSetup(setup{log: log, primary: b})
	if badSecret {
		s.prepare = func(g *gateway) { g.Primary.EnableBedrock("us-east-1", brKeyID, "not-the-secret", brToken) }
	}
	g := start(t, s)
	check := func(what, s string) {
		t.Helper()
		for _, v := range []string{brSecret, brToken, brSecret[:16], brToken[:16]} {
			if strings.Contains(s, v) {
				t.Errorf("%s holds a credential: %s", what, s)
			}
		}
	}
	var ids []string
	for _, stream := range []bool{false, true} {
		resp, body, _ := g.postStream(t, "/v1/chat/completions", brChat("claude-br", stream, ""))
		check("the answer", string(body))
		for k, v := range resp.Header {
			check("the answer's header "+k, strings.Join(v, ","))
		}
		ids = append(ids, resp.Header.Get("X-Request-Id"))
	}
	var allRows string
	for _, id := range ids {
		rows := g.rowsText(t, id)
		allRows += rows
		check("the rows of "+id, rows)
		_, b := g.get(t, "/admin/requests/"+id, true)
		check("/admin/requests/"+id, string(b))
	}
	for _, path := range []string{"/admin/config", "/admin/health", "/metrics"} {
		_, b := g.get(t, path, true)
		check(path, string(b))
	}
	g.shutdown(t)
	check("the gateway's log", log.String())
	if !strings.Contains(allRows, kept) {
		t.Fatalf("no row holds %q: the checks above prove little\n%s", kept, allRows)
	}
}

// TestBedrockExceptionAfterCommit: an exception frame after the client got
// bytes cannot fail over: the stream ends with the client format's error
// frame (code stream_interrupted), never a made-up [DONE], and the rows
// say the stream broke: failed, 502, stream_interrupted.
func TestBedrockExceptionAfterCommit(t *testing.T) {
	g := start(t, bedrockSetup(setup{primary: mockupstream.Behavior{ErrorAfterChunks: 2}}))
	resp, b, _ := g.postStream(t, "/v1/chat/completions", brChat("claude-br", true, ""))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from primary chunk 1") ||
		!strings.Contains(string(b), `"error"`) || strings.Contains(string(b), "[DONE]") {
		t.Fatalf("%d: %s", resp.StatusCode, b)
	}
	if !strings.Contains(string(b), `"code":"stream_interrupted"`) {
		t.Fatalf("the error frame is not the gateway's stream_interrupted: %s", b)
	}
	req, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/502/stream_interrupted(br)", "unused/0/(backup)")
	if req.Status != "failed" || req.StatusCode == nil || *req.StatusCode != http.StatusBadGateway {
		t.Fatalf("request row %+v", req)
	}
	if n := g.Backup.Stats().Requests; n != 0 {
		t.Fatalf("the backup got %d requests after the commit", n)
	}
}
