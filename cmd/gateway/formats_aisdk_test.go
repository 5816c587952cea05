package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// aisdkInstallHint names the command for what TestVercelAISDK lacks: Node.js
// (and so npm) with the packages, or only the packages.
func aisdkInstallHint(nodeErr, modulesErr error) string {
	switch {
	case nodeErr != nil:
		return "needs Node.js and the AI SDK: apt-get install nodejs npm && (cd test/aisdk && npm ci)"
	case modulesErr != nil:
		return "needs the AI SDK's packages in test/aisdk/node_modules: (cd test/aisdk && npm ci)"
	}
	return ""
}

// TestAISDKInstallHint: the skip message of TestVercelAISDK asks for what
// is missing; with Node.js installed it asks only for npm ci.
func TestAISDKInstallHint(t *testing.T) {
	missing := errors.New("missing")
	for _, tt := range []struct {
		node, modules error
		want, not     string
	}{
		{missing, missing, "apt-get install nodejs npm && (cd test/aisdk && npm ci)", ""},
		{missing, nil, "apt-get install nodejs npm", ""},
		{nil, missing, "(cd test/aisdk && npm ci)", "apt-get"},
	} {
		got := aisdkInstallHint(tt.node, tt.modules)
		if !strings.Contains(got, tt.want) || (tt.not != "" && strings.Contains(got, tt.not)) {
			t.Errorf("node %v, modules %v: %q, want %q without %q", tt.node, tt.modules, got, tt.want, tt.not)
		}
	}
}

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
		t.Skip(aisdkInstallHint(err, modErr))
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
