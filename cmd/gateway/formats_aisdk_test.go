package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// TestVercelAISDK runs the Vercel AI SDK's default OpenAI provider
// (`ai` with `@ai-sdk/openai`: openai(model) calls /v1/responses) against
// the real binary, for generateText and streamText, with the primary failing
// so that both calls fail over. The packages come from test/aisdk, installed
// by .ci/run (npm ci); without node or them the test fails under CI and
// otherwise skips naming the install command.
func TestVercelAISDK(t *testing.T) {
	dir, err := filepath.Abs("../../test/aisdk")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "ai"))
	if err != nil || modErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node or test/aisdk/node_modules missing under CI (node: %v, modules: %v)", err, modErr)
		}
		t.Skip("needs Node.js and the AI SDK: apt-get install nodejs npm && (cd test/aisdk && npm ci)")
	}
	_, brokenURL := mockServer(t, mockupstream.Behavior{Identity: "broken", Status: http.StatusInternalServerError})
	backup, backupURL := mockServer(t, mockupstream.Behavior{Identity: "backup", Chunks: 3})
	g := startFormats(t, `
providers:
  - { name: broken, base_url: "`+brokenURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
  - { name: backup, base_url: "`+backupURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
models:
  - name: m
    candidates: [{ provider: broken }, { provider: backup, priority: 1, model: up-m }]
`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.mjs", g.base+"/v1", fmtClientToken, "m")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node check.mjs: %v\n%s\n%s", err, out, stderr)
	}
	type result struct {
		Call         string `json:"call"`
		Text         string `json:"text"`
		Parts        int    `json:"parts"`
		FinishReason string `json:"finishReason"`
		OutputTokens int    `json:"outputTokens"`
	}
	var got []result
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("unreadable line %q: %v", line, err)
		}
		got = append(got, r)
	}
	if len(got) != 2 || got[0].Call != "generateText" || got[1].Call != "streamText" {
		t.Fatalf("results %+v", got)
	}
	for _, r := range got {
		if !strings.Contains(r.Text, "Hello") || r.FinishReason != "stop" || r.OutputTokens <= 0 {
			t.Fatalf("%s: %+v", r.Call, r)
		}
	}
	if got[1].Parts < 2 {
		t.Fatalf("streamText got %d text parts: the answer did not stream", got[1].Parts)
	}
	st, _ := backup.StatsFor("/v1/responses")
	if st.Requests != 2 {
		t.Fatalf("the backup served %d /v1/responses calls, want 2 (one per SDK call, after failover)", st.Requests)
	}
	g.gatesIdle(t)
}
