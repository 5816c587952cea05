package server_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// cacheRecordRoutes: m-oa (priced) has a cache, m-plain (same provider
// and price) none; client web of team search has a budget and rates.
var cacheRecordRoutes = `
providers:
  - name: oa
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
    prices:
      m-oa: { input: 2.5, output: 10 }
%[3]s
  - { name: unused, base_url: "%[2]s/v1", api_keys: ["${BACKUP_KEY}"], max_concurrency: 8 }
models:
  - { name: m-oa, cache: { ttl: 1m }, candidates: [{ provider: oa, model: m-oa }] }
  - { name: m-plain, candidates: [{ provider: oa, model: m-oa }] }
teams:
  - { name: search }
clients:
  - { name: web, key_sha256: "` + cacheWebSHA + `", team: search, requests_per_minute: 100, tokens_per_minute: 100000,
      budget: { usd: 1, per: day } }
`

const cacheWebToken = "sk-cache-web-SENTINEL-61a"

var cacheWebSHA = sha(cacheWebToken)

// cacheRow is the cache's columns of a request row, and its cost.
type cacheRow struct {
	cache, team, client, model, route, crid *string
	cost, saved                             *float64
	status                                  string
	code, candidates                        int32
	firstByte                               *int64
}

// cacheRowOf reads request id's row once it settled.
func (g *gateway) cacheRowOf(t *testing.T, id string) cacheRow {
	t.Helper()
	g.ledger(t, id)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, g.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var r cacheRow
	if err := conn.QueryRow(ctx, `SELECT cache, team, client, model, route, client_request_id, cost_usd::float8,
		saved_usd::float8, status, status_code, candidate_count, first_byte_ms FROM requests WHERE id = $1`, id).
		Scan(&r.cache, &r.team, &r.client, &r.model, &r.route, &r.crid, &r.cost, &r.saved, &r.status, &r.code,
			&r.candidates, &r.firstByte); err != nil {
		t.Fatal(err)
	}
	return r
}

func sp(p *string) string {
	if p == nil {
		return "NULL"
	}
	return *p
}

// TestCacheRecords is issue 33's ledger: a miss's row says miss and costs
// what the provider billed; the repeat, served from the cache, has a row
// of its own (hit, success 200, no candidate rows, cost 0, saved_usd the
// first's cost, the client, team, model and route as usual); a no-store
// request says bypass and a route without a cache NULL. The hits count
// toward the client's requests per minute and nothing else: its tokens
// per minute and its budget do not move. The metrics and the spend
// answer count the hits and what they saved.
func TestCacheRecords(t *testing.T) {
	g := start(t, setup{routes: cacheRecordRoutes, db: true})
	const body = `{"model":"m-oa","messages":[{"role":"user","content":"what is cached?"}]}`
	auth := []string{"Authorization", "Bearer " + cacheWebToken}
	before := g.scrape(t)

	post := func(what, body, want string, hdr ...string) (*http.Response, cacheRow) {
		t.Helper()
		resp, got := g.post(t, body, append(append([]string{}, auth...), hdr...)...)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gateway-Cache") != want {
			t.Fatalf("%s: %d, x-gateway-cache %q: %s; want 200, %q", what, resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), got, want)
		}
		return resp, g.cacheRowOf(t, resp.Header.Get("X-Request-Id"))
	}
	remaining := func(resp *http.Response, kind string) int {
		t.Helper()
		n, err := strconv.Atoi(resp.Header.Get("X-Ratelimit-Remaining-" + kind))
		if err != nil {
			t.Fatalf("x-ratelimit-remaining-%s %q", kind, resp.Header.Get("X-Ratelimit-Remaining-"+kind))
		}
		return n
	}

	missResp, miss := post("miss", body, "miss")
	if sp(miss.cache) != "miss" || miss.cost == nil || *miss.cost <= 0 || miss.saved != nil || miss.candidates != 1 {
		t.Fatalf("miss row: cache %s, cost %s, saved %s, %d candidates; want miss, a cost, NULL, 1",
			sp(miss.cache), fp(miss.cost), fp(miss.saved), miss.candidates)
	}
	paid := *miss.cost
	spentAfterMiss := g.budgetSpent(t, "web")

	hitResp, hit := post("hit", body, "hit", "X-Request-Id", "cr-hit-1")
	id := hitResp.Header.Get("X-Request-Id")
	_, cands := g.ledger(t, id)
	if sp(hit.cache) != "hit" || hit.status != "success" || hit.code != 200 || hit.candidates != 0 || len(cands) != 0 ||
		hit.cost == nil || *hit.cost != 0 || hit.saved == nil || !near(*hit.saved, paid) || hit.firstByte == nil {
		t.Errorf("hit row: cache %s, %s %d, %d candidates (%d rows), cost %s, saved %s, first byte %s; "+
			"want hit, success 200, 0 candidates, cost 0, saved %v, a first byte",
			sp(hit.cache), hit.status, hit.code, hit.candidates, len(cands), fp(hit.cost), fp(hit.saved), ip(hit.firstByte), paid)
	}
	if sp(hit.client) != "web" || sp(hit.team) != "search" || sp(hit.model) != "m-oa" || sp(hit.route) != "chat" || sp(hit.crid) != "cr-hit-1" {
		t.Errorf("hit row: client %s, team %s, model %s, route %s, client request id %s; want web, search, m-oa, chat, cr-hit-1",
			sp(hit.client), sp(hit.team), sp(hit.model), sp(hit.route), sp(hit.crid))
	}
	if g.Primary.Stats().Requests != 1 {
		t.Fatalf("the provider saw %d requests, want 1", g.Primary.Stats().Requests)
	}

	// A second hit: one request more in the client's window, no token
	// more (the first hit's answer saw the miss's tokens, this one the
	// same count), and the budget as the miss left it.
	hit2Resp, _ := post("second hit", body, "hit")
	if r1, r2 := remaining(hitResp, "Requests"), remaining(hit2Resp, "Requests"); r2 != r1-1 {
		t.Errorf("requests remaining %d then %d: a hit must count toward requests_per_minute", r1, r2)
	}
	if t0, t1, t2 := remaining(missResp, "Tokens"), remaining(hitResp, "Tokens"), remaining(hit2Resp, "Tokens"); t1 >= t0 || t2 != t1 {
		t.Errorf("tokens remaining %d (before the miss), %d (after it), %d (after a hit): a hit must not count tokens", t0, t1, t2)
	}
	// The budgets count whole micro-dollars: the miss's 77.5 are 78.
	if spent := g.budgetSpent(t, "web"); spent != spentAfterMiss || math.Abs(spent-paid) > 1e-6 {
		t.Errorf("budget spent %v after two hits, want %v (the miss's %v)", spent, spentAfterMiss, paid)
	}

	if _, bypass := post("no-store", body, "bypass", "Cache-Control", "no-store"); sp(bypass.cache) != "bypass" || bypass.saved != nil {
		t.Errorf("no-store row: cache %s, saved %s; want bypass, NULL", sp(bypass.cache), fp(bypass.saved))
	}
	if _, plain := post("no cache", `{"model":"m-plain","messages":[{"role":"user","content":"hi"}]}`, ""); plain.cache != nil {
		t.Errorf("a route without a cache: row cache %s, want NULL", sp(plain.cache))
	}

	delta(t, before, g.scrape(t), map[string]float64{
		`gateway_cache_requests_total{result=miss,route=chat}`:   1,
		`gateway_cache_requests_total{result=hit,route=chat}`:    2,
		`gateway_cache_requests_total{result=bypass,route=chat}`: 1,
		`gateway_cache_store_errors_total{op=get}`:               0,
		`gateway_cache_store_errors_total{op=set}`:               0,
	})
	after := g.scrape(t)
	if got := after[`gateway_cache_saved_usd_total{team=search}`]; !near(got, 2*paid) {
		t.Errorf("gateway_cache_saved_usd_total{team=search} %v, want %v", got, 2*paid)
	}
	if _, ok := after[`gateway_cache_store_errors_total{op=get}`]; !ok {
		t.Error("gateway_cache_store_errors_total{op=get} is not exported at zero")
	}

	code, b := g.get(t, "/admin/spend?by=team&window=1h", true)
	var spend struct {
		Groups []struct {
			Group     string  `json:"group"`
			Requests  int64   `json:"requests"`
			CacheHits int64   `json:"cache_hits"`
			SavedUSD  float64 `json:"saved_usd"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(b, &spend); err != nil || code != http.StatusOK || len(spend.Groups) != 1 {
		t.Fatalf("/admin/spend %d %s", code, b)
	}
	if s := spend.Groups[0]; s.Group != "search" || s.Requests != 5 || s.CacheHits != 2 || !near(s.SavedUSD, 2*paid) {
		t.Errorf("spend by team %+v, want search: 5 requests, 2 cache hits, saved %v", s, 2*paid)
	}
}

// budgetSpent is what GET /admin/budgets says client spent, once no
// reservation is left (a request's settles after its answer).
func (g *gateway) budgetSpent(t *testing.T, client string) float64 {
	t.Helper()
	var spent float64
	eventually(t, 5*time.Second, "client "+client+"'s budget settled", func() (bool, string) {
		code, b := g.get(t, "/admin/budgets", true)
		var list struct {
			Budgets []struct {
				Owner       struct{ Kind, Name string }
				SpentUSD    float64 `json:"spent_usd"`
				ReservedUSD float64 `json:"reserved_usd"`
			} `json:"budgets"`
		}
		if err := json.Unmarshal(b, &list); err != nil || code != http.StatusOK {
			t.Fatalf("/admin/budgets %d %s", code, b)
		}
		for _, s := range list.Budgets {
			if s.Owner.Kind == "client" && s.Owner.Name == client {
				spent = s.SpentUSD
				return s.ReservedUSD == 0, string(b)
			}
		}
		return false, string(b)
	})
	return spent
}

// TestCacheHitTraced: a hit is on its client's trace like any request: its
// row carries the trace id of the traceparent it came with, its server
// span is exported with no attempt span under it (nothing was tried), and
// its access-log line names the trace.
func TestCacheHitTraced(t *testing.T) {
	sink := newHTTPSink(t, false)
	var logBuf syncBuffer
	g := start(t, setup{routes: cachedRoutes, db: true, env: traceEnv(sink), log: &logBuf})
	const missTID, hitTID = "0af7651916cd43dd8448eb211c80319c", "5b8efff798038103d269b633813fc60c"
	for _, tc := range []struct{ tid, want string }{{missTID, "miss"}, {hitTID, "hit"}} {
		resp, body := g.tracedPost(t, tc.tid, chatBody(false))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gateway-Cache") != tc.want {
			t.Fatalf("%s: %d, x-gateway-cache %q: %s", tc.want, resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), body)
		}
		req, cands := g.ledger(t, resp.Header.Get("X-Request-Id"))
		if req.TraceID == nil || *req.TraceID != tc.tid {
			t.Errorf("%s row: trace_id %s, want %s", tc.want, sp(req.TraceID), tc.tid)
		}
		if tc.want == "hit" && len(cands) != 0 {
			t.Errorf("hit: candidate rows %v, want none", cands)
		}
	}
	tr := treeOf(t, sink.trace(t, hitTID, 1))
	if len(tr.attempts) != 0 {
		t.Errorf("the hit's trace has attempt spans %s, want none", names(tr.attempts))
	}
	eventually(t, 5*time.Second, "the hit's access-log line", func() (bool, string) {
		return strings.Contains(logBuf.String(), "trace_id="+hitTID), logBuf.String()
	})
}
