package api

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/upstream"
)

// outcomes collects what the gateway did with each request: its final
// record (written once the body has reached the client) and any panic. It
// never blocks the handler, so a failing case cannot wedge the next one.
type outcomes struct {
	mu      sync.Mutex
	final   map[uuid.UUID]report.Request
	panics  int
	rows    []report.Candidate // every candidate record, in order
	changed chan struct{}      // cap 1: a wake-up, not a count
}

func newOutcomes() *outcomes {
	return &outcomes{final: map[uuid.UUID]report.Request{}, changed: make(chan struct{}, 1)}
}

func (o *outcomes) update(f func()) {
	o.mu.Lock()
	f()
	o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

func (o *outcomes) RecordRequest(r report.Request) {
	if !r.FinishedAt.IsZero() {
		o.update(func() { o.final[r.ID] = r })
	}
}
func (o *outcomes) RecordCandidate(r report.Candidate) {
	o.mu.Lock()
	o.rows = append(o.rows, r)
	o.mu.Unlock()
}
func (o *outcomes) panicked() { o.update(func() { o.panics++ }) }

func (o *outcomes) panicCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.panics
}

// wait returns the final record of request id, failing the test when the
// gateway panicked since the count was before, or when no record comes.
// Requests run one at a time, so a new panic is this request's.
func (o *outcomes) wait(t *testing.T, id string, before int) report.Request {
	t.Helper()
	uid, err := uuid.Parse(id)
	if err != nil {
		t.Fatalf("X-Request-Id %q: %v", id, err)
	}
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		o.mu.Lock()
		r, ok := o.final[uid]
		panics := o.panics
		o.mu.Unlock()
		switch {
		case panics > before:
			t.Fatal("the gateway panicked on this body")
		case ok:
			return r
		}
		select {
		case <-o.changed:
		case <-timeout.C:
			t.Fatal("no final record within 5s")
		}
	}
}

// bodyUpstream answers every chat call 200 with the body the test set last,
// in two writes when split is set so the gateway reads it in pieces.
type bodyUpstream struct {
	body   atomic.Pointer[[]byte]
	split  atomic.Bool
	stream atomic.Bool // answer as an event stream
}

func (u *bodyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	b := *u.body.Load()
	w.Header().Set("Content-Type", "application/json")
	if u.stream.Load() {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	if !u.split.Load() {
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		_, _ = w.Write(b)
		return
	}
	half := len(b) / 2
	_, _ = w.Write(b[:half])
	http.NewResponseController(w).Flush()
	_, _ = w.Write(b[half:])
}

// startGateway serves one model, "m", from up through a real api.Server on
// loopback, the way clients reach it.
func startGateway(t *testing.T, up http.Handler, o *outcomes) string {
	t.Helper()
	uts := httptest.NewServer(up)
	t.Cleanup(uts.Close)
	routes, err := routes.Parse([]byte(`
providers:
  - name: p
    base_url: `+uts.URL+`/v1
    api_keys: ["${KEY}"]
    max_concurrency: 4
models:
  - name: m
    candidates:
      - { provider: p, model: up-m }
`), func(string) (string, bool) { return "sk-test", true })
	if err != nil {
		t.Fatal(err)
	}
	planner, err := candidates.NewPlanner(routes, candidates.PlannerOptions{
		DefaultFirstByte: 5 * time.Second, DefaultQueueBudget: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*upstream.Client{"p": upstream.NewClient(upstream.ClientOptions{Provider: "p"})}
	t.Cleanup(clients["p"].CloseIdle)
	sched := admission.New(admission.Config{})
	s := New(Options{
		Planner: planner, Admission: sched,
		Runner: &candidates.Runner{Admit: sched, Record: o,
			Upstreams: map[string]candidates.Sender{"p": clients["p"]}},
		Observe:         panicCounter{o: o},
		MaxRequestBytes: 1 << 20, StreamWriteTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	gts := httptest.NewUnstartedServer(s)
	gts.Config.BaseContext = s.BaseContext
	gts.Start()
	t.Cleanup(gts.Close)
	return gts.URL
}

// sizedBody pads suffix into a body of exactly n bytes behind a filler "id"
// field, or keeps suffix's last n bytes when suffix alone is longer.
func sizedBody(n int, suffix string) string {
	const head = `{"id":"`
	pad := n - len(head) - len(`",`) - len(suffix)
	if pad < 0 {
		return suffix[max(0, len(suffix)-n):]
	}
	return head + strings.Repeat("x", pad) + `",` + suffix
}

// TestMalformedBodyRelayed: a provider's 2xx body that is not valid JSON is
// the provider's answer; it reaches the client byte for byte with its status,
// and is recorded as a success without usage. Before the fix the 48-byte body
// (cut after a backslash inside the usage object, an allocator size class)
// panicked while the gateway looked for usage, aborting the client's
// connection.
func TestMalformedBodyRelayed(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	up := &bodyUpstream{}
	o := newOutcomes()
	url := startGateway(t, up, o)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)

	bodies := map[string]string{
		"the reported 48-byte body":   `{"id":"` + strings.Repeat("x", 24) + `","usage":{"a":"\`,
		"the same at 49 bytes":        `{"id":"` + strings.Repeat("x", 25) + `","usage":{"a":"\`,
		"cut inside the content":      `{"id":"x","choices":[{"message":{"content":"hi`,
		"cut inside a unicode escape": `{"id":"x","usage":{"prompt_tokens":1,"a":"\u00`,
		"escaped quote at the end":    `{"id":"x","usage":{"a":"\"`,
		"unterminated usage":          `{"id":"x","usage":{"total_tokens":3`,
		"unbalanced brackets":         `{"id":"x","usage":{"x":]]]]}`,
		"deep nesting":                `{"usage":` + strings.Repeat("[", 5000),
		"huge number":                 `{"usage":{"total_tokens":` + strings.Repeat("9", 3000) + `}}`,
		"BOM and invalid UTF-8":       "\xef\xbb\xbf{\"usage\":{\"total_tokens\":\"\xff\xfe\"}}",
		"NUL bytes":                   "{\"usage\":{\"total_tokens\":1\x00}}\x00",
		"only a backslash":            `\`,
		"empty":                       ``,
		"not JSON at all":             "<html>502 Bad Gateway</html>",
	}
	for _, n := range []int{8, 16, 32, 48, 64, 128, 4096, 4097, 8193, 32<<10 + 1, 64<<10 + 1} {
		bodies[fmt.Sprintf("%d bytes cut after a backslash", n)] = sizedBody(n, `"usage":{"a":"\`)
		bodies[fmt.Sprintf("%d bytes cut after an escaped backslash", n)] = sizedBody(n, `"usage":{"a":"\\`)
		bodies[fmt.Sprintf("%d bytes unterminated usage", n)] = sizedBody(n, `"usage":{"total_tokens":12`)
	}
	for name, body := range bodies {
		for _, split := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/split=%v", name, split), func(t *testing.T) {
				b := []byte(body)
				up.body.Store(&b)
				up.split.Store(split)
				before := o.panicCount()
				id, status, got, err := post(client, url)
				switch {
				case id == "":
					t.Fatalf("no answer: %v (the gateway aborted the connection)", err)
				case err != nil:
					t.Errorf("reading the answer: %v (the gateway aborted the response)", err)
				case status != http.StatusOK || !bytes.Equal(got, b):
					t.Errorf("got %d with %d bytes %.60q, want 200 with the provider's %d bytes %.60q", status, len(got), got, len(b), b)
				}
				r := o.wait(t, id, before)
				if r.Status != report.RequestSuccess || r.HasUsage {
					t.Fatalf("record: status %s, usage %v %d, want success without usage", r.Status, r.HasUsage, r.TotalTokens)
				}
			})
		}
	}

	// A well-formed body still yields its usage: the record check above
	// would see usage if there were any to find.
	b := []byte(`{"id":"x","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	up.body.Store(&b)
	up.split.Store(true)
	before := o.panicCount()
	id, status, got, err := post(client, url)
	if err != nil || status != http.StatusOK || !bytes.Equal(got, b) {
		t.Fatalf("valid body: %d %q %v", status, got, err)
	}
	if r := o.wait(t, id, before); !r.HasUsage || r.TotalTokens != 3 {
		t.Fatalf("valid body recorded usage %v %d, want 3 tokens", r.HasUsage, r.TotalTokens)
	}
}

// post sends a non-streaming chat request and returns the request's ID, the
// status and the whole body as the client received it.
func post(client *http.Client, url string) (string, int, []byte, error) {
	resp, err := client.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return "", 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.Header.Get("X-Request-Id"), resp.StatusCode, b, err
}

// panicCounter is the API observer of these tests: it counts panics (and
// nothing else: the rest is nopObserver's).
type panicCounter struct {
	nopObserver
	o *outcomes
}

func (p panicCounter) Planned(time.Duration) {}
func (p panicCounter) Rejected(string, int)  {}
func (p panicCounter) Panic()                { p.o.panicked() }
func (p panicCounter) BudgetRefused(string)  {}
