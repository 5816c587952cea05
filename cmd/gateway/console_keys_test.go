package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/pgtest"
)

const keysReadToken = "read-SENTINEL-token"

// TestConsoleKeys drives the console's Keys screen in headless chromium
// against the real gateway with Postgres (so API keys are on): the admin
// issues a key in the form (a field error first, shown next to its
// field), reads the secret shown once, and that secret is a working
// client key (GET /v1/models lists only its models, a chat request is
// 200). After a reload the secret is nowhere in the page. Rotating shows a
// new secret once and the key reads "rotating"; revoking asks first
// (cancel leaves it live), then the key reads "revoked" and its secret is
// refused. A write sent with a token that turned read-only shows the
// gateway's 403; signed in with the read token, the screen lists the keys
// (one issued through the API that has expired reads "expired") with no
// create, rotate or revoke control.
func TestConsoleKeys(t *testing.T) {
	chromium := chromiumPath(t)
	_, upURL := mockServer(t, mockupstream.Behavior{Identity: "up"})
	routes := `
providers:
  - { name: up, base_url: "` + upURL + `/v1", api_keys: ["` + fmtProviderKey + `"], max_concurrency: 4 }
models:
  - { name: m-one, candidates: [{ provider: up }] }
  - { name: m-two, candidates: [{ provider: up }] }
  - { name: other, candidates: [{ provider: up }] }
`
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(p, []byte(routes), 0o600); err != nil {
		t.Fatal(err)
	}
	gp := startGateway(t, "GATEWAY_CONFIG="+p, "GATEWAY_DATABASE_URL="+pgtest.DatabaseURL(t),
		"GATEWAY_ADMIN_TOKEN="+fmtAdminToken, "GATEWAY_ADMIN_READ_TOKEN="+keysReadToken, "GATEWAY_SPOOL_DIR="+t.TempDir())
	base := "http://" + gp.addr

	b := newBrowser(t, chromium)
	// The refused create (400) and the read token's write (403) are provoked.
	b.expect("status of 400 (Bad Request)", "status of 403 (Forbidden)")
	b.do("open the console", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("token")))
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), fmtAdminToken+"\n"))
	b.until("the overview", `!!document.querySelector('#nav-keys') && !document.getElementById('nav').hidden`)
	b.do("go to keys", chromedp.Click(chromedp.ID("nav-keys")))
	b.until("the keys screen", `location.hash === '#/keys' && document.querySelector('.view-keys')?.dataset.role === 'admin' &&
		!document.getElementById('key-create-section').hidden && document.getElementById('keys-note').textContent.startsWith('0 keys')`)

	// A budget the API refuses: the message is next to the budget field.
	b.do("fill the form", chromedp.SendKeys(chromedp.ID("k-name"), "search-web"),
		chromedp.SendKeys(chromedp.ID("k-team"), "search"),
		chromedp.SendKeys(chromedp.ID("k-models"), "m-*"),
		chromedp.SetValue(chromedp.ID("k-priority"), "background"),
		chromedp.SendKeys(chromedp.ID("k-max_concurrency"), "3"),
		chromedp.SendKeys(chromedp.ID("k-requests_per_minute"), "600"),
		chromedp.SendKeys(chromedp.ID("k-budget-usd"), "-5"),
		chromedp.SetValue(chromedp.ID("k-budget-per"), "day"),
		chromedp.SetValue(chromedp.ID("k-expires_at"), "2099-01-02T03:04"),
		chromedp.Click(chromedp.ID("k-cost_in_usage")),
		chromedp.Click(chromedp.ID("key-create")))
	b.until("the field error", `!document.getElementById('k-budget-usd-error').hidden`)
	b.has("the field error", `document.getElementById('k-budget-usd-error').textContent + ' ' +
		document.getElementById('k-budget-usd').getAttribute('aria-invalid')`, "400", "budget.usd", "true")
	b.has("no key was issued", `document.getElementById('key-secret').hidden + ' ' + document.getElementById('keys-table').innerText`, "true", "No keys match")

	b.do("fix the budget", chromedp.SetValue(chromedp.ID("k-budget-usd"), "20"), chromedp.Click(chromedp.ID("key-create")))
	b.until("the secret", `!document.getElementById('key-secret').hidden && !!document.getElementById('key-secret-value')`)
	secret := b.eval(`document.getElementById('key-secret-value').textContent`)
	if !strings.HasPrefix(secret, "sk-gw-") || len(secret) != len("sk-gw-")+43 {
		t.Fatalf("the secret shown: %q", secret)
	}
	b.has("the warning", `document.getElementById('key-secret').innerText`, "it will not be shown again")
	b.has("the field error is gone", `String(document.getElementById('k-budget-usd-error').hidden)`, "true")
	b.has("the form is cleared", `document.getElementById('k-name').value === '' ? 'empty' : 'filled'`, "empty")
	b.do("copy", chromedp.Click(chromedp.ID("key-secret-copy")))
	// Headless chromium may refuse the clipboard; then the text is selected.
	b.until("copied or selected", `/Copied|Selected/.test(document.getElementById('key-secret-status').textContent)`)
	if got := b.eval(`document.getElementById('key-secret-status').textContent.startsWith('Selected') ? window.getSelection().toString() : 'copied'`); got != "copied" && got != secret {
		t.Fatalf("the selection %q is not the secret", got)
	}
	row := `#keys-table tr[data-name="search-web"]`
	// The key's budget joins the budgets a moment after the key does.
	b.until("the listed key", `!!document.querySelector('`+row+`[data-state="active"]') &&
		document.querySelector('`+row+` td.budget').textContent.includes('spent')`)
	b.rows("the key's row", "#keys-table tbody tr", 8, []string{
		"search-web search " + secret[:len("sk-gw-")+4] + "…" + secret[len(secret)-4:] +
			" m-* background · 3 concurrent · 600 req/min $20.00 / day · spent $0.00 · left $20.00 2099-01-02 03:04:00 active"})
	b.screenshot("keys")

	// The secret is a client key: /v1/models lists only its models, a chat
	// request with it succeeds, and without it the API is now closed.
	keysChatUntil(t, base, secret, http.StatusOK)
	if models := keysGet(t, base+"/v1/models", secret); models != "m-one m-two" {
		t.Fatalf("/v1/models with the new key: %s", models)
	}
	if code := keysChat(t, base, ""); code != http.StatusUnauthorized {
		t.Fatalf("chat without a key: %d, want 401", code)
	}

	// A reload: the secret is gone from the page, in text, attributes and
	// control values alike.
	b.do("reload", chromedp.Reload())
	b.until("the list again", `!!document.querySelector('`+row+`')`)
	b.has("no secret after the reload", fmt.Sprintf(`(document.documentElement.outerHTML.includes(%q) ||
		[...document.querySelectorAll('input')].some(i => i.value.includes(%[1]q))) ? 'present' : 'absent'`, secret), "absent")
	b.has("no secret panel", `String(document.getElementById('key-secret').hidden)`, "true")

	// Rotate, with the default grace: a new secret, shown once; both work.
	b.do("rotate", chromedp.Click(chromedp.CSS(row+" button.rotate")))
	b.until("the rotate dialog", `document.getElementById('key-rotate').open`)
	b.has("the default grace", `document.getElementById('key-rotate-grace').value`, "24h")
	b.do("confirm the rotation", chromedp.Click(chromedp.ID("key-rotate-ok")))
	b.until("the new secret", `!document.getElementById('key-rotate').open && !!document.getElementById('key-secret-value') &&
		document.getElementById('key-secret-value').textContent !== ''`)
	rotated := b.eval(`document.getElementById('key-secret-value').textContent`)
	if rotated == secret || !strings.HasPrefix(rotated, "sk-gw-") {
		t.Fatalf("the rotated secret: %q (old %q)", rotated, secret)
	}
	b.has("the rotation warning", `document.getElementById('key-secret').innerText`, "it will not be shown again", "The old secret works until")
	b.until("rotating", `!!document.querySelector('`+row+`[data-state="rotating"]')`)
	keysChatUntil(t, base, rotated, http.StatusOK)
	if code := keysChat(t, base, secret); code != http.StatusOK {
		t.Fatalf("chat with the old secret during the grace: %d", code)
	}
	b.do("dismiss the secret", chromedp.Click(chromedp.ID("key-secret-done")))
	b.has("the secret is gone", fmt.Sprintf(`document.documentElement.outerHTML.includes(%q) ? 'present' : 'absent'`, rotated), "absent")

	// Revoke: cancel first (nothing happens), then confirm.
	b.do("revoke", chromedp.Click(chromedp.CSS(row+" button.revoke")))
	b.until("the confirmation", `document.getElementById('key-revoke').open`)
	b.has("the question", `document.getElementById('key-revoke-text').textContent`, "Revoke search-web", "cannot be undone")
	b.has("cancel has the focus", `document.activeElement.id`, "key-revoke-cancel")
	b.screenshot("keys-revoke")
	b.do("cancel", chromedp.Click(chromedp.ID("key-revoke-cancel")))
	b.until("closed", `!document.getElementById('key-revoke').open`)
	if code := keysChat(t, base, rotated); code != http.StatusOK {
		t.Fatalf("chat after a cancelled revocation: %d", code)
	}
	b.do("revoke again", chromedp.Click(chromedp.CSS(row+" button.revoke")))
	b.until("the confirmation again", `document.getElementById('key-revoke').open`)
	b.do("confirm", chromedp.Click(chromedp.ID("key-revoke-ok")))
	b.until("revoked", `!document.getElementById('key-revoke').open && !!document.querySelector('`+row+`[data-state="revoked"]')`)
	b.has("no actions on a revoked key", `String(document.querySelectorAll('`+row+` button').length)`, "0")
	b.has("the state cell", `document.querySelector('`+row+`').children[7].textContent`, "revoked")
	keysChatUntil(t, base, rotated, http.StatusUnauthorized)

	// A token that turned read-only meanwhile (refresh paused, so the
	// screen has not asked again): the write shows the gateway's 403.
	b.do("pause", chromedp.Click(chromedp.ID("pause")))
	b.do("swap the token", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`sessionStorage.setItem('llmgw-admin-token', %q)`, keysReadToken)))
	b.do("try to issue", chromedp.SendKeys(chromedp.ID("k-name"), "sneaky"), chromedp.Click(chromedp.ID("key-create")))
	b.until("the 403", `!document.getElementById('key-create-error').hidden`)
	b.has("the 403 message", `document.getElementById('key-create-error').textContent`, "403", "GATEWAY_ADMIN_READ_TOKEN")

	// A key that expires two seconds from now, issued through the API,
	// reads "expired" once past its expires_at.
	expiring := keysIssue(t, base, `{"name":"short-lived","expires_at":"`+
		time.Now().Add(2*time.Second).UTC().Format(time.RFC3339Nano)+`"}`)
	keysChatUntil(t, base, expiring, http.StatusOK)
	time.Sleep(2 * time.Second)

	// Signed in with the read token: the keys are listed, no write control.
	b.do("sign out", chromedp.Click(chromedp.ID("signout")))
	b.do("sign in to read", chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), keysReadToken+"\n"))
	b.until("the keys screen, read-only", `!!document.querySelector('`+row+`') && document.querySelector('.view-keys').dataset.role === 'read'`)
	b.has("no write control", `[document.getElementById('key-create-section').hidden,
		document.querySelectorAll('#keys-table button').length,
		getComputedStyle(document.querySelector('#keys-table th:last-child')).display].join(' ')`, "true 0 none")
	b.has("the note says why", `document.getElementById('keys-note').textContent`, "read-only token")
	b.screenshot("keys-read")
	b.until("the expired key", `!!document.querySelector('#keys-table tr[data-name="short-lived"][data-state="expired"]')`)
	b.has("the states", `[...document.querySelectorAll('#keys-table tbody tr')].map(r => r.dataset.name + ' ' + r.dataset.state).join(', ')`,
		"short-lived expired, search-web revoked")
	keysChatUntil(t, base, expiring, http.StatusUnauthorized)

	// The revoked filter goes to the address and the list.
	b.do("only the revoked", chromedp.SetValue(chromedp.ID("kf-revoked"), "true"), chromedp.Click(chromedp.CSS(`.view-keys form[role="search"] button[type="submit"]`)))
	b.until("the revoked keys", `location.hash === '#/keys?revoked=true' && document.querySelectorAll('#keys-table tbody tr').length === 1 &&
		!!document.querySelector('#keys-table tr[data-name="search-web"]')`)
	b.check(base)
}

// keysIssue creates a key through the admin API and returns its secret.
func keysIssue(t *testing.T, base, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/admin/keys", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+fmtAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var k struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&k); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /admin/keys %s: %d %v", body, resp.StatusCode, err)
	}
	return k.Key
}

// keysGet lists /v1/models with key: the model ids, space-separated.
func keysGet(t *testing.T, url, key string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, " ")
}

// keysChatUntil waits, up to 5 s, for a chat request with key to get
// want: a key write reaches the gateway's memory a few milliseconds after
// the answer to the write (LISTEN/NOTIFY).
func keysChatUntil(t *testing.T, base, key string, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code := keysChat(t, base, key)
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat with key %.12s…: %d, want %d", key, code, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keysChat sends one chat request with key ("" for none) and returns its status.
func keysChat(t *testing.T, base, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"m-one","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
