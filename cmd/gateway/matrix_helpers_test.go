package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/pgtest"
)

// The failover matrix's harness: for every (setup, case) its own mock
// servers and its own providers and model route in one routes file, so that
// cases share one gateway process but no health state; the client's view
// read off the wire, the attempts off the mocks, and the records off
// Postgres.

// The upstream models of every route: the primary and its fallback.
const (
	primaryModel  = "gpt-4o"
	fallbackModel = "gpt-4o-mini"
)

// Identities the mocks answer with ("Hello from <identity> chunk 1 2 3"),
// the same in both setups so that their outcomes compare as strings.
const (
	primaryIdentity  = "primary"
	fallbackIdentity = "fallback"
)

// answer is the text a mock answers with, all chunks.
func answer(identity string) string { return "Hello from " + identity + " chunk 1 2 3" }

// arrival is one model request as it reached a mock.
type arrival struct {
	model string
	at    time.Time
}

// arrivals records when each model request reached the mocks of one case,
// in order, across its mocks (one in the same-provider setup, two in the
// cross-provider one).
type arrivals struct {
	mu   sync.Mutex
	list []arrival
}

func (a *arrivals) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Model string `json:"model"`
			}
			_ = json.Unmarshal(body, &m)
			a.mu.Lock()
			a.list = append(a.list, arrival{m.Model, time.Now()})
			a.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (a *arrivals) snapshot() []arrival {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]arrival(nil), a.list...)
}

// matrixWorld is one case in one setup ("same", "cross", or "same2": the
// same provider with two keys): its mocks, their URLs and the names
// of its providers and route.
type matrixWorld struct {
	setup    string // "same" or "cross"
	c        *matrixCase
	route    string
	primary  *mockupstream.Server // serves gpt-4o (and, same provider, gpt-4o-mini)
	fallback *mockupstream.Server // serves gpt-4o-mini
	arr      *arrivals
	yaml     string   // its providers' entries
	model    string   // its model route's entry
	models   []string // the upstream model of each candidate index
}

func newWorld(t *testing.T, setup string, c *matrixCase) *matrixWorld {
	t.Helper()
	w := &matrixWorld{setup: setup, c: c, arr: &arrivals{}}
	w.route = setup + "-" + c.slug()
	serve := func(identity string) (*mockupstream.Server, string) {
		m := mockupstream.New(mockupstream.Behavior{Identity: identity})
		ts := httptest.NewServer(w.arr.wrap(m))
		t.Cleanup(ts.Close)
		return m, ts.URL
	}
	keys := 1
	if setup == "same2" {
		keys = 2
	}
	provider := func(name, url string) string {
		timeouts := "first_byte: 300ms, idle: 300ms"
		if c.total != "" {
			timeouts += ", total: " + c.total
		}
		var ks []string
		for k := range keys {
			ks = append(ks, fmt.Sprintf("\"sk-matrix-%s-%d\"", name, k))
		}
		s := fmt.Sprintf("  - { name: %s, base_url: \"%s/v1\", api_keys: [%s], max_concurrency: 4, timeouts: { %s }",
			name, url, strings.Join(ks, ", "), timeouts)
		if c.provider != "" {
			s += ", " + c.provider
		}
		return s + " }\n"
	}
	routeExtra := ""
	if c.route != "" {
		routeExtra = ", " + c.route
	}
	w.models = []string{primaryModel, fallbackModel}
	switch setup {
	case "same2":
		// One candidate per key: gpt-4o on both keys, then gpt-4o-mini on both.
		w.models = []string{primaryModel, primaryModel, fallbackModel, fallbackModel}
		fallthrough
	case "same":
		var url string
		w.primary, url = serve(fallbackIdentity) // gpt-4o gets its own Behavior below
		w.fallback = w.primary
		p := w.route
		w.yaml = provider(p, url)
		w.model = fmt.Sprintf("  - { name: %s%s, candidates: [{ provider: %s, model: %s, priority: 0 }, { provider: %s, model: %s, priority: 1 }] }\n",
			w.route, routeExtra, p, primaryModel, p, fallbackModel)
	case "cross":
		var a, b string
		w.primary, a = serve(primaryIdentity)
		w.fallback, b = serve(fallbackIdentity)
		pa, pb := w.route+"-a", w.route+"-b"
		w.yaml = provider(pa, a) + provider(pb, b)
		w.model = fmt.Sprintf("  - { name: %s%s, candidates: [{ provider: %s, model: %s, priority: 0 }, { provider: %s, model: %s, priority: 1 }] }\n",
			w.route, routeExtra, pa, primaryModel, pb, fallbackModel)
	}
	return w
}

// arm gives the case's faults to the mocks: gpt-4o's always, gpt-4o-mini's
// when the case has one. Called when the case starts, so that a DownFor
// starts then.
func (w *matrixWorld) arm() {
	p := w.c.primary
	p.Identity = primaryIdentity
	w.primary.SetModelBehavior(primaryModel, p)
	if w.c.fallback != nil {
		f := *w.c.fallback
		f.Identity = fallbackIdentity
		w.fallback.SetModelBehavior(fallbackModel, f)
	}
}

// attempts is how many requests each model received.
func (w *matrixWorld) attempts() [2]int {
	return [2]int{int(w.primary.StatsForModel(primaryModel).Requests), int(w.fallback.StatsForModel(fallbackModel).Requests)}
}

// matrixGateway is the gateway binary serving the worlds' routes, with
// records in a fresh Postgres database.
type matrixGateway struct {
	*gatewayProc
	base string
	db   *pgxpool.Pool
}

func startMatrix(t *testing.T, worlds []*matrixWorld) *matrixGateway {
	t.Helper()
	var providers, models strings.Builder
	for _, w := range worlds {
		providers.WriteString(w.yaml)
		models.WriteString(w.model)
	}
	routes := "providers:\n" + providers.String() + "models:\n" + models.String()
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(p, []byte(routes), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.DatabaseURL(t)
	// Cases run side by side in one process: the retry budget (per process)
	// must not turn one case's failover into another's retry_budget skip.
	g := startGateway(t, "GATEWAY_CONFIG="+p, "GATEWAY_DATABASE_URL="+dsn, "GATEWAY_SPOOL_DIR="+t.TempDir(),
		"GATEWAY_RETRY_BUDGET_MIN_PER_SECOND=1000")
	conn, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return &matrixGateway{gatewayProc: g, base: "http://" + g.addr, db: conn}
}

// clientResult is what the client saw.
type clientResult struct {
	status  int
	id      string // X-Request-Id
	text    string // the answer's content (a stream's deltas, concatenated)
	done    bool   // the stream ended with data: [DONE]
	frame   string // an error event in the stream (the gateway's frame), raw
	errCode string // a non-2xx body's error.code
	body    string
	elapsed time.Duration
}

func (r clientResult) String() string {
	return fmt.Sprintf("status=%d text=%q done=%v frame=%v code=%q", r.status, r.text, r.done, r.frame != "", r.errCode)
}

// send makes one chat request to route.
func (g *matrixGateway) send(t *testing.T, route string, stream bool) clientResult {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":%v}`, route, stream)
	c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := c.Post(g.base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("request to %s: %v", route, err)
	}
	raw, _ := io.ReadAll(resp.Body) // a cut stream ends in an aborted connection
	resp.Body.Close()
	res := clientResult{status: resp.StatusCode, id: resp.Header.Get("X-Request-Id"), body: string(raw), elapsed: time.Since(start)}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		res.errCode = e.Error.Code
		return res
	}
	if !stream {
		var v struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(raw, &v); err != nil || len(v.Choices) == 0 {
			t.Fatalf("%s: not a completion: %q", route, raw)
		}
		res.text = v.Choices[0].Message.Content
		return res
	}
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			res.done = true
			continue
		}
		var ev struct {
			Error   json.RawMessage `json:"error"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			res.frame += "malformed:" + data // relayed as the provider sent it
			continue
		}
		if len(ev.Error) > 0 {
			res.frame += data
			continue
		}
		for _, ch := range ev.Choices {
			res.text += ch.Delta.Content
		}
	}
	return res
}

// candRow is one request_candidates row, the columns the matrix compares.
type candRow struct {
	idx, retry  int
	model       string
	status      string
	code        int // 0: NULL
	errType     string
	skip        string
	resumedFrom *int // resumed_from, when the column exists and is set
}

func (r candRow) String() string {
	s := fmt.Sprintf("%d.%d %s %s", r.idx, r.retry, r.model, r.status)
	if r.code != 0 {
		s += fmt.Sprintf(" %d", r.code)
	}
	if r.errType != "" {
		s += " " + r.errType
	}
	if r.skip != "" {
		s += " skip=" + r.skip
	}
	if r.resumedFrom != nil {
		s += fmt.Sprintf(" resumed_from=%d", *r.resumedFrom)
	}
	return s
}

// reqRow is the requests row.
type reqRow struct {
	status  string
	code    int
	errType string
}

func (r reqRow) String() string { return fmt.Sprintf("%s %d %s", r.status, r.code, r.errType) }

var terminalCandidate = map[string]bool{"success": true, "failed": true, "cancelled": true, "unused": true, "skipped": true}

// records waits until request id's rows are final in Postgres and returns
// them, candidates ordered by (candidate_index, retry_index).
func (g *matrixGateway) records(t *testing.T, id string) (reqRow, []candRow) {
	t.Helper()
	var (
		req   reqRow
		cands []candRow
		qerr  error
	)
	ctx := context.Background()
	ok := waitUntil(10*time.Second, func() bool {
		var code *int
		var et *string
		qerr = g.db.QueryRow(ctx, `SELECT status, status_code, error_type FROM requests WHERE id::text = $1`, id).Scan(&req.status, &code, &et)
		if qerr != nil || req.status == "pending" {
			return false
		}
		req.code, req.errType = deref(code), derefS(et)
		// to_jsonb: columns a later migration adds (resumed_from) are read
		// when they exist, without the query failing where they do not.
		rows, err := g.db.Query(ctx, `SELECT to_jsonb(rc) FROM request_candidates rc WHERE request_id::text = $1`, id)
		if err != nil {
			qerr = err
			return false
		}
		cands = cands[:0]
		for rows.Next() {
			var raw []byte
			if qerr = rows.Scan(&raw); qerr != nil {
				rows.Close()
				return false
			}
			var v struct {
				Idx         int     `json:"candidate_index"`
				Retry       int     `json:"retry_index"`
				Model       string  `json:"model"`
				Status      string  `json:"status"`
				Code        *int    `json:"status_code"`
				ErrType     *string `json:"error_type"`
				Skip        *string `json:"skip_reason"`
				ResumedFrom *int    `json:"resumed_from"`
			}
			if qerr = json.Unmarshal(raw, &v); qerr != nil {
				rows.Close()
				return false
			}
			cands = append(cands, candRow{idx: v.Idx, retry: v.Retry, model: v.Model, status: v.Status, code: deref(v.Code),
				errType: derefS(v.ErrType), skip: derefS(v.Skip), resumedFrom: v.ResumedFrom})
		}
		rows.Close()
		for _, c := range cands {
			if !terminalCandidate[c.status] {
				return false
			}
		}
		return len(cands) > 0
	})
	if !ok {
		t.Fatalf("request %s never settled in Postgres (err %v): %v %v", id, qerr, req, cands)
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].idx != cands[j].idx {
			return cands[i].idx < cands[j].idx
		}
		return cands[i].retry < cands[j].retry
	})
	return req, cands
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func derefS(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// outcomes collects each (case, setup)'s outcome for the same-rescue check.
type outcomes struct {
	mu sync.Mutex
	m  map[string]map[string]string // case name -> setup -> outcome
}

func (o *outcomes) put(name, setup, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]map[string]string{}
	}
	if o.m[name] == nil {
		o.m[name] = map[string]string{}
	}
	o.m[name][setup] = outcome
}

func (o *outcomes) get(name string) map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[name]
}
