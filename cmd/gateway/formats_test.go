package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/pgtest"
)

// The wire-format tests run the real binary against the mock upstream, with
// records in a real Postgres, and read what happened back through the
// admin timeline and the mock's last-request recording.

const (
	fmtAdminToken  = "admin-SENTINEL-token"
	fmtClientToken = "client-SENTINEL-token"
	fmtProviderKey = "sk-provider-key-1"
)

// fmtGateway is a gateway binary serving a routes file, with records on.
type fmtGateway struct {
	*gatewayProc
	base string // http://addr
}

// startFormats writes routes (with the client key appended) and starts the
// gateway with records in a fresh database and the admin API on.
func startFormats(t *testing.T, routes string) *fmtGateway {
	t.Helper()
	sum := sha256.Sum256([]byte(fmtClientToken))
	routes += "clients:\n  - { name: app, key_sha256: \"" + hex.EncodeToString(sum[:]) + "\" }\n"
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(p, []byte(routes), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "GATEWAY_CONFIG="+p, "GATEWAY_DATABASE_URL="+pgtest.DatabaseURL(t),
		"GATEWAY_ADMIN_TOKEN="+fmtAdminToken, "GATEWAY_SPOOL_DIR="+t.TempDir())
	return &fmtGateway{gatewayProc: g, base: "http://" + g.addr}
}

// mockServer serves a mock upstream on loopback.
func mockServer(t *testing.T, b mockupstream.Behavior) (*mockupstream.Server, string) {
	t.Helper()
	m := mockupstream.New(b)
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return m, ts.URL
}

// timeline is what /admin/requests/{id} returns, the fields these tests read.
type timeline struct {
	Request struct {
		Route            string `json:"route"`
		Status           string `json:"status"`
		StatusCode       *int   `json:"status_code"`
		PromptTokens     *int64 `json:"prompt_tokens"`
		CompletionTokens *int64 `json:"completion_tokens"`
		TotalTokens      *int64 `json:"total_tokens"`
	} `json:"request"`
	Candidates []struct {
		Provider   string  `json:"provider"`
		Status     string  `json:"status"`
		StatusCode *int    `json:"status_code"`
		ErrorType  *string `json:"error_type"`
	} `json:"candidates"`
}

// timeline waits until request id's records are final in Postgres.
func (g *fmtGateway) timeline(t *testing.T, id string) timeline {
	t.Helper()
	var tl timeline
	ok := waitUntil(10*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, g.base+"/admin/requests/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+fmtAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		tl = timeline{}
		if json.NewDecoder(resp.Body).Decode(&tl) != nil || tl.Request.Status == "pending" {
			return false
		}
		for _, c := range tl.Candidates {
			if c.Status == "pending" || c.Status == "streaming" || c.Status == "available" {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("request %s never settled in Postgres: %+v", id, tl)
	}
	return tl
}

// accessRoute waits for request id's access log line and returns its
// route.
func (g *fmtGateway) accessRoute(t *testing.T, id string) string {
	t.Helper()
	var route string
	ok := waitUntil(5*time.Second, func() bool {
		for _, rec := range g.logs.records() {
			if rec["msg"] == "request" && rec["request_id"] == id {
				route, _ = rec["route"].(string)
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no access log line for %s", id)
	}
	return route
}

// candidateStatuses renders a timeline's candidates as "provider:status ...".
func (tl timeline) candidateStatuses() string {
	var s []string
	for _, c := range tl.Candidates {
		s = append(s, c.Provider+":"+c.Status)
	}
	return strings.Join(s, " ")
}

// checkUsage fails unless the request row has positive, consistent usage.
func (tl timeline) checkUsage(t *testing.T) {
	t.Helper()
	r := tl.Request
	if r.PromptTokens == nil || r.CompletionTokens == nil || r.TotalTokens == nil ||
		*r.PromptTokens <= 0 || *r.CompletionTokens <= 0 || *r.TotalTokens != *r.PromptTokens+*r.CompletionTokens {
		t.Fatalf("request usage not recorded: %+v", r)
	}
}

// gatesIdle waits until every admission slot is back.
func (g *fmtGateway) gatesIdle(t *testing.T) {
	t.Helper()
	if !waitUntil(5*time.Second, func() bool { return scrapeSums(t, g.addr)["gateway_admission_active"] == 0 }) {
		t.Fatalf("admission slots still held: %v", scrapeSums(t, g.addr)["gateway_admission_active"])
	}
}

// openAIClientFor is the official OpenAI client pointed at the gateway; it
// records each response's X-Request-Id.
func openAIClientFor(g *fmtGateway, ids *requestIDs) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.base+"/v1/"), option.WithAPIKey(fmtClientToken),
		option.WithMaxRetries(0), option.WithMiddleware(ids.middleware))
}

// requestIDs keeps the X-Request-Id of every response a client got.
type requestIDs struct {
	mu  sync.Mutex
	ids []string
}

func (r *requestIDs) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if resp != nil {
		r.mu.Lock()
		r.ids = append(r.ids, resp.Header.Get("X-Request-Id"))
		r.mu.Unlock()
	}
	return resp, err
}

func (r *requestIDs) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) == 0 {
		return ""
	}
	return r.ids[len(r.ids)-1]
}

// noClientCredentials fails if the client's own token reached a provider.
func noClientCredentials(t *testing.T, h http.Header) {
	t.Helper()
	for k, vv := range h {
		for _, v := range vv {
			if strings.Contains(v, fmtClientToken) {
				t.Fatalf("the client's token reached the provider in %s", k)
			}
		}
	}
}

// rawPost posts body to the gateway with the client key and returns the
// response with its body read.
func rawPost(t *testing.T, g *fmtGateway, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+fmtClientToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// jsonField decodes b and returns the value at the dotted path.
func jsonField(t *testing.T, b []byte, path string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// teeProxy forwards to target and keeps the bytes of the last response
// body, so a test can compare what the provider sent with what the client
// got.
type teeProxy struct {
	target string
	mu     sync.Mutex
	body   bytes.Buffer
}

func (p *teeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vv := range resp.Header {
		w.Header()[k] = vv
	}
	w.WriteHeader(resp.StatusCode)
	p.mu.Lock()
	p.body.Reset()
	p.mu.Unlock()
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.body.Write(buf[:n])
			p.mu.Unlock()
			_, _ = w.Write(buf[:n])
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *teeProxy) last() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.body.Bytes())
}
