package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/pgtest"
)

// spendProviderBody is every answer of the priced provider: 1000 prompt
// and 200 completion tokens, so m-dear (10 and 50 USD per million) costs
// 0.02 and m-cheap (1 and 2) 0.0014.
const spendProviderBody = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` +
	`"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200}}`

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestConsoleSpend drives the console's Spend screen in headless chromium
// against the real gateway and Postgres, on a ledger whose figures are
// known: client web (team search) asks for m-dear twice and m-cheap once,
// client batch (team ads) m-dear once and m-cheap twice; m-dear's first
// candidate answers 500 and fails over. The screen shows the cost by team,
// then client, then model (table, legend and chart), and the two budgets
// with what is left; the request list shows each request's cost, and a
// timeline each attempt's (the failed one not billed).
func TestConsoleSpend(t *testing.T) {
	chromium := chromiumPath(t)
	_, brokenURL := mockServer(t, mockupstream.Behavior{Identity: "broken", Status: http.StatusInternalServerError})
	priced := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, spendProviderBody)
	}))
	t.Cleanup(priced.Close)
	const webKey, batchKey = "sk-web-SENTINEL", "sk-batch-SENTINEL"
	routes := `
providers:
  - name: broken
    base_url: "` + brokenURL + `/v1"
    api_keys: ["` + fmtProviderKey + `"]
    max_concurrency: 4
    retry: { attempts: 0 }
    health: { failures: 100 }
    prices:
      m-dear: { input: 10, output: 50 }
  - name: priced
    base_url: "` + priced.URL + `/v1"
    api_keys: ["` + fmtProviderKey + `"]
    max_concurrency: 4
    prices:
      m-dear: { input: 10, output: 50 }
      m-cheap: { input: 1, output: 2 }
models:
  - name: m-dear
    candidates: [{ provider: broken, model: m-dear }, { provider: priced, model: m-dear, priority: 1 }]
  - { name: m-cheap, candidates: [{ provider: priced, model: m-cheap }] }
  - { name: m-cached, cache: { ttl: 1m }, candidates: [{ provider: priced, model: m-cheap }] }
teams:
  - { name: search, budget: { usd: 1, per: day } }
  - { name: ads }
clients:
  - { name: web, key_sha256: "` + hexSHA(webKey) + `", team: search }
  - { name: batch, key_sha256: "` + hexSHA(batchKey) + `", team: ads, budget: { usd: 0.5, per: total } }
`
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(p, []byte(routes), 0o600); err != nil {
		t.Fatal(err)
	}
	gp := startGateway(t, "GATEWAY_CONFIG="+p, "GATEWAY_DATABASE_URL="+pgtest.DatabaseURL(t),
		"GATEWAY_ADMIN_TOKEN="+fmtAdminToken, "GATEWAY_SPOOL_DIR="+t.TempDir())
	g := &fmtGateway{gatewayProc: gp, base: "http://" + gp.addr}

	// The ledger, each answer's cost as the client saw it.
	ids := map[string][]string{} // "client model" -> request ids
	for _, req := range []struct{ key, client, model, cost string }{
		{webKey, "web", "m-dear", "0.02"}, {webKey, "web", "m-dear", "0.02"}, {webKey, "web", "m-cheap", "0.0014"},
		{batchKey, "batch", "m-dear", "0.02"}, {batchKey, "batch", "m-cheap", "0.0014"}, {batchKey, "batch", "m-cheap", "0.0014"},
	} {
		resp, body := rawPost(t, g, "/v1/chat/completions", `{"model":"`+req.model+`","messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer "+req.key)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gateway-Cost-Usd") != req.cost {
			t.Fatalf("%s %s: %d, cost %q (want %s): %s", req.client, req.model, resp.StatusCode,
				resp.Header.Get("X-Gateway-Cost-Usd"), req.cost, body)
		}
		id := resp.Header.Get("X-Request-Id")
		ids[req.client+" "+req.model] = append(ids[req.client+" "+req.model], id)
	}
	for _, list := range ids {
		for _, id := range list {
			g.timeline(t, id) // every record settled in Postgres
		}
	}
	dear := ids["web m-dear"][0]
	if got := g.timeline(t, dear).candidateStatuses(); got != "broken:failed priced:success" {
		t.Fatalf("m-dear's candidates on record: %s", got)
	}

	b := newBrowser(t, chromium)
	b.do("open the console", chromedp.Navigate(g.base+"/console/"), chromedp.WaitVisible(chromedp.ID("token")))
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), fmtAdminToken+"\n"))
	b.until("the overview", `!!document.querySelector('#nav-spend') && !document.getElementById('nav').hidden`)

	// By team (the default), over the last 24 hours.
	b.do("go to spend", chromedp.Click(chromedp.ID("nav-spend")))
	b.until("the spend by team", `location.hash === '#/spend' &&
		!!document.querySelector('#spend-table tr[data-group="search"]') &&
		!!document.querySelector('#spend-table tr[data-group="ads"]') &&
		!!document.querySelector('#spend-chart figure[data-by="team"]')`)
	b.rows("spend by team", "#spend-table tbody tr", 0, []string{
		"search 3 3,000 600 0 $0.0414 64% 0 0 $0.00", "ads 3 3,000 600 0 $0.0228 36% 0 0 $0.00"})
	b.has("the spend note", `document.getElementById('spend-note').textContent`, "$0.0642 over 6 requests")
	b.has("the chart's legend", `document.querySelector('#spend-chart .legend').innerText`, "search · $0.0414", "ads · $0.0228")
	b.has("the chart's text alternative", `document.querySelector('#spend-chart svg title').textContent`,
		"search $0.0414 (3 requests)", "ads $0.0228 (3 requests)")
	// All six requests fall in one or two hourly buckets; each team's
	// segments add up to its cost.
	b.has("the chart's bars", `(() => { const sum = {}; for (const r of document.querySelectorAll('#spend-chart rect[data-group]')) {
		const m = r.querySelector('title').textContent.match(/: \$([0-9.]+),/); sum[r.dataset.group] = (sum[r.dataset.group] || 0) + Number(m[1]); }
		return Object.keys(sum).sort().map(k => k + ' ' + sum[k].toFixed(4)).join(', '); })()`, "ads 0.0228, search 0.0414")

	// The budgets: what is left of each.
	b.until("the budgets", `document.querySelectorAll('#budgets-table tbody tr[data-owner]').length === 2`)
	b.rows("budgets", "#budgets-table tbody tr", 6, []string{
		"client batch total $0.50 $0.0228 $0.00 $0.4772 (95%)",
		"team search day $1.00 $0.0414 $0.00 $0.9586 (96%)"})
	b.has("batch's budget never resets", `document.querySelector('#budgets-table tr[data-owner="client:batch"]').lastChild.textContent`, "never (total)")
	// The day's budget resets at the next UTC midnight; the page shows
	// it in the browser's zone, so compare instants.
	midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	b.has("search's budget resets at midnight", `String(new Date(JSON.parse(document.querySelector('#budgets-table tr[data-owner="team:search"]')
		.dataset.resets)).getTime())`, fmt.Sprint(midnight.UnixMilli()))

	// By client, then by model, with the form (keyboard users' path: the
	// choice applies on Show, not on every arrow key in the select).
	b.do("group by client", chromedp.SetValue(chromedp.ID("f-by"), "client"), chromedp.Click(chromedp.CSS(`.view-spend button[type="submit"]`)))
	b.until("the spend by client", `location.hash === '#/spend?by=client&window=24h' &&
		!!document.querySelector('#spend-table tr[data-group="web"]') && !!document.querySelector('#spend-chart figure[data-by="client"]')`)
	b.rows("spend by client", "#spend-table tbody tr", 0, []string{
		"web 3 3,000 600 0 $0.0414 64% 0 0 $0.00", "batch 3 3,000 600 0 $0.0228 36% 0 0 $0.00"})
	b.has("the heading", `document.getElementById('spend-h').textContent`, "Cost by client, last 24 hours")
	b.do("group by model", chromedp.SetValue(chromedp.ID("f-by"), "model"), chromedp.Click(chromedp.CSS(`.view-spend button[type="submit"]`)))
	b.until("the spend by model", `!!document.querySelector('#spend-table tr[data-group="m-dear"]') &&
		!!document.querySelector('#spend-chart figure[data-by="model"]')`)
	b.rows("spend by model", "#spend-table tbody tr", 0, []string{
		"m-dear 3 3,000 600 0 $0.06 93% 0 0 $0.00", "m-cheap 3 3,000 600 0 $0.0042 6.5% 0 0 $0.00"})
	b.screenshot("spend")

	// The request list: each row's cost.
	b.do("go to requests", chromedp.Click(chromedp.ID("nav-requests")))
	row := func(id string) string { return fmt.Sprintf(`#requests-table tr[data-id="%s"]`, id) }
	cheap := ids["batch m-cheap"][0]
	b.until("the requests", fmt.Sprintf(`!!document.querySelector('%s') && !!document.querySelector('%s')`, row(dear), row(cheap)))
	b.has("m-dear's row", fmt.Sprintf(`document.querySelector('%s td.cost').textContent`, row(dear)), "$0.02")
	b.has("m-cheap's row", fmt.Sprintf(`document.querySelector('%s td.cost').textContent`, row(cheap)), "$0.0014")
	b.has("the list fits the window", `(() => { const t = document.getElementById('requests-table');
		return t.scrollWidth <= t.parentElement.clientWidth ? 'fits' : 'table ' + t.scrollWidth + ' px in ' + t.parentElement.clientWidth + ' px'; })()`, "fits")

	// Its timeline: each attempt's cost, the request's in the summary.
	b.do("open m-dear's request", chromedp.Click(chromedp.CSS(row(dear)+" a")))
	b.until("the timeline", `document.querySelectorAll('#candidates-table tbody tr').length === 2`)
	b.has("the attempts' costs", `[...document.querySelectorAll('#candidates-table tbody tr')].map(r =>
		r.dataset.provider + ' ' + r.querySelector('td.cost').textContent).join(', ')`, "broken not billed, priced $0.02")
	b.has("the request's cost", `document.getElementById('request-cost').textContent`, "$0.02")
	b.has("the timeline's text", `document.querySelector('#timeline svg title').textContent`, "not billed", "cost $0.02")

	// The response cache: web asks m-cached twice, the repeat is a hit.
	// Spend counts it (no cost, what it saved), the list and its page say
	// it reached no provider.
	var hit string
	for _, want := range []string{"miss", "hit"} {
		resp, body := rawPost(t, g, "/v1/chat/completions", `{"model":"m-cached","messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer "+webKey)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gateway-Cache") != want {
			t.Fatalf("m-cached: %d, x-gateway-cache %q (want %s): %s", resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), want, body)
		}
		hit = resp.Header.Get("X-Request-Id")
		g.timeline(t, hit)
	}
	b.do("back to spend", chromedp.Click(chromedp.ID("nav-spend")))
	b.until("the hit in the spend", `document.querySelector('#spend-table tr[data-group="search"]')?.children[8]?.textContent === '1'`)
	b.rows("spend by team with a hit", "#spend-table tbody tr", 0, []string{
		"search 5 4,000 800 0 $0.0428 65% 0 1 $0.0014", "ads 3 3,000 600 0 $0.0228 35% 0 0 $0.00"})
	b.has("the spend note", `document.getElementById('spend-note').textContent`, "$0.0656 over 8 requests", "1 cache hit saved $0.0014")
	b.do("go to requests again", chromedp.Click(chromedp.ID("nav-requests")))
	b.until("the hit in the list", fmt.Sprintf(`!!document.querySelector('%s')`, row(hit)))
	b.has("the hit's row", fmt.Sprintf(`document.querySelector('%s').innerText`, row(hit)), "cache hit, saved $0.0014", "$0.00")
	b.has("the list still fits the window", `(() => { const t = document.getElementById('requests-table');
		return t.scrollWidth <= t.parentElement.clientWidth ? 'fits' : 'table ' + t.scrollWidth + ' px in ' + t.parentElement.clientWidth + ' px'; })()`, "fits")
	b.do("open the hit", chromedp.Click(chromedp.CSS(row(hit)+" a")))
	b.until("the hit's page", `!!document.getElementById('cache-hit-note')`)
	b.has("the hit's note", `document.getElementById('cache-hit-note').textContent`, "Served from the response cache", "$0.0014")
	b.has("the hit's summary", `document.querySelector('.summary').innerText`, "hit: served from the cache, saved $0.0014")
	b.has("no attempts", `String(document.querySelectorAll('#candidates-table tbody tr').length)`, "0")
	b.screenshot("cache-hit")
	b.check(g.base)
}

// browser is headless chromium on one tab, with the checks the console
// tests share: every request the page makes is recorded, and console
// errors are collected.
type browser struct {
	t         *testing.T
	ctx       context.Context
	mu        sync.Mutex
	requested []string
	problems  []string
	expected  []string // console errors a test provoked on purpose
}

func newBrowser(t *testing.T, chromium string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{t: t}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			b.mu.Lock()
			b.requested = append(b.requested, e.Request.URL)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == "error" {
				b.mu.Lock()
				if !b.isExpected(m.String()) {
					b.problems = append(b.problems, m.String())
				}
				b.mu.Unlock()
			}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	b.ctx = ctx
	return b
}

// expect lets console errors containing text pass check: the browser
// logs every 4xx answer, and a test may provoke some (a refused write).
func (b *browser) expect(text ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expected = append(b.expected, text...)
}

// isExpected: the caller holds b.mu.
func (b *browser) isExpected(msg string) bool {
	for _, e := range b.expected {
		if strings.Contains(msg, e) {
			return true
		}
	}
	return false
}

func (b *browser) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", step, err)
	}
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (b *browser) until(step, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		b.t.Fatalf("%s: %v (page: %s)", step, err, b.eval(`document.querySelector('main').innerText.slice(0, 2000)`))
	}
}

// has fails unless expr's value contains every want.
func (b *browser) has(what, expr string, want ...string) {
	b.t.Helper()
	got := b.eval(expr)
	for _, w := range want {
		if !strings.Contains(got, w) {
			b.t.Fatalf("%s: %q lacks %q", what, got, w)
		}
	}
}

// rows fails unless the rows selector finds read, in order, as their
// first cells' text (as many as want's rows have, or all of them when
// cols is 0) joined by single spaces.
func (b *browser) rows(what, selector string, cols int, want []string) {
	b.t.Helper()
	got := b.eval(fmt.Sprintf(`[...document.querySelectorAll(%q)].map(r => [...r.children].slice(0, %d || undefined)
		.map(c => c.textContent.trim()).join(' ')).join('\n')`, selector, cols))
	if got != strings.Join(want, "\n") {
		b.t.Fatalf("%s:\n%s\nwant\n%s", what, got, strings.Join(want, "\n"))
	}
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	buf, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(artifactDir(b.t), name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// check fails on any console error not expected and on any request to a
// host other than the gateway's.
func (b *browser) check(base string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		b.t.Errorf("console errors: %s", strings.Join(b.problems, "\n"))
	}
	gateway, _ := url.Parse(base)
	for _, u := range b.requested {
		// The browser's own controls (a date field's calendar icon) load
		// data: images; those never leave the page.
		if strings.HasPrefix(u, "data:") {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || p.Scheme != "http" || p.Host != gateway.Host {
			b.t.Errorf("the page requested %s, not from the gateway %s", u, gateway.Host)
		}
	}
}
