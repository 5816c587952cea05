package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/jackc/pgx/v5"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// resumeRoutes: a route with resume, the primary then a backup that takes
// a prefill. %[3]s is the backup's format block (prefill: true for openai).
const resumeRoutes = `
providers:
  - name: primary
    %[3]s
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
  - name: backup
    %[3]s
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
    prefill: true
models:
  - name: gpt-4o-mini
    resume: { attempts: 1 }
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
`

// anthropicResumeRoutes is resumeRoutes for two anthropic providers, which
// take a prefill without a flag.
var anthropicResumeRoutes = strings.Replace(resumeRoutes, "    prefill: true\n", "", 1)

const resumeChunks, resumeCutAt = 60, 40

// wholeAnswer is the mock's answer of n chunks ("mock" is both mocks'
// identity: one model served by two providers).
func wholeAnswer(n int) string {
	var b strings.Builder
	b.WriteString("Hello from mock chunk 1")
	for i := 2; i <= n; i++ {
		fmt.Fprintf(&b, " %d", i)
	}
	return b.String()
}

func startResume(t *testing.T, anthropicFormat bool, backup mockupstream.Behavior) *gateway {
	t.Helper()
	routes, format := resumeRoutes, ""
	if anthropicFormat {
		routes, format = anthropicResumeRoutes, "format: anthropic"
	}
	backup.Identity, backup.Chunks, backup.Usage = "mock", resumeChunks, true
	return start(t, setup{db: true, routes: routes, primaryExtra: format,
		primary: mockupstream.Behavior{Identity: "mock", Chunks: resumeChunks, ResetAfterChunks: resumeCutAt, Usage: true},
		backup:  backup})
}

// resumeRows reads the request's candidate rows with resumed_from, once
// settled ("<status>/<error_type>/<resumed_from or ->").
func (g *gateway) resumeRows(t *testing.T, id string) []string {
	t.Helper()
	g.ledger(t, id)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, g.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rs, err := conn.Query(ctx, `SELECT status, coalesce(error_type, ''), resumed_from FROM request_candidates
		WHERE request_id = $1 ORDER BY candidate_index`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var status, et string
		var from *int32
		if err := rs.Scan(&status, &et, &from); err != nil {
			t.Fatal(err)
		}
		f := "-"
		if from != nil {
			f = fmt.Sprint(*from)
		}
		out = append(out, status+"/"+et+"/"+f)
	}
	return out
}

func wantStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}

// TestResumeOpenAIClient: a chat stream cut after 40 chunks on a route with
// resume reaches the official OpenAI client as one complete answer, the
// two parts without overlap or gap, under the first answer's id and model,
// with openai providers (prefill: true) and translated from anthropic ones;
// the rows say what happened and the usage the client sees is the ledger's.
func TestResumeOpenAIClient(t *testing.T) {
	for _, anthropicProviders := range []bool{false, true} {
		t.Run(fmt.Sprintf("anthropic_providers=%v", anthropicProviders), func(t *testing.T) {
			g := startResume(t, anthropicProviders, mockupstream.Behavior{})
			var id string
			c := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey("client-SENTINEL-token"),
				option.WithMaxRetries(0), option.WithHTTPClient(g.client),
				option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
					resp, err := next(r)
					if resp != nil {
						id = resp.Header.Get("X-Request-Id")
					}
					return resp, err
				}))
			stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
				Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
			var acc openai.ChatCompletionAccumulator
			ids, models, roles := map[string]bool{}, map[string]bool{}, 0
			for stream.Next() {
				ch := stream.Current()
				acc.AddChunk(ch)
				ids[ch.ID], models[ch.Model] = true, true
				for _, choice := range ch.Choices {
					if choice.Delta.Role != "" {
						roles++
					}
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if got, want := acc.Choices[0].Message.Content, wholeAnswer(resumeChunks); got != want {
				t.Fatalf("answer\n%q\nwant\n%q", got, want)
			}
			if len(ids) != 1 || len(models) != 1 || roles != 1 {
				t.Errorf("chunk ids %v, models %v, %d role deltas: want one message", ids, models, roles)
			}
			if !anthropicProviders && !models["up-primary-mini"] {
				t.Errorf("models %v, want the first answer's", models)
			}
			if acc.Choices[0].FinishReason != "stop" || acc.Usage.CompletionTokens < resumeChunks {
				t.Errorf("finish %q, usage %+v", acc.Choices[0].FinishReason, acc.Usage)
			}
			wantStrings(t, "rows", g.resumeRows(t, id), "failed/stream_interrupted/-", "success//0")
			req, _ := g.ledger(t, id)
			if req.Status != "success" || req.TotalTokens == nil || *req.TotalTokens != acc.Usage.TotalTokens {
				t.Errorf("request %s, total tokens %v; the client saw %d", req.Status, req.TotalTokens, acc.Usage.TotalTokens)
			}
			if anthropicProviders {
				return
			}
			if prefill := g.Backup.LastRequest().Body; !strings.Contains(string(prefill), `{"role":"assistant","content":"`+wholeAnswer(resumeCutAt)+`"}]`) {
				t.Errorf("backup got %s, want the relayed text as a trailing assistant message", prefill)
			}
			code, body := g.get(t, "/admin/requests/"+id, true)
			var tl struct {
				Candidates []struct {
					ResumedFrom *int `json:"resumed_from"`
				} `json:"candidates"`
			}
			if err := json.Unmarshal(body, &tl); code != 200 || err != nil || len(tl.Candidates) != 2 ||
				tl.Candidates[0].ResumedFrom != nil || tl.Candidates[1].ResumedFrom == nil || *tl.Candidates[1].ResumedFrom != 0 {
				t.Errorf("GET /admin/requests/%s: %d %s", id, code, body)
			}
		})
	}
}

// TestResumeAnthropicClient: the same for the official Anthropic client,
// on anthropic providers (native prefill) and translated from openai ones
// (prefill: true): one message, its id, the blocks' indexes consistent (the
// SDK checks them), usage summed.
func TestResumeAnthropicClient(t *testing.T) {
	for _, anthropicProviders := range []bool{true, false} {
		t.Run(fmt.Sprintf("anthropic_providers=%v", anthropicProviders), func(t *testing.T) {
			g := startResume(t, anthropicProviders, mockupstream.Behavior{})
			var id string
			c := anthropic.NewClient(aoption.WithBaseURL(g.URL), aoption.WithAPIKey("client-SENTINEL-token"),
				aoption.WithMaxRetries(0), aoption.WithHTTPClient(g.client),
				aoption.WithMiddleware(func(r *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
					resp, err := next(r)
					if resp != nil {
						id = resp.Header.Get("X-Request-Id")
					}
					return resp, err
				}))
			stream := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
				Model: "gpt-4o-mini", MaxTokens: 100,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			var msg anthropic.Message
			starts := 0
			for stream.Next() {
				ev := stream.Current()
				if ev.Type == "message_start" {
					starts++
				}
				if err := msg.Accumulate(ev); err != nil {
					t.Fatalf("accumulate: %v", err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if len(msg.Content) != 1 || starts != 1 {
				t.Fatalf("%d blocks, %d message_start: want one message of one block (%+v)", len(msg.Content), starts, msg.Content)
			}
			if got, want := msg.Content[0].Text, wholeAnswer(resumeChunks); got != want {
				t.Fatalf("answer\n%q\nwant\n%q", got, want)
			}
			if msg.ID == "" || string(msg.StopReason) != "end_turn" {
				t.Errorf("id %q stop %q", msg.ID, msg.StopReason)
			}
			wantStrings(t, "rows", g.resumeRows(t, id), "failed/stream_interrupted/-", "success//0")
			req, _ := g.ledger(t, id)
			if total := msg.Usage.InputTokens + msg.Usage.OutputTokens; req.TotalTokens == nil || *req.TotalTokens != total {
				t.Errorf("request total tokens %v; the client saw %d (%+v)", req.TotalTokens, total, msg.Usage)
			}
			if !anthropicProviders {
				return
			}
			// The first part's message_start said input N1 and output 1;
			// the continuation's, input N2 and output 60: the client sees
			// the sums.
			p, _ := g.Primary.LastRequestAt("/v1/messages")
			b, _ := g.Backup.LastRequestAt("/v1/messages")
			if in := int64((len(p.Body)+3)/4 + (len(b.Body)+3)/4); msg.Usage.InputTokens != in || msg.Usage.OutputTokens != 1+resumeChunks {
				t.Errorf("usage %+v, want input %d output %d", msg.Usage, in, 1+resumeChunks)
			}
		})
	}
}

// TestResumeRefused: a backup that rejects the prefill, or whose
// continuation repeats what was relayed, is never stitched: the stream
// ends with the error frame as it does without resume.
func TestResumeRefused(t *testing.T) {
	for _, tt := range []struct {
		name    string
		backup  mockupstream.Behavior
		wantRow string
	}{
		{"rejected", mockupstream.Behavior{RejectPrefill: true}, "failed/upstream_http_error/0"},
		{"repeated", mockupstream.Behavior{RepeatOnPrefill: true}, "failed/upstream_protocol_error/0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := startResume(t, false, tt.backup)
			resp, body, _ := g.postRaw(t, chatBody(true))
			id := resp.Header.Get("X-Request-Id")
			data := sseData(body)
			if len(data) == 0 || !strings.Contains(data[len(data)-1], `"code":"stream_interrupted"`) {
				t.Fatalf("stream ends with %q, want the error frame", data[max(0, len(data)-1):])
			}
			var text strings.Builder
			for _, d := range data {
				var c struct {
					Choices []struct {
						Delta struct {
							Content string `json:"content"`
						} `json:"delta"`
					} `json:"choices"`
				}
				if json.Unmarshal([]byte(d), &c) == nil {
					for _, ch := range c.Choices {
						text.WriteString(ch.Delta.Content)
					}
				}
			}
			if got := text.String(); got != wholeAnswer(resumeCutAt) {
				t.Errorf("client text %q, want only the first part", got)
			}
			if g.Backup.Prefills() != 1 {
				t.Errorf("backup saw %d prefills, want 1", g.Backup.Prefills())
			}
			wantStrings(t, "rows", g.resumeRows(t, id), "failed/stream_interrupted/-", tt.wantRow)
			req, _ := g.ledger(t, id)
			if req.Status != "failed" || req.StatusCode == nil || *req.StatusCode != 502 {
				t.Errorf("request %s %v, want failed 502", req.Status, req.StatusCode)
			}
		})
	}
}

// TestResumeNotATextStream: a stream that relayed a tool call is never
// resumed: the cut ends it with the error frame, no prefill is asked.
func TestResumeNotATextStream(t *testing.T) {
	g := start(t, setup{db: true, routes: resumeRoutes,
		primary: mockupstream.Behavior{Identity: "mock", ResetAfterChunks: 1}, backup: mockupstream.Behavior{Identity: "mock"}})
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"weather?"}],
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
		"tool_choice":"required"}`
	resp, raw, _ := g.postRaw(t, body)
	data := sseData(raw)
	if len(data) < 2 || !strings.Contains(data[len(data)-2], "tool_calls") || !strings.Contains(data[len(data)-1], `"code":"stream_interrupted"`) {
		t.Fatalf("stream %q, want the tool call's head then the error frame", data)
	}
	if n := g.Backup.Prefills(); n != 0 {
		t.Errorf("backup was asked %d prefills, want none", n)
	}
	wantStrings(t, "rows", g.resumeRows(t, resp.Header.Get("X-Request-Id")), "failed/stream_interrupted/-", "unused//-")
}

// TestResumeAdmission: the continuation takes its slots like any attempt:
// with the backup's one slot held by another request past its queue
// budget, the resume fails there (its own row, resumed_from set), the
// stream ends with the error frame, and every gate is back to zero.
func TestResumeAdmission(t *testing.T) {
	routes := strings.Replace(resumeRoutes, "    max_concurrency: 8\n    prefill: true\n",
		"    max_concurrency: 1\n    queue_budget: 100ms\n    prefill: true\n", 1) +
		"  - name: backup-only\n    candidates:\n      - { provider: backup }\n"
	g := start(t, setup{db: true, routes: routes,
		primary: mockupstream.Behavior{Identity: "mock", Chunks: resumeChunks, ResetAfterChunks: resumeCutAt},
		backup:  mockupstream.Behavior{Identity: "mock", Chunks: resumeChunks, Latency: 10 * time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan struct{})
	go func() {
		defer close(held)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"backup-only","messages":[{"role":"user","content":"hi"}]}`))
		if resp, err := g.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	eventually(t, 5*time.Second, "the backup's slot held", func() (bool, string) {
		st := g.Backup.Stats()
		return st.InFlight == 1, fmt.Sprint(st)
	})
	resp, raw, _ := g.postRaw(t, chatBody(true))
	cancel()
	<-held
	data := sseData(raw)
	if len(data) == 0 || !strings.Contains(data[len(data)-1], `"code":"stream_interrupted"`) {
		t.Fatalf("stream ends with %q, want the error frame", data[max(0, len(data)-1):])
	}
	wantStrings(t, "rows", g.resumeRows(t, resp.Header.Get("X-Request-Id")),
		"failed/stream_interrupted/-", "failed/gateway_admission_timeout/0")
	g.assertIdle(t)
}

// TestResumeAfterTotalTimeout: a stream cut by its provider's
// timeouts.total is continued, and the continuation's writes are bounded
// by its own attempt's end, not the cut one's.
func TestResumeAfterTotalTimeout(t *testing.T) {
	routes := strings.Replace(resumeRoutes, "    max_concurrency: 8\n  - name: backup",
		"    max_concurrency: 8\n    timeouts: { total: 400ms }\n  - name: backup", 1)
	const chunks = 100
	g := start(t, setup{db: true, routes: routes,
		primary: mockupstream.Behavior{Identity: "mock", Chunks: chunks, ChunkInterval: 10 * time.Millisecond},
		backup:  mockupstream.Behavior{Identity: "mock", Chunks: chunks, ChunkInterval: 10 * time.Millisecond}})
	resp, raw, err := g.postRaw(t, chatBody(true))
	if err != nil {
		t.Logf("rows %v, stream tail %q", g.resumeRows(t, resp.Header.Get("X-Request-Id")), raw[max(0, len(raw)-300):])
		t.Fatalf("read: %v", err)
	}
	var text strings.Builder
	data := sseData(raw)
	for _, d := range data {
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(d), &c) == nil {
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
	}
	if got := text.String(); got != wholeAnswer(chunks) || data[len(data)-1] != "[DONE]" {
		t.Fatalf("answer %q (last event %q), want the whole answer and [DONE]", got, data[len(data)-1])
	}
	wantStrings(t, "rows", g.resumeRows(t, resp.Header.Get("X-Request-Id")), "failed/stream_interrupted/-", "success//0")
}
