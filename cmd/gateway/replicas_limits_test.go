package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

const limitsToken = "client-limits-SENTINEL-token"

// TestClientLimitsAcrossReplicas: a client's limits from the routes file
// hold across two replicas sharing Redis: its requests and tokens per
// minute (429 rate_limit_exceeded past them, with Retry-After and OpenAI's
// x-ratelimit-* headers on every answer) and its concurrency.
func TestClientLimitsAcrossReplicas(t *testing.T) {
	t.Parallel()
	t.Run("requests_per_minute", func(t *testing.T) {
		t.Parallel()
		_, url := redisDB(t, 12)
		mock := newPeakMock(t, mockupstream.Behavior{Identity: "p"})
		rs := startReplicas(t, 2, writeReplicaRoutes(t, providerRoutes(mock.url, "max_concurrency: 4"),
			replicaClient{name: "app", token: limitsToken, limits: "requests_per_minute: 5"}), url)
		for i := range 10 {
			r := rs[i%2]
			resp, body, err := replicaChat(context.Background(), r, limitsToken, "m")
			if err != nil {
				t.Fatal(err)
			}
			h := resp.Header
			if h.Get("X-Ratelimit-Limit-Requests") != "5" || h.Get("X-Ratelimit-Reset-Requests") == "" {
				t.Errorf("request %d on %s: x-ratelimit-limit-requests %q, reset %q, want 5 and a duration", i, r.id,
					h.Get("X-Ratelimit-Limit-Requests"), h.Get("X-Ratelimit-Reset-Requests"))
			}
			if h.Get("X-Ratelimit-Limit-Tokens") != "" {
				t.Errorf("request %d: x-ratelimit-limit-tokens %q for a client without a token limit", i, h.Get("X-Ratelimit-Limit-Tokens"))
			}
			if i < 5 {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d on %s: %d %s, want 200 (within 5 per minute)", i, r.id, resp.StatusCode, body)
				}
				if got, want := h.Get("X-Ratelimit-Remaining-Requests"), strconv.Itoa(4-i); got != want {
					t.Errorf("request %d on %s: x-ratelimit-remaining-requests %q, want %s", i, r.id, got, want)
				}
				continue
			}
			rateLimited(t, fmt.Sprintf("request %d on %s", i, r.id), resp, body)
			if got := h.Get("X-Ratelimit-Remaining-Requests"); got != "0" {
				t.Errorf("request %d: x-ratelimit-remaining-requests %q, want 0", i, got)
			}
		}
		if got := mock.served.Load(); got != 5 {
			t.Errorf("the provider served %d requests, want 5", got)
		}
	})

	// Streamed too: the last bytes of a stream reach the client before its
	// handler returns, and the next request must still see its tokens.
	for _, tc := range []struct {
		name   string
		db     int
		stream bool
	}{{"tokens_per_minute", 13, false}, {"tokens_per_minute streamed", 15, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tokensPerMinute(t, tc.db, tc.stream)
		})
	}

	t.Run("max_concurrency", func(t *testing.T) {
		t.Parallel()
		_, url := redisDB(t, 14)
		slow := newPeakMock(t, mockupstream.Behavior{Identity: "slow", Latency: 300 * time.Millisecond})
		slower := newPeakMock(t, mockupstream.Behavior{Identity: "slower", Latency: 1500 * time.Millisecond})
		routes := `
providers:
  - { name: slow, base_url: "` + slow.url + `/v1", api_keys: ["sk-replica"], max_concurrency: 10, queue_budget: 30s }
  - { name: slower, base_url: "` + slower.url + `/v1", api_keys: ["sk-replica"], max_concurrency: 10, queue_budget: 200ms }
models:
  - { name: waits, candidates: [{ provider: slow }] }
  - { name: refused, candidates: [{ provider: slower }] }
`
		rs := startReplicas(t, 2, writeReplicaRoutes(t, routes,
			replicaClient{name: "app", token: limitsToken, limits: "max_concurrency: 2"}), url)

		// Eight at once, four on each replica: two run, the others wait
		// within the queue budget, and every one is served.
		codes := concurrentChats(t, rs, 8, "waits")
		for i, c := range codes {
			if c.code != http.StatusOK {
				t.Errorf("request %d: %d %s, want 200 after waiting its turn", i, c.code, c.body)
			}
		}
		if p := slow.peak.Load(); p != 2 {
			t.Errorf("the provider saw %d of the client's requests at once, want its max_concurrency 2", p)
		}

		// With a queue budget shorter than a request, the two beyond the
		// client's limit are refused as a rate limit.
		codes = concurrentChats(t, rs, 4, "refused")
		var ok, limited int
		for _, c := range codes {
			switch {
			case c.code == http.StatusOK:
				ok++
			case c.code == http.StatusTooManyRequests && jsonField(t, []byte(c.body), "error.code") == "rate_limit_exceeded":
				limited++
			default:
				t.Errorf("request: %d %s, want 200 or 429 rate_limit_exceeded", c.code, c.body)
			}
		}
		if ok != 2 || limited != 2 {
			t.Errorf("%d served and %d refused with 429 rate_limit_exceeded, want 2 and 2", ok, limited)
		}
		if p := slower.peak.Load(); p > 2 {
			t.Errorf("the provider saw %d of the client's requests at once, want at most 2", p)
		}
		for _, r := range rs {
			r.gatesIdle(t)
		}
	})

	t.Run("bad values refused at load", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ field, value string }{
			{"requests_per_minute", "-1"},
			{"requests_per_minute", "0"},
			{"requests_per_minute", "1.5"},
			{"tokens_per_minute", "0"},
			{"tokens_per_minute", "-100"},
			{"tokens_per_minute", "lots"},
			{"max_concurrency", "0"},
			{"max_concurrency", "-2"},
			{"max_concurrency", "2.5"},
		} {
			routes := writeReplicaRoutes(t, providerRoutes("http://127.0.0.1:9", "max_concurrency: 4"),
				replicaClient{name: "ok", token: "t0"},
				replicaClient{name: "app", token: "t1", limits: tc.field + ": " + tc.value})
			cmd := exec.Command(gatewayBinary(t), "check-config")
			cmd.Env = append(os.Environ(), "GATEWAY_CONFIG="+routes, "GATEWAY_DATABASE_URL=", "DATABASE_URL=")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if want := "clients[1]." + tc.field; err == nil || !strings.Contains(stderr.String(), want) {
				t.Errorf("%s: %s: exit %v, stderr %q: want a failure naming %s", tc.field, tc.value, err, stderr.String(), want)
			}
		}
	})
}

// tokensPerMinute sends a client with tokens_per_minute 100 requests one
// after another, alternating two replicas: each is served while the tokens
// counted before it are under the limit, and refused once they reach it;
// x-ratelimit-remaining-tokens says what was left when it was admitted.
func tokensPerMinute(t *testing.T, db int, stream bool) {
	const limit = 100
	_, url := redisDB(t, db)
	mock := newPeakMock(t, mockupstream.Behavior{Identity: "p", Usage: true})
	rs := startReplicas(t, 2, writeReplicaRoutes(t, providerRoutes(mock.url, "max_concurrency: 4"),
		replicaClient{name: "app", token: limitsToken, limits: "tokens_per_minute: " + strconv.Itoa(limit)}), url)
	reqBody := `{"model":"m","messages":[{"role":"user","content":"hello"}]}`
	if stream {
		reqBody = `{"model":"m","messages":[{"role":"user","content":"hello"}],"stream":true,"stream_options":{"include_usage":true}}`
	}
	counted, served, refused := 0, 0, 0
	for i := 0; refused < 2 && i < 20; i++ {
		r := rs[i%2]
		post := replicaPost
		if stream {
			post = postUntilDone
		}
		resp, body, err := post(context.Background(), r, limitsToken, reqBody)
		if err != nil {
			t.Fatal(err)
		}
		h := resp.Header
		if h.Get("X-Ratelimit-Limit-Tokens") != strconv.Itoa(limit) || h.Get("X-Ratelimit-Reset-Tokens") == "" {
			t.Errorf("request %d: x-ratelimit-limit-tokens %q, reset %q, want %d and a duration", i,
				h.Get("X-Ratelimit-Limit-Tokens"), h.Get("X-Ratelimit-Reset-Tokens"), limit)
		}
		if got, want := h.Get("X-Ratelimit-Remaining-Tokens"), strconv.Itoa(max(limit-counted, 0)); got != want {
			t.Errorf("request %d on %s after %d tokens: x-ratelimit-remaining-tokens %q, want %s", i, r.id, counted, got, want)
		}
		if counted < limit {
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("request %d on %s after %d of %d tokens: %d %s, want 200", i, r.id, counted, limit, resp.StatusCode, body)
			}
			n := totalTokens(body)
			if n <= 0 {
				t.Fatalf("request %d: no usage in %s", i, body)
			}
			counted += n
			served++
			continue
		}
		rateLimited(t, fmt.Sprintf("request %d on %s after %d of %d tokens", i, r.id, counted, limit), resp, body)
		if msg, _ := jsonField(t, body, "error.message").(string); !strings.Contains(msg, "tokens") {
			t.Errorf("request %d: message %q does not say the tokens ran out", i, msg)
		}
		refused++
	}
	t.Logf("%d requests served for %d tokens, then refused", served, counted)
	if refused != 2 || served < 2 {
		t.Fatalf("%d served and %d refused: want several served, then refusals", served, refused)
	}
	if got := mock.served.Load(); got != int64(served) {
		t.Errorf("the provider served %d requests, want %d", got, served)
	}
}

// postUntilDone is replicaPost for a stream read as OpenAI's SDKs read it:
// up to data: [DONE], and no further, so the next request may start before
// the gateway's handler has returned.
func postUntilDone(ctx context.Context, r *replica, token, body string) (*http.Response, []byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b, err
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if sc.Text() == "data: [DONE]" {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, resp.Body); resp.Body.Close() }()
	return resp, out.Bytes(), sc.Err()
}

// totalTokens is usage.total_tokens of a chat completion, or of the usage
// event of a stream; 0 when there is none.
func totalTokens(body []byte) int {
	var v struct {
		Usage *struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(body, &v) == nil && v.Usage != nil {
		return v.Usage.TotalTokens
	}
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if ok && json.Unmarshal([]byte(data), &v) == nil && v.Usage != nil {
			return v.Usage.TotalTokens
		}
	}
	return 0
}

// rateLimited fails unless resp is OpenAI's 429 for a client over its rate,
// with a Retry-After within the minute's window.
func rateLimited(t *testing.T, what string, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests || jsonField(t, body, "error.code") != "rate_limit_exceeded" ||
		jsonField(t, body, "error.type") == nil {
		t.Fatalf("%s: %d %s, want 429 rate_limit_exceeded", what, resp.StatusCode, body)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 60 {
		t.Errorf("%s: Retry-After %q, want whole seconds within the minute's window", what, resp.Header.Get("Retry-After"))
	}
}

type chatResult struct {
	code int
	body string
}

// concurrentChats sends n requests at once, alternating replicas, as the
// limited client.
func concurrentChats(t *testing.T, rs []*replica, n int, model string) []chatResult {
	t.Helper()
	out := make([]chatResult, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			resp, body, err := replicaChat(context.Background(), rs[i%len(rs)], limitsToken, model)
			if err != nil {
				out[i] = chatResult{body: err.Error()}
				return
			}
			out[i] = chatResult{code: resp.StatusCode, body: string(body)}
		})
	}
	wg.Wait()
	return out
}
