package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
)

// chromiumPath is Debian's chromium, which drives the console test. CI
// installs it (.ci/run); a developer machine without it skips the test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	const path = "/usr/bin/chromium"
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (%v); CI needs it: apt-get install -y chromium", path, err)
		}
		t.Skipf("%s is missing; install it with: apt-get install -y chromium", path)
	}
	return path
}

// artifactDir is where the console test leaves its screenshots:
// artifacts/console at the repository root (ignored by git).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "artifacts", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConsoleOffWithoutAdminToken: without GATEWAY_ADMIN_TOKEN there is no
// console, as there is no admin API.
func TestConsoleOffWithoutAdminToken(t *testing.T) {
	p := startGateway(t, "GATEWAY_CONFIG="+writeRoutes(t, newMock(t)), "TEST_PRIMARY_KEY=sk-x", "GATEWAY_ADMIN_TOKEN=")
	for _, path := range []string{"/console/", "/console/app.js", "/admin/health"} {
		if code, _ := get(t, "http://"+p.addr+path); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
}

// TestConsoleInBrowser drives the operator console in headless chromium
// against the real gateway, mock upstreams and Postgres: a request fails
// over (the first candidate answers 500, the second succeeds) and the
// failing provider cools down. The operator signs in (a wrong token first),
// sees the gates and the cooling provider, finds the request in the list by
// its X-Request-Id and opens its timeline: two candidates, failed then
// success. The list refreshes in place (the focused link keeps its focus),
// refreshing stops while the tab is hidden, and a token the gateway refuses
// returns to the sign-in form. Every request the page made went to the
// gateway and nowhere else, and every admin API call carried the bearer token. Screenshots of the three screens are left in
// artifacts/console.
func TestConsoleInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	_, brokenURL := mockServer(t, mockupstream.Behavior{Identity: "broken", Status: http.StatusInternalServerError})
	_, backupURL := mockServer(t, mockupstream.Behavior{Identity: "backup", Chunks: 2})
	g := startFormats(t, `
providers:
  - { name: broken, base_url: "`+brokenURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4,
      health: { failures: 2, cooldown: 5m, max_cooldown: 5m }, retry: { attempts: 0 } }
  - { name: backup, base_url: "`+backupURL+`/v1", api_keys: ["`+fmtProviderKey+`"], max_concurrency: 4 }
models:
  - name: failover-model
    candidates: [{ provider: broken }, { provider: backup, priority: 1 }]
`)
	// Two failovers (broken's retry is off: the console's timeline is
	// checked row by row below): the first is the request the operator
	// looks for; the second is broken's second failure in a row, which
	// cools it.
	var ids []string
	for range 2 {
		resp, body := rawPost(t, g, "/v1/chat/completions", `{"model":"failover-model","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("chat: %d %s", resp.StatusCode, body)
		}
		ids = append(ids, resp.Header.Get("X-Request-Id"))
	}
	id := ids[0]
	tl := g.timeline(t, id)
	if got := tl.candidateStatuses(); got != "broken:failed backup:success" {
		t.Fatalf("candidates on record: %s", got)
	}
	g.timeline(t, ids[1])

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	var mu sync.Mutex
	var requested []string
	var unauthorized []string // admin API calls without a bearer token
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			auth, _ := e.Request.Headers["Authorization"].(string)
			mu.Lock()
			requested = append(requested, e.Request.URL)
			if strings.Contains(e.Request.URL, "/admin/") && !strings.HasPrefix(auth, "Bearer ") {
				unauthorized = append(unauthorized, e.Request.URL)
			}
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	var problems []string // console errors and exceptions: CSP violations show up here
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// The two refused tokens log their 401s; anything else is a fault.
			if (m.IsException() || m.Type == "error") && !strings.Contains(m.Text, "status of 401") {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()

	dir := artifactDir(t)
	do := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	until := func(step, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			t.Fatalf("%s: %v (page: %s)", step, err, eval(`document.querySelector('main').innerText.slice(0, 2000)`))
		}
	}
	screenshot := func(name string) {
		t.Helper()
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Sign in by keyboard: the token field has the focus, Enter submits.
	do("open the console", chromedp.Navigate(g.base+"/console/"), chromedp.WaitVisible(chromedp.ID("token")))
	if got := eval(`document.activeElement.id`); got != "token" {
		t.Fatalf("focus on %q at sign-in, want the token field", got)
	}
	do("a wrong token", chromedp.SendKeys(chromedp.ID("token"), "not-the-token\n"))
	until("the refusal", `document.getElementById('signin-message').textContent.includes('refused')`)
	do("the admin token", chromedp.SendKeys(chromedp.ID("token"), fmtAdminToken+"\n"))

	// Overview: the global gate and a gate per target, broken cooling
	// (highlighted), and the traffic chart with a bar per provider.
	until("the overview", `document.querySelectorAll('#gates tbody tr').length >= 3 &&
		!!document.querySelector('#health tr.cooling[data-provider="broken"][data-state="cooling"]') &&
		!!document.querySelector('#health tr[data-provider="backup"][data-state="healthy"]') &&
		!!document.querySelector('#traffic figure[data-provider="broken"] rect.bar-failed')`)
	if got := eval(`document.querySelector('#health tr[data-provider="broken"]').innerText`); !strings.Contains(got, "cooling") {
		t.Fatalf("broken's health row %q does not say cooling", got)
	}
	if got := eval(`document.querySelector('#gates tbody tr').innerText`); !strings.Contains(got, "/ 256") {
		t.Fatalf("global gate row %q, want its limit 256", got)
	}
	screenshot("overview")

	// Requests: the failover request is listed by its id, and the list
	// refreshes in place: the focused link keeps its focus.
	do("go to requests", chromedp.Click(chromedp.ID("nav-requests")))
	row := fmt.Sprintf(`#requests-table tr[data-id="%s"]`, id)
	until("the failover request in the list", fmt.Sprintf(`!!document.querySelector('%s a')`, row))
	if got := eval(fmt.Sprintf(`document.querySelector('%s').innerText`, row)); !strings.Contains(got, "success") || !strings.Contains(got, "broken → backup") {
		t.Fatalf("list row %q, want success over broken → backup", got)
	}
	// A request that arrives meanwhile is added above the others in place:
	// the focused link keeps its focus.
	do("focus the request's link", chromedp.Focus(chromedp.CSS(row+" a")))
	resp, body := rawPost(t, g, "/v1/chat/completions", `{"model":"failover-model","messages":[{"role":"user","content":"later"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	later := resp.Header.Get("X-Request-Id")
	until("the later request at the top", fmt.Sprintf(`document.querySelector('#requests-table tbody tr').dataset.id === %q`, later))
	if got := eval(`document.activeElement.getAttribute('href') || ''`); got != "#/requests/"+id {
		t.Fatalf("after a refresh the focus is on %q, want the request's link", got)
	}
	do("filter by provider", chromedp.SendKeys(chromedp.ID("f-provider"), "broken\n"))
	until("the filtered list", `location.hash.includes('provider=broken') && document.getElementById('requests-note').textContent.includes('provider broken')`)
	before := eval(`document.body.dataset.refreshes`)
	until("a refresh", fmt.Sprintf(`document.body.dataset.refreshes !== %q`, before))
	if got := eval(`document.getElementById('f-provider').value`); got != "broken" {
		t.Fatalf("the provider filter reads %q after a refresh", got)
	}
	if eval(fmt.Sprintf(`document.querySelector('%s') ? 'listed' : 'missing'`, row)) != "listed" {
		t.Fatalf("the failover request is not in the list filtered by provider broken")
	}
	// The list fits the window: no sideways scroll for an operator at
	// 1280 px (the issue saw it overflow a 1400 px one).
	if got := eval(`(() => { const t = document.getElementById('requests-table'); ` +
		`return t.scrollWidth <= t.parentElement.clientWidth ? 'fits' : ` +
		`'table ' + t.scrollWidth + ' px in ' + t.parentElement.clientWidth + ' px'; })()`); got != "fits" {
		t.Fatalf("the requests table is wider than the window: %s", got)
	}
	screenshot("requests")

	// The request: its timeline has two candidates, failed then success,
	// with the failure's error type as on record.
	do("open the request", chromedp.SendKeys(chromedp.CSS(row+" a"), "\r"))
	until("the timeline", `document.querySelectorAll('#candidates-table tbody tr').length === 2 &&
		document.querySelectorAll('#timeline g.tl-row').length === 2`)
	if got := eval(`[...document.querySelectorAll('#candidates-table tbody tr')].map(r => r.dataset.provider + ':' + r.dataset.status).join(' ')`); got != "broken:failed backup:success" {
		t.Fatalf("candidate rows %q", got)
	}
	if got := eval(`[...document.querySelectorAll('#timeline g.tl-row')].map(g => g.dataset.status).join(' ')`); got != "failed success" {
		t.Fatalf("timeline bars %q", got)
	}
	firstRow := eval(`document.querySelector('#candidates-table tbody tr').innerText`)
	if tl.Candidates[0].ErrorType == nil || !strings.Contains(firstRow, *tl.Candidates[0].ErrorType) || !strings.Contains(firstRow, "500") {
		t.Fatalf("the failed candidate's row %q lacks its status 500 and error type %v", firstRow, tl.Candidates[0].ErrorType)
	}
	if got := eval(`document.querySelector('#timeline svg title').textContent`); !strings.Contains(got, "failed") || !strings.Contains(got, "success") {
		t.Fatalf("the timeline's text alternative %q does not name the statuses", got)
	}
	screenshot("request")

	// A hidden tab stops refreshing; visible again, it refreshes at once.
	eval(`Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});
		document.dispatchEvent(new Event('visibilitychange')); document.body.dataset.refresh`)
	hiddenAt := eval(`document.body.dataset.refreshes`)
	mu.Lock()
	seen := len(requested)
	mu.Unlock()
	time.Sleep(6 * time.Second)
	mu.Lock()
	quiet := requested[seen:]
	mu.Unlock()
	if got := eval(`document.body.dataset.refresh + ' ' + document.body.dataset.refreshes`); got != "hidden "+hiddenAt || len(quiet) > 0 {
		t.Fatalf("hidden tab: state and refreshes %q (want hidden %s), requests %v", got, hiddenAt, quiet)
	}
	eval(`Object.defineProperty(document, 'hidden', {configurable: true, get: () => false});
		document.dispatchEvent(new Event('visibilitychange')); ''`)
	until("a refresh once visible", fmt.Sprintf(`document.body.dataset.refreshes !== %q`, hiddenAt))

	// A token the gateway refuses returns to the sign-in form with a message.
	eval(`sessionStorage.setItem('llmgw-admin-token', 'revoked'); location.hash = '#/overview'; ''`)
	until("back at sign-in", `!document.getElementById('signin').hidden &&
		document.getElementById('signin-message').textContent.includes('401')`)

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("console errors: %s", strings.Join(problems, "\n"))
	}
	if len(unauthorized) > 0 {
		t.Errorf("admin API calls without Authorization: Bearer: %v", unauthorized)
	}
	gateway, _ := url.Parse(g.base)
	admin := 0
	for _, u := range requested {
		p, err := url.Parse(u)
		if err != nil || p.Scheme != "http" || p.Host != gateway.Host {
			t.Errorf("the page requested %s, not from the gateway %s", u, gateway.Host)
		}
		if strings.HasPrefix(p.Path, "/admin/") {
			admin++
		}
	}
	if admin < 5 {
		t.Fatalf("%d admin API calls recorded, want the screens' reads: %v", admin, requested)
	}
	b, _ := json.Marshal(requested)
	t.Logf("%d requests, all to %s: %s", len(requested), gateway.Host, b)
}
