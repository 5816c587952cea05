package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// secondKey is the primary provider's second key in the two-key routes below:
// a literal, so that one provider has two targets without another env var.
const secondKey = "sk-primary2-SENTINEL-77d0"

// hangRoutes: a primary whose first byte may never come (first_byte 300ms,
// three failures cool it for 2s; max_cooldown 2s keeps a failed probe's
// cooldown at 2s so the test waits one cooldown, not a doubled one), a
// backup, and a route to the backup alone to measure it against.
const hangRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
    timeouts: { first_byte: 300ms }
    health: { failures: 3, cooldown: 2s, max_cooldown: 2s }
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
  - name: backup-only
    candidates:
      - { provider: backup, model: up-backup-mini }
`

// twoKeyRoutes: a primary with two keys (two targets of one provider) and a
// backup. %[3]s is the primary's health block.
const twoKeyRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}", "` + secondKey + `"]
    max_concurrency: 8
    health: %[3]s
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
`

// Series the health tests read.
const (
	primCooling     = "gateway_target_health{model=up-primary-mini,provider=primary,state=cooling}"
	primHealthy     = "gateway_target_health{model=up-primary-mini,provider=primary,state=healthy}"
	primProbing     = "gateway_target_health{model=up-primary-mini,provider=primary,state=probing}"
	backHealthy     = "gateway_target_health{model=up-backup-mini,provider=backup,state=healthy}"
	toCooling       = "gateway_health_transitions_total{provider=primary,to=cooling}"
	toProbing       = "gateway_health_transitions_total{provider=primary,to=probing}"
	toHealthy       = "gateway_health_transitions_total{provider=primary,to=healthy}"
	backToCooling   = "gateway_health_transitions_total{provider=backup,to=cooling}"
	backToProbing   = "gateway_health_transitions_total{provider=backup,to=probing}"
	backToHealthy   = "gateway_health_transitions_total{provider=backup,to=healthy}"
	primSkipped     = "gateway_candidate_attempts_total{error_type=,model=gpt-4o-mini,provider=primary,status=skipped}"
	backSkipped     = "gateway_candidate_attempts_total{error_type=,model=gpt-4o-mini,provider=backup,status=skipped}"
	backServed      = "gateway_candidate_attempts_total{error_type=,model=gpt-4o-mini,provider=backup,status=success}"
	backAloneServed = "gateway_candidate_attempts_total{error_type=,model=backup-only,provider=backup,status=success}"
)

// noTransitions is the transition counters a test expects not to move.
var noTransitions = map[string]float64{toCooling: 0, toProbing: 0, toHealthy: 0,
	backToCooling: 0, backToProbing: 0, backToHealthy: 0}

// targetHealth is one object of GET /admin/health.
type targetHealth struct {
	Provider            string     `json:"provider"`
	Target              string     `json:"target"`
	KeyID               string     `json:"key_id"`
	Model               string     `json:"model"`
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	CooldownUntil       *time.Time `json:"cooldown_until"`
	LastErrorType       string     `json:"last_error_type"`
	EWMAFirstByteMS     *float64   `json:"ewma_first_byte_ms"`
}

func (h targetHealth) ewma() string {
	if h.EWMAFirstByteMS == nil {
		return h.Provider + " ewma null"
	}
	return fmt.Sprintf("%s ewma %.1fms", h.Provider, *h.EWMAFirstByteMS)
}

func (h targetHealth) String() string {
	until := "null"
	if h.CooldownUntil != nil {
		until = h.CooldownUntil.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s/%s: %s failures=%d until=%s last=%q", h.Provider, h.KeyID, h.State, h.ConsecutiveFailures, until, h.LastErrorType)
}

// health reads GET /admin/health.
func (g *gateway) health(t *testing.T) []targetHealth {
	t.Helper()
	code, body := g.get(t, "/admin/health", true)
	if code != http.StatusOK {
		t.Fatalf("/admin/health = %d %s", code, body)
	}
	var out []targetHealth
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("/admin/health is not a JSON array of targets: %v\n%s", err, body)
	}
	return out
}

// target returns provider's target whose key is the keyIndex-th of its
// api_keys (key ids are "key<index>-<fingerprint>").
func (g *gateway) target(t *testing.T, provider string, keyIndex int) targetHealth {
	t.Helper()
	all := g.health(t)
	prefix := fmt.Sprintf("key%d-", keyIndex)
	for _, h := range all {
		if h.Provider == provider && strings.HasPrefix(h.KeyID, prefix) {
			return h
		}
	}
	t.Fatalf("no target %s/%s* in /admin/health: %v", provider, prefix, all)
	return targetHealth{}
}

// assertHealthy fails unless the target reads as untouched by any failure.
func assertHealthy(t *testing.T, h targetHealth, when string) {
	t.Helper()
	if h.State != "healthy" || h.ConsecutiveFailures != 0 || h.CooldownUntil != nil || h.LastErrorType != "" {
		t.Errorf("%s: target %v, want healthy with no failure recorded", when, h)
	}
}

// assertRecovered fails unless the target is healthy again; unlike a target
// never touched, it keeps the type of its last error.
func assertRecovered(t *testing.T, h targetHealth, when string) {
	t.Helper()
	if h.State != "healthy" || h.ConsecutiveFailures != 0 || h.CooldownUntil != nil {
		t.Errorf("%s: target %v, want healthy with no failure pending", when, h)
	}
}

// assertCooling fails unless the target cools until a moment within
// [from+d, to+d]: the cooldown began while the request that caused it ran.
func assertCooling(t *testing.T, h targetHealth, from, to time.Time, d time.Duration) {
	t.Helper()
	if h.State != "cooling" || h.CooldownUntil == nil {
		t.Fatalf("target %v, want cooling", h)
	}
	// The JSON time has no monotonic reading: allow for wall-clock rounding.
	const slack = 20 * time.Millisecond
	lo, hi := from.Add(d-slack), to.Add(d+slack)
	if h.CooldownUntil.Before(lo) || h.CooldownUntil.After(hi) {
		t.Fatalf("target %v: cooldown ends %v after the request began, want %v (ended %v after)",
			h, h.CooldownUntil.Sub(from), d, to.Sub(from))
	}
}

// chatResult is what a test keeps of one chat request.
type chatResult struct {
	Status  int
	By      string // X-Mock-Identity: the mock that answered
	ID      string // X-Request-Id
	Start   time.Time
	Elapsed time.Duration
	Err     error
}

func streamBody(model string) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":true}`, model)
}

// chat sends one streaming request and reads it to the end. It reports
// errors instead of failing, so that goroutines may call it.
func (g *gateway) chat(ctx context.Context, model string) chatResult {
	r := chatResult{Start: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(streamBody(model)))
	if err != nil {
		r.Err = err
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		r.Err = err
		return r
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	r.Elapsed = time.Since(r.Start)
	r.Status, r.By, r.ID, r.Err = resp.StatusCode, resp.Header.Get("X-Mock-Identity"), resp.Header.Get("X-Request-Id"), err
	if err == nil && resp.StatusCode == http.StatusOK && !strings.Contains(string(body), "data: [DONE]") {
		r.Err = fmt.Errorf("stream did not end with [DONE]: %q", body)
	}
	return r
}

// mustChat is chat for the test goroutine: it fails unless want answered 200.
func (g *gateway) mustChat(t *testing.T, model, want string) chatResult {
	t.Helper()
	r := g.chat(context.Background(), model)
	if r.Err != nil || r.Status != http.StatusOK || r.By != want {
		t.Fatalf("request to %s: status %d by %q (err %v), want 200 by %s", model, r.Status, r.By, r.Err, want)
	}
	return r
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// healthLines returns the "target health changed" log lines.
func healthLines(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `msg="target health changed"`) {
			out = append(out, line)
		}
	}
	return out
}

// TestHealthHangingPrimary is the outage health exists for: a primary that
// accepts requests and never sends a first byte. After `failures` requests
// paid the first-byte timeout, the primary cools and requests go straight
// to the backup, as fast as the backup alone; when the cooldown ends exactly
// one request probes the primary; once it answers again, traffic returns to
// it within one cooldown. Records, metrics, /admin/health and the log say so.
func TestHealthHangingPrimary(t *testing.T) {
	log := &syncBuffer{}
	g := start(t, setup{db: true, routes: hangRoutes, log: log,
		primary: mockupstream.Behavior{StallAfterHeaders: true}})
	const firstByte, cooldown = 300 * time.Millisecond, 2 * time.Second
	begin := g.scrape(t)
	assertHealthy(t, g.target(t, "primary", 0), "at start")

	// The first three requests each wait out the first-byte timeout.
	var third chatResult
	for i := range 3 {
		third = g.mustChat(t, "gpt-4o-mini", "backup")
		if third.Elapsed < firstByte {
			t.Fatalf("request %d took %v, want the first-byte timeout (%v) paid before the backup", i, third.Elapsed, firstByte)
		}
	}
	if n := g.Primary.Stats().Requests; n != 3 {
		t.Fatalf("primary got %d requests, want 3", n)
	}
	h := g.target(t, "primary", 0)
	assertCooling(t, h, third.Start, third.Start.Add(third.Elapsed), cooldown)
	if h.ConsecutiveFailures != 3 || h.LastErrorType != "stream_first_byte_timeout" || h.EWMAFirstByteMS != nil {
		t.Fatalf("primary %v ewma %v, want 3 failures of stream_first_byte_timeout and no latency sample", h, h.EWMAFirstByteMS)
	}
	cooledUntil := *h.CooldownUntil
	cooled := g.scrape(t)
	delta(t, begin, cooled, map[string]float64{toCooling: 1, toProbing: 0, toHealthy: 0,
		backToCooling: 0, backToProbing: 0, backToHealthy: 0})
	delta(t, map[string]float64{}, cooled, map[string]float64{primCooling: 1, primHealthy: 0, primProbing: 0, backHealthy: 1})
	if lines := healthLines(log.String()); len(lines) != 1 ||
		!strings.Contains(lines[0], "provider=primary") || !strings.Contains(lines[0], "state=cooling") ||
		!strings.Contains(lines[0], "from=healthy") || !strings.Contains(lines[0], "reason=failures") {
		t.Fatalf("health log lines %q, want one primary healthy->cooling for failures", lines)
	}

	// The next 100 requests skip the primary. Each is interleaved with a
	// request to the backup alone, so both sets meet the same machine load.
	var cooledLat, aloneLat []time.Duration
	var ids []string
	for i := range 100 {
		if time.Now().After(cooledUntil) {
			// Not a gateway bug: the phase must fit in the cooldown to mean anything.
			t.Fatalf("%d requests took longer than the %v cooldown; the machine is too slow for this test", 2*i, cooldown)
		}
		r := g.mustChat(t, "gpt-4o-mini", "backup")
		if r.Elapsed >= firstByte {
			t.Fatalf("request %d through the cooled route took %v: it waited on the primary", i, r.Elapsed)
		}
		cooledLat, ids = append(cooledLat, r.Elapsed), append(ids, r.ID)
		aloneLat = append(aloneLat, g.mustChat(t, "backup-only", "backup").Elapsed)
	}
	if n := g.Primary.Stats().Requests; n != 3 {
		t.Fatalf("primary got %d requests while cooling, want none after the first 3", n-3)
	}
	p50c, p95c, maxc := percentile(cooledLat, 0.5), percentile(cooledLat, 0.95), slices.Max(cooledLat)
	p50a, p95a := percentile(aloneLat, 0.5), percentile(aloneLat, 0.95)
	t.Logf("cooled route: p50 %v p95 %v max %v; backup alone: p50 %v p95 %v", p50c, p95c, maxc, p50a, p95a)
	// Generous bounds: on a loaded machine the tail of 100 loopback requests
	// is noisy; a route that waited on the primary would be 300ms slower.
	if p50c > 2*p50a+5*time.Millisecond || p95c > 2*p95a+25*time.Millisecond {
		t.Errorf("cooled route p50 %v p95 %v, backup alone p50 %v p95 %v: want within 2x plus a few ms", p50c, p95c, p50a, p95a)
	}
	skipped := g.scrape(t)
	delta(t, cooled, skipped, map[string]float64{primSkipped: 100, backServed: 100, backAloneServed: 100})
	delta(t, cooled, skipped, noTransitions)
	for _, id := range []string{ids[0], ids[50], ids[99]} {
		_, rows := g.ledger(t, id)
		wantRows(t, rows, "skipped/0/(primary)", "success/200/(backup)")
		if rows[0].SkipReason != "cooling_down" {
			t.Fatalf("primary row of %s: skip_reason %q, want cooling_down", id, rows[0].SkipReason)
		}
	}

	// The cooldown passes (real time: that wait is the scenario). Reading
	// /admin/health is enough to move the target to probing.
	eventually(t, cooldown+3*time.Second, "primary probing after its cooldown", func() (bool, string) {
		h := g.target(t, "primary", 0)
		return h.State == "probing", h.String()
	})
	if now := time.Now(); now.Before(cooledUntil.Add(-20 * time.Millisecond)) {
		t.Fatalf("primary probing at %v, %v before its cooldown ended", now, cooledUntil.Sub(now))
	}

	// Exactly one request probes. While it waits on the hanging primary,
	// other requests skip it and are served by the backup at once.
	probeDone := make(chan chatResult, 1)
	go func() { probeDone <- g.chat(context.Background(), "gpt-4o-mini") }()
	eventually(t, 3*time.Second, "the probe at the primary", func() (bool, string) {
		n := g.Primary.Stats().Requests
		return n == 4, fmt.Sprintf("%d requests after the first 3", n-3)
	})
	var during []string
	for range 10 {
		r := g.mustChat(t, "gpt-4o-mini", "backup")
		if r.Elapsed >= firstByte {
			t.Fatalf("a request took %v while the probe was out: it waited on the primary", r.Elapsed)
		}
		during = append(during, r.ID)
	}
	probe := <-probeDone
	if probe.Err != nil || probe.Status != http.StatusOK || probe.By != "backup" || probe.Elapsed < firstByte {
		t.Fatalf("probe request: %+v, want 200 by backup after the first-byte timeout", probe)
	}
	if n := g.Primary.Stats().Requests; n != 4 {
		t.Fatalf("primary got %d requests after its cooldown, want exactly 1 probe", n-3)
	}
	_, rows := g.ledger(t, probe.ID)
	wantRows(t, rows, "failed/504/stream_first_byte_timeout(primary)", "success/200/(backup)")
	_, rows = g.ledger(t, during[0])
	wantRows(t, rows, "skipped/0/(primary)", "success/200/(backup)")
	h = g.target(t, "primary", 0)
	assertCooling(t, h, probe.Start, probe.Start.Add(probe.Elapsed), cooldown) // capped by max_cooldown
	if h.ConsecutiveFailures != 4 {
		t.Fatalf("primary %v, want 4 consecutive failures after the failed probe", h)
	}
	recooledUntil := *h.CooldownUntil

	// The primary recovers; traffic (one request every 10ms) returns to it
	// within one cooldown, through the next probe.
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary"})
	recovered := time.Now()
	var back chatResult
	eventually(t, cooldown+3*time.Second, "traffic back on the primary", func() (bool, string) {
		back = g.chat(context.Background(), "gpt-4o-mini")
		if back.Err != nil || back.Status != http.StatusOK {
			t.Fatalf("request while the primary recovers: %+v", back)
		}
		return back.By == "primary", "served by " + back.By
	})
	servedAt := back.Start.Add(back.Elapsed)
	if took := servedAt.Sub(recovered); took > cooldown+500*time.Millisecond || servedAt.Before(recooledUntil.Add(-20*time.Millisecond)) {
		t.Fatalf("primary served again %v after it recovered (cooldown ended %v after), want within one cooldown (%v) and not before it ended",
			took, recooledUntil.Sub(recovered), cooldown)
	}
	g.mustChat(t, "gpt-4o-mini", "primary")
	h = g.target(t, "primary", 0)
	assertRecovered(t, h, "primary after recovery")
	if h.EWMAFirstByteMS == nil {
		t.Fatalf("primary %v: no first-byte EWMA after it served", h)
	}

	end := g.scrape(t)
	delta(t, begin, end, map[string]float64{toCooling: 2, toProbing: 2, toHealthy: 1,
		backToCooling: 0, backToProbing: 0, backToHealthy: 0})
	delta(t, map[string]float64{}, end, map[string]float64{primHealthy: 1, primCooling: 0, primProbing: 0, backHealthy: 1})
	want := []string{"state=cooling from=healthy reason=failures", "state=probing from=cooling reason=cooldown_ended",
		"state=cooling from=probing reason=probe_failed", "state=probing from=cooling reason=cooldown_ended",
		"state=healthy from=probing reason=probe_succeeded"}
	lines := healthLines(log.String())
	if len(lines) != len(want) {
		t.Fatalf("health log lines:\n%s\nwant %d", strings.Join(lines, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) || !strings.Contains(lines[i], "provider=primary") || !strings.Contains(lines[i], "key_id=key0-") {
			t.Errorf("health log line %d: %s\nwant primary key0 %s", i, lines[i], w)
		}
	}
}

// TestHealthAdminView: GET /admin/health is one JSON object per target with
// exactly the fields of the contract, values typed as documented, behind the
// admin token.
func TestHealthAdminView(t *testing.T) {
	g := start(t, setup{routes: twoKeyRoutes, primaryExtra: "{ failures: 1, cooldown: 1m }",
		primary: mockupstream.Behavior{Status: 500}})
	g.mustChat(t, "gpt-4o-mini", "backup") // one key fails (model-scoped): it alone cools

	if code, _ := g.get(t, "/admin/health", false); code != http.StatusUnauthorized {
		t.Fatalf("/admin/health without the admin token = %d, want 401", code)
	}
	code, body := g.get(t, "/admin/health", true)
	if code != http.StatusOK {
		t.Fatalf("/admin/health = %d", code)
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("not a JSON array of objects: %s", body)
	}
	if len(raw) != 3 {
		t.Fatalf("%d targets, want 3 (two primary keys, one backup): %s", len(raw), body)
	}
	fields := []string{"provider", "target", "key_id", "model", "state", "consecutive_failures", "cooldown_until", "last_error_type", "ewma_first_byte_ms", "probe_in_flight"}
	for _, o := range raw {
		var keys []string
		for k := range o {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := slices.Sorted(slices.Values(fields))
		if !slices.Equal(keys, want) {
			t.Fatalf("target fields %v, want %v", keys, want)
		}
	}
	all := g.health(t)
	cooling := 0
	for _, h := range all {
		switch h.Provider {
		case "primary":
			switch {
			case h.State == "cooling":
				cooling++
				if h.ConsecutiveFailures != 1 || h.LastErrorType != "upstream_http_error" || h.CooldownUntil == nil || h.EWMAFirstByteMS != nil {
					t.Errorf("primary target %v, want cooling after one 500, no latency sample", h)
				}
			default:
				assertHealthy(t, h, "the primary key skipped for the 500 (model_failed)")
			}
			if h.Model != "up-primary-mini" {
				t.Errorf("primary entry model %q, want the upstream model up-primary-mini", h.Model)
			}
		case "backup":
			if h.EWMAFirstByteMS == nil || *h.EWMAFirstByteMS <= 0 {
				t.Errorf("backup target %v: ewma_first_byte_ms %v, want a positive sample", h, h.EWMAFirstByteMS)
			}
			assertHealthy(t, h, "backup")
		}
		if len(h.Target) != 16 || strings.Contains(h.Target, "SENTINEL") || !strings.HasPrefix(h.KeyID, "key") {
			t.Errorf("target %q key_id %q: want a digest and a key label", h.Target, h.KeyID)
		}
	}
	if cooling != 1 {
		t.Errorf("%d primary entries cooling after one 500, want 1 (the key that answered it)", cooling)
	}
	if strings.Contains(string(body), "SENTINEL") {
		t.Fatalf("/admin/health shows a key: %s", body)
	}
}

// TestHealthRetryAfter: a 429 with Retry-After is the model's (the
// contract's scope): in its request it skips the same model on the other
// key (model_failed) and the backup answers; in health it cools that key's
// model alone for as long as the provider asked, while the other key keeps
// serving the next requests; a 503 with Retry-After cools the model on the
// key that answered it.
func TestHealthRetryAfter(t *testing.T) {
	t.Run("429 cools the key", func(t *testing.T) {
		g := start(t, setup{db: true, routes: twoKeyRoutes, primaryExtra: "{ failures: 3, cooldown: 30s }",
			primary: mockupstream.Behavior{KeyStatus: map[string]int{primaryKey: 429}, RetryAfter: "2"}})
		begin := g.scrape(t)
		// Keys rotate per request: within two requests key0 is tried first.
		var limited chatResult
		for i := 0; g.Primary.Stats().Failed == 0; i++ {
			if i == 2 {
				t.Fatal("key0 not tried in two requests")
			}
			limited = g.chat(context.Background(), "gpt-4o-mini")
			if limited.Err != nil || limited.Status != http.StatusOK {
				t.Fatalf("request %d: %d %v", i, limited.Status, limited.Err)
			}
		}
		if limited.By != "backup" {
			t.Fatalf("the 429's request was answered by %q, want the backup (key1's gpt-4o-mini skipped, model_failed)", limited.By)
		}
		_, rows := g.ledger(t, limited.ID)
		wantRows(t, rows, "failed/429/upstream_http_error(primary)", "skipped/0/(primary)", "success/200/(backup)")
		if rows[1].SkipReason != "model_failed" {
			t.Fatalf("key1's skip reason %q, want model_failed", rows[1].SkipReason)
		}
		assertCooling(t, g.target(t, "primary", 0), limited.Start, limited.Start.Add(limited.Elapsed), 2*time.Second)
		assertHealthy(t, g.target(t, "primary", 1), "the other key")
		cooledUntil := *g.target(t, "primary", 0).CooldownUntil

		// While key0 cools, key1 serves every request and key0 gets none.
		served := g.Primary.Stats().Completed
		var ids []string
		for range 6 {
			ids = append(ids, g.mustChat(t, "gpt-4o-mini", "primary").ID)
		}
		if time.Now().After(cooledUntil) {
			t.Fatal("the cooling phase outlasted the Retry-After; the machine is too slow for this test")
		}
		if st := g.Primary.Stats(); st.Failed != 1 || st.Completed != served+6 {
			t.Fatalf("primary stats %+v, want key0 tried once and key1 serving the 6 requests", st)
		}
		skips := 0
		for _, id := range ids {
			_, rows := g.ledger(t, id)
			for _, row := range rows[:2] {
				switch {
				case strings.HasPrefix(row.KeyID, "key1-") && row.Status == "success":
				case strings.HasPrefix(row.KeyID, "key0-") && row.Status == "skipped" && row.SkipReason == "cooling_down":
					skips++
				case strings.HasPrefix(row.KeyID, "key0-") && row.Status == "unused":
				default:
					t.Fatalf("row %v (key %s, skip %q) while key0 cools", row, row.KeyID, row.SkipReason)
				}
			}
		}
		if skips != 3 {
			t.Fatalf("key0 recorded skipped in %d of 6 requests, want 3 (the ones that planned it first)", skips)
		}

		// After about 2s (not the 30s cooldown), key0 is tried again.
		g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary"})
		eventually(t, 5*time.Second, "key0 probing after the Retry-After", func() (bool, string) {
			h := g.target(t, "primary", 0)
			return h.State == "probing", h.String()
		})
		for i := 0; g.Primary.LastRequest().Header.Get("Authorization") != "Bearer "+primaryKey; i++ {
			if i == 2 {
				t.Fatal("key0 not tried in two requests after its cooldown")
			}
			g.mustChat(t, "gpt-4o-mini", "primary")
		}
		assertRecovered(t, g.target(t, "primary", 0), "key0 after its probe")
		delta(t, begin, g.scrape(t), map[string]float64{toCooling: 1, toProbing: 1, toHealthy: 1})
	})

	t.Run("503 cools the model on its key", func(t *testing.T) {
		// A 503 is the model's trouble: in the request it skips the same
		// model on the provider's other key (model_failed); in health it
		// cools the (key, model) that answered it, for its Retry-After.
		g := start(t, setup{db: true, routes: twoKeyRoutes, primaryExtra: "{ failures: 3, cooldown: 30s }",
			primary: mockupstream.Behavior{Status: 503, RetryAfter: "1"}})
		begin := g.scrape(t)
		r := g.mustChat(t, "gpt-4o-mini", "backup")
		_, rows := g.ledger(t, r.ID)
		wantRows(t, rows, "failed/503/upstream_http_error(primary)", "skipped/0/(primary)", "success/200/(backup)")
		if rows[1].SkipReason != "model_failed" {
			t.Fatalf("the other key's skip reason %q, want model_failed", rows[1].SkipReason)
		}
		first := 0
		if strings.HasPrefix(rows[0].KeyID, "key1-") {
			first = 1
		}
		assertCooling(t, g.target(t, "primary", first), r.Start, r.Start.Add(r.Elapsed), time.Second)
		if h := g.target(t, "primary", 1-first); h.State != "healthy" {
			t.Fatalf("the key that never answered is %v, want healthy", h)
		}
		// The next requests reach the other key, which answers 503 too and
		// cools; then both keys are skipped.
		eventually(t, 5*time.Second, "both keys cooling", func() (bool, string) {
			g.mustChat(t, "gpt-4o-mini", "backup")
			a, b := g.target(t, "primary", 0), g.target(t, "primary", 1)
			return a.State == "cooling" && b.State == "cooling", a.String() + "; " + b.String()
		})
		if n := g.Primary.Stats().Requests; n != 2 {
			t.Fatalf("primary got %d requests, want 2: one per key, each cooled by its own 503", n)
		}
		delta(t, begin, g.scrape(t), map[string]float64{toCooling: 2})

		// After the Retry-After (1s, not the 30s cooldown) the keys are probed.
		g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary"})
		eventually(t, 4*time.Second, "primary keys probing after the Retry-After", func() (bool, string) {
			a, b := g.target(t, "primary", 0), g.target(t, "primary", 1)
			return a.State == "probing" && b.State == "probing", a.String() + "; " + b.String()
		})
		g.mustChat(t, "gpt-4o-mini", "primary")
	})
}

// TestHealthBadKey: a 401 takes the key out for auth_cooldown, logged once
// at info with the key's label; the key itself appears in no log line,
// metric, record or admin view.
func TestHealthBadKey(t *testing.T) {
	log := &syncBuffer{}
	g := start(t, setup{db: true, log: log, routes: twoKeyRoutes,
		primaryExtra: "{ failures: 3, cooldown: 2s, auth_cooldown: 1m }",
		primary:      mockupstream.Behavior{KeyStatus: map[string]int{primaryKey: 401}}})
	begin := g.scrape(t)
	var ids []string
	var refused chatResult
	for range 6 {
		r := g.mustChat(t, "gpt-4o-mini", "primary")
		ids = append(ids, r.ID)
		if g.Primary.Stats().Failed == 1 && refused.ID == "" {
			refused = r
		}
	}
	if st := g.Primary.Stats(); st.Failed != 1 || st.Completed != 6 {
		t.Fatalf("primary stats %+v, want the bad key tried once and the good one serving all 6", st)
	}
	_, rows := g.ledger(t, refused.ID)
	wantRows(t, rows, "failed/401/upstream_http_error(primary)", "success/200/(primary)", "unused/0/(backup)")
	h := g.target(t, "primary", 0)
	assertCooling(t, h, refused.Start, refused.Start.Add(refused.Elapsed), time.Minute)
	if h.ConsecutiveFailures != 1 || h.LastErrorType != "upstream_http_error" {
		t.Fatalf("bad key %v, want 1 failure of upstream_http_error", h)
	}
	assertHealthy(t, g.target(t, "primary", 1), "the good key")
	delta(t, begin, g.scrape(t), map[string]float64{toCooling: 1, toProbing: 0, toHealthy: 0})

	lines := healthLines(log.String())
	if len(lines) != 1 {
		t.Fatalf("health log lines %q, want exactly one", lines)
	}
	for _, w := range []string{"level=INFO", "provider=primary", "key_id=" + h.KeyID, "state=cooling", "from=healthy", "reason=auth", "status=401"} {
		if !strings.Contains(lines[0], w) {
			t.Errorf("health log line %s lacks %s", lines[0], w)
		}
	}

	// Nowhere a key could leak shows one.
	_, metrics := g.get(t, "/metrics", false)
	_, admin := g.get(t, "/admin/health", true)
	places := map[string]string{"log": log.String(), "/metrics": string(metrics), "/admin/health": string(admin)}
	for _, id := range ids {
		_, rows := g.ledger(t, id)
		places["records of "+id] = fmt.Sprintf("%+v", rows)
		_, tl := g.get(t, "/admin/requests/"+id, true)
		places["/admin/requests/"+id] = string(tl)
	}
	for where, text := range places {
		for _, key := range []string{primaryKey, secondKey, backupKey} {
			if strings.Contains(text, key) {
				t.Errorf("%s shows the key %s", where, key)
			}
		}
	}
}

// TestHealthAllCooling: health never fails a request without an attempt.
// With every candidate cooling, the request tries the one whose cooldown
// ends first, wherever it sits in the plan, and its success heals it.
func TestHealthAllCooling(t *testing.T) {
	const routes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
    health: { failures: 1, cooldown: %[3]s }
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
    health: { failures: 1, cooldown: 40s }
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
`
	tests := []struct {
		name            string
		primaryCooldown string
		wantBy          string
		wantRows        []string
	}{
		{"the backup cools down first", "50s", "backup", []string{"skipped/0/(primary)", "success/200/(backup)"}},
		{"the primary cools down first", "30s", "primary", []string{"success/200/(primary)", "skipped/0/(backup)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := start(t, setup{db: true, routes: routes, primaryExtra: tt.primaryCooldown,
				primary: mockupstream.Behavior{Status: 500}, backup: mockupstream.Behavior{Status: 500}})
			if r := g.chat(context.Background(), "gpt-4o-mini"); r.Status != http.StatusBadGateway {
				t.Fatalf("both failing: status %d, want 502", r.Status)
			}
			for _, p := range []string{"primary", "backup"} {
				if h := g.target(t, p, 0); h.State != "cooling" {
					t.Fatalf("%s %v, want cooling after its failure", p, h)
				}
			}
			g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary"})
			g.Backup.SetBehavior(mockupstream.Behavior{Identity: "backup"})
			before := g.scrape(t)
			pBefore, bBefore := g.Primary.Stats().Requests, g.Backup.Stats().Requests

			r := g.mustChat(t, "gpt-4o-mini", tt.wantBy)
			_, rows := g.ledger(t, r.ID)
			wantRows(t, rows, tt.wantRows...)
			for _, row := range rows {
				if row.Status == "skipped" && row.SkipReason != "cooling_down" {
					t.Fatalf("skipped row %v: skip_reason %q, want cooling_down", row, row.SkipReason)
				}
			}
			if tried := g.Primary.Stats().Requests - pBefore + g.Backup.Stats().Requests - bBefore; tried != 1 {
				t.Fatalf("%d upstream attempts, want exactly 1", tried)
			}
			other, otherSkipped := "backup", backSkipped
			if tt.wantBy == "backup" {
				other, otherSkipped = "primary", primSkipped
			}
			assertRecovered(t, g.target(t, tt.wantBy, 0), tt.wantBy+" after the forced attempt")
			if h := g.target(t, other, 0); h.State != "cooling" {
				t.Fatalf("%s %v, want still cooling", other, h)
			}
			delta(t, before, g.scrape(t), map[string]float64{otherSkipped: 1,
				"gateway_health_transitions_total{provider=" + tt.wantBy + ",to=healthy}": 1,
				"gateway_health_transitions_total{provider=" + other + ",to=healthy}":     0})
		})
	}
}

// TestHealthNotCounted: what says nothing about a provider leaves its health
// untouched: a client that cancels, a client-fault answer relayed as is, and
// a full target gate. The primary cools after a single counted failure, so
// any of them counted by mistake would show.
func TestHealthNotCounted(t *testing.T) {
	// run starts a gateway whose primary behaves as b, lets step do its
	// thing, and checks that the primary's health did not move.
	run := func(t *testing.T, b mockupstream.Behavior, step func(t *testing.T, g *gateway)) {
		g := start(t, setup{routes: defaultRoutes, primary: b,
			primaryExtra: "    queue_budget: 50ms\n    health: { failures: 1, cooldown: 1m }"})
		before := g.scrape(t)
		step(t, g)
		assertHealthy(t, g.target(t, "primary", 0), "primary")
		delta(t, before, g.scrape(t), noTransitions)
	}

	t.Run("client cancel", func(t *testing.T) {
		run(t, mockupstream.Behavior{FirstByteDelay: 10 * time.Second}, func(t *testing.T, g *gateway) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan chatResult, 1)
			go func() { done <- g.chat(ctx, "gpt-4o-mini") }()
			eventually(t, 5*time.Second, "the primary busy with one request", func() (bool, string) {
				return g.Primary.Stats().InFlight == 1, fmt.Sprintf("%+v", g.Primary.Stats())
			})
			cancel()
			if r := <-done; r.Err == nil {
				t.Fatalf("cancelled request: %+v, want an error", r)
			}
			const cancelled = "gateway_candidate_attempts_total{error_type=client_cancelled,model=gpt-4o-mini,provider=primary,status=cancelled}"
			eventually(t, 5*time.Second, "the cancel recorded", func() (bool, string) {
				n := g.scrape(t)[cancelled]
				return n == 1 && g.Scheduler.Idle(), fmt.Sprintf("%v cancelled attempts", n)
			})
		})
	})

	t.Run("relayed 400", func(t *testing.T) {
		run(t, mockupstream.Behavior{Status: http.StatusBadRequest}, func(t *testing.T, g *gateway) {
			r := g.chat(context.Background(), "gpt-4o-mini")
			if r.Status != http.StatusBadRequest || r.By != "primary" {
				t.Fatalf("status %d by %q, want the primary's 400 relayed", r.Status, r.By)
			}
		})
	})

	t.Run("admission timeout", func(t *testing.T) {
		run(t, mockupstream.Behavior{FirstByteDelay: 400 * time.Millisecond}, func(t *testing.T, g *gateway) {
			// Fill the primary's 8 slots (defaultRoutes), then one more
			// request times out in its queue and fails over to the backup.
			var wg sync.WaitGroup
			results := make(chan chatResult, 8)
			for range 8 {
				wg.Add(1)
				go func() { defer wg.Done(); results <- g.chat(context.Background(), "gpt-4o-mini") }()
			}
			eventually(t, 5*time.Second, "the primary busy with eight requests", func() (bool, string) {
				return g.Primary.Stats().InFlight == 8, fmt.Sprintf("%+v", g.Primary.Stats())
			})
			g.mustChat(t, "gpt-4o-mini", "backup")
			wg.Wait()
			close(results)
			for r := range results {
				if r.Err != nil || r.Status != http.StatusOK || r.By != "primary" {
					t.Fatalf("slot holder: %+v, want 200 by primary", r)
				}
			}
			const admTimeout = "gateway_candidate_attempts_total{error_type=gateway_admission_timeout,model=gpt-4o-mini,provider=primary,status=failed}"
			if n := g.scrape(t)[admTimeout]; n != 1 {
				t.Fatalf("%v admission timeouts on the primary, want 1", n)
			}
		})
	})
}

// TestHealthLeastLatency: a least_latency route sends nearly every request
// to the target with the faster first byte, and moves away from it within a
// few requests once it turns slow.
func TestHealthLeastLatency(t *testing.T) {
	const routes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: fastest
    strategy: least_latency
    candidates:
      - { provider: primary, model: up-primary-mini }
      - { provider: backup, model: up-backup-mini }
  - name: primary-only
    candidates: [ { provider: primary, model: up-primary-mini } ]
  - name: backup-only
    candidates: [ { provider: backup, model: up-backup-mini } ]
`
	g := start(t, setup{routes: routes,
		primary: mockupstream.Behavior{FirstByteDelay: 5 * time.Millisecond},
		backup:  mockupstream.Behavior{FirstByteDelay: 50 * time.Millisecond}})
	by := func(model string) string {
		r := g.chat(context.Background(), model)
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("request: %+v", r)
		}
		return r.By
	}
	// Warm-up through single-target routes: the EWMA is the target's, so a
	// few samples each settle both averages. A least_latency route alone
	// would measure each target once, and one sample slowed by a loaded
	// machine would then decide the order: a target behind another is not
	// tried, so its average is not corrected.
	for range 5 {
		by("primary-only")
		by("backup-only")
	}
	fastH, slowH := g.target(t, "primary", 0), g.target(t, "backup", 0)
	if fastH.EWMAFirstByteMS == nil || slowH.EWMAFirstByteMS == nil || *fastH.EWMAFirstByteMS >= *slowH.EWMAFirstByteMS {
		t.Fatalf("after warm-up: %s, %s; want the 5ms target measured faster than the 50ms one", fastH.ewma(), slowH.ewma())
	}
	fast := 0
	const n = 50
	for range n {
		if by("fastest") == "primary" {
			fast++
		}
	}
	if fast < n*9/10 {
		t.Fatalf("%d of %d requests went to the 5ms target, want at least 90%% (now %s; %s)",
			fast, n, g.target(t, "primary", 0).ewma(), g.target(t, "backup", 0).ewma())
	}

	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", FirstByteDelay: 100 * time.Millisecond})
	for i := 1; by("fastest") == "primary"; i++ {
		if i == 10 {
			t.Fatalf("the primary, now at 100ms, still first after %d requests (%s; %s)", i,
				g.target(t, "primary", 0).ewma(), g.target(t, "backup", 0).ewma())
		}
	}
}
