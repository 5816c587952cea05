package server_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/report"
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

// cacheRowOf is request id's row as the admin API shows it, once it
// settled, with its candidates.
func (g *gateway) cacheRowOf(t *testing.T, id string) report.Timeline {
	t.Helper()
	g.ledger(t, id)
	code, b := g.get(t, "/admin/requests/"+id, true)
	var tl report.Timeline
	if err := json.Unmarshal(b, &tl); err != nil || code != http.StatusOK {
		t.Fatalf("/admin/requests/%s: %d %s", id, code, b)
	}
	return tl
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

	post := func(what, body, want string, hdr ...string) (*http.Response, report.TimelineRequest) {
		t.Helper()
		resp, got := g.post(t, body, append(append([]string{}, auth...), hdr...)...)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gateway-Cache") != want {
			t.Fatalf("%s: %d, x-gateway-cache %q: %s; want 200, %q", what, resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), got, want)
		}
		return resp, g.cacheRowOf(t, resp.Header.Get("X-Request-Id")).Request
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
	if sp(miss.Cache) != "miss" || miss.CostUSD == nil || *miss.CostUSD <= 0 || miss.SavedUSD != nil || miss.CandidateCount != 1 {
		t.Fatalf("miss row: cache %s, cost %s, saved %s, %d candidates; want miss, a cost, NULL, 1",
			sp(miss.Cache), fp(miss.CostUSD), fp(miss.SavedUSD), miss.CandidateCount)
	}
	paid := *miss.CostUSD
	spentAfterMiss := g.budgetSpent(t, "web")

	hitResp, _ := g.post(t, body, append(append([]string{}, auth...), "X-Request-Id", "cr-hit-1")...)
	if hitResp.Header.Get("X-Gateway-Cache") != "hit" {
		t.Fatalf("hit: %d, x-gateway-cache %q", hitResp.StatusCode, hitResp.Header.Get("X-Gateway-Cache"))
	}
	tl := g.cacheRowOf(t, hitResp.Header.Get("X-Request-Id"))
	hit := tl.Request
	if sp(hit.Cache) != "hit" || hit.Status != "success" || hit.StatusCode == nil || *hit.StatusCode != 200 || hit.CandidateCount != 0 ||
		len(tl.Candidates) != 0 || hit.CostUSD == nil || *hit.CostUSD != 0 || hit.SavedUSD == nil || !near(*hit.SavedUSD, paid) ||
		hit.FirstByteMS == nil || hit.TotalTokens != nil {
		t.Errorf("hit row: cache %s, %s %v, %d candidates (%d rows), cost %s, saved %s, first byte %s, tokens %s; "+
			"want hit, success 200, 0 candidates, cost 0, saved %v, a first byte, NULL",
			sp(hit.Cache), hit.Status, hit.StatusCode, hit.CandidateCount, len(tl.Candidates), fp(hit.CostUSD), fp(hit.SavedUSD),
			ip(hit.FirstByteMS), ip(hit.TotalTokens), paid)
	}
	if sp(hit.Client) != "web" || sp(hit.Team) != "search" || hit.Model != "m-oa" || hit.Route != "chat" || sp(hit.ClientRequestID) != "cr-hit-1" {
		t.Errorf("hit row: client %s, team %s, model %s, route %s, client request id %s; want web, search, m-oa, chat, cr-hit-1",
			sp(hit.Client), sp(hit.Team), hit.Model, hit.Route, sp(hit.ClientRequestID))
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

	if _, bypass := post("no-store", body, "bypass", "Cache-Control", "no-store"); sp(bypass.Cache) != "bypass" || bypass.SavedUSD != nil {
		t.Errorf("no-store row: cache %s, saved %s; want bypass, NULL", sp(bypass.Cache), fp(bypass.SavedUSD))
	}
	if _, plain := post("no cache", `{"model":"m-plain","messages":[{"role":"user","content":"hi"}]}`, ""); plain.Cache != nil {
		t.Errorf("a route without a cache: row cache %s, want NULL", sp(plain.Cache))
	}

	delta(t, before, g.scrape(t), map[string]float64{
		`gateway_cache_requests_total{result=miss,route=chat}`:   1,
		`gateway_cache_requests_total{result=hit,route=chat}`:    2,
		`gateway_cache_requests_total{result=bypass,route=chat}`: 1,
		`gateway_cache_store_errors_total{op=get}`:               0,
		`gateway_cache_store_errors_total{op=set}`:               0,
		// The hits are requests like any other.
		`gateway_requests_total{code=200,model=m-oa,route=chat,status=success}`: 4,
	})
	after := g.scrape(t)
	if got := after[`gateway_cache_saved_usd_total{team=search}`]; !near(got, 2*paid) {
		t.Errorf("gateway_cache_saved_usd_total{team=search} %v, want %v", got, 2*paid)
	}
	if _, ok := after[`gateway_cache_store_errors_total{op=get}`]; !ok {
		t.Error("gateway_cache_store_errors_total{op=get} is not exported at zero")
	}

	code, b := g.get(t, "/admin/spend?by=team&window=1h", true)
	var spend struct{ Groups []report.SpendRow }
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
