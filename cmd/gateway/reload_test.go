package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// The routes reload tests run the real binary with the admin API on and no
// records, edit its routes file the ways operators and Kubernetes do, and
// read the result through requests, /admin/config, /admin/admission,
// /admin/health, /metrics and the log.

// layout is how the routes file sits on disk and how a new version of it is
// put in place.
type layout struct {
	name string
	// setup writes the first version and returns GATEWAY_CONFIG.
	setup func(t *testing.T, src string) string
	// apply puts src in place (and signals the process, for SIGHUP).
	apply func(t *testing.T, p *gatewayProc, file, src string)
	// trigger is the reload's trigger as logged.
	trigger string
}

func writeFile(t *testing.T, path, src string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

var (
	// plainFile: the file itself in a directory of its own.
	plainFile = func(t *testing.T, src string) string {
		file := filepath.Join(t.TempDir(), "gateway.yaml")
		writeFile(t, file, src)
		return file
	}
	layouts = []layout{
		{
			// The file is a symlink to one in another directory, which the
			// watch does not see: only SIGHUP reloads it.
			name: "SIGHUP",
			setup: func(t *testing.T, src string) string {
				real := filepath.Join(t.TempDir(), "routes.yaml")
				writeFile(t, real, src)
				file := filepath.Join(t.TempDir(), "gateway.yaml")
				symlink(t, real, file)
				return file
			},
			apply: func(t *testing.T, p *gatewayProc, file, src string) {
				real, err := os.Readlink(file)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, real, src)
				p.signal(t, syscall.SIGHUP)
			},
			trigger: "signal",
		},
		{
			name:  "write in place",
			setup: plainFile,
			apply: func(t *testing.T, _ *gatewayProc, file, src string) {
				writeFile(t, file, src)
			},
			trigger: "file",
		},
		{
			// How vim and most editors save: a new file renamed over the old.
			name:  "rename over",
			setup: plainFile,
			apply: func(t *testing.T, _ *gatewayProc, file, src string) {
				tmp := file + ".swp"
				writeFile(t, tmp, src)
				if err := os.Rename(tmp, file); err != nil {
					t.Fatal(err)
				}
			},
			trigger: "file",
		},
		{
			// A Kubernetes ConfigMap volume: gateway.yaml -> ..data/gateway.yaml,
			// ..data -> ..<version>; an update writes a new version directory
			// and renames a new ..data symlink over the old one.
			name: "ConfigMap swap",
			setup: func(t *testing.T, src string) string {
				dir := t.TempDir()
				if err := os.Mkdir(filepath.Join(dir, "..v0"), 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, "..v0", "gateway.yaml"), src)
				symlink(t, "..v0", filepath.Join(dir, "..data"))
				symlink(t, filepath.Join("..data", "gateway.yaml"), filepath.Join(dir, "gateway.yaml"))
				return filepath.Join(dir, "gateway.yaml")
			},
			apply: func(t *testing.T, _ *gatewayProc, file, src string) {
				dir := filepath.Dir(file)
				old, err := os.Readlink(filepath.Join(dir, "..data"))
				if err != nil {
					t.Fatal(err)
				}
				version := fmt.Sprintf("..v%d", time.Now().UnixNano())
				if err := os.Mkdir(filepath.Join(dir, version), 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, version, "gateway.yaml"), src)
				symlink(t, version, filepath.Join(dir, "..data_tmp"))
				if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
					t.Fatal(err)
				}
			},
			trigger: "file",
		},
	}
)

// reloadable is a gateway binary serving a routes file it may reload.
type reloadable struct {
	*gatewayProc
	base string
	file string
}

func startReloadable(t *testing.T, l layout, src string, env ...string) *reloadable {
	t.Helper()
	file := l.setup(t, src)
	env = append([]string{"GATEWAY_CONFIG=" + file, "GATEWAY_ADMIN_TOKEN=" + fmtAdminToken}, env...)
	p := startGateway(t, env...)
	return &reloadable{gatewayProc: p, base: "http://" + p.addr, file: file}
}

// adminGet decodes GET path of the admin API into v.
func (g *reloadable) adminGet(t *testing.T, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+fmtAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// configStatus is GET /admin/config.
type configStatus struct {
	File     string    `json:"file"`
	Digest   string    `json:"digest"`
	LoadedAt time.Time `json:"loaded_at"`
	Reloads  struct {
		Success int `json:"success"`
		Error   int `json:"error"`
	} `json:"reloads"`
	LastError *struct {
		Message string    `json:"message"`
		At      time.Time `json:"at"`
	} `json:"last_error"`
}

// waitReloads waits until /admin/config counts success and errors reloads.
func (g *reloadable) waitReloads(t *testing.T, success, errors int) configStatus {
	t.Helper()
	var st configStatus
	if !waitUntil(10*time.Second, func() bool {
		st = configStatus{}
		g.adminGet(t, "/admin/config", &st)
		return st.Reloads.Success == success && st.Reloads.Error == errors
	}) {
		t.Fatalf("reloads %+v, want %d successful and %d failed:\n%s", st.Reloads, success, errors, g.logs.String())
	}
	return st
}

// complete posts a chat completion for model without a client key.
func (g *reloadable) complete(t *testing.T, model string) (int, string) {
	t.Helper()
	resp, err := http.Post(g.base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// countLogs counts the log lines whose msg is msg.
func (g *reloadable) countLogs(msg string) int {
	n := 0
	for _, rec := range g.logs.records() {
		if rec["msg"] == msg {
			n++
		}
	}
	return n
}

// provider is one provider line of a routes file.
func provider(name, url string, maxConcurrency int, extra string) string {
	return fmt.Sprintf("  - { name: %s, base_url: %q, api_keys: [%q], max_concurrency: %d%s }\n",
		name, url+"/v1", fmtProviderKey, maxConcurrency, extra)
}

// TestReloadFollowsNewRoutes: whichever way the file changes (SIGHUP, a
// write, a rename over it, a ConfigMap symlink swap), requests planned after
// the reload follow the new routes: an added model answers, and a removed
// provider gets no more requests and leaves /admin/health.
func TestReloadFollowsNewRoutes(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			alpha, alphaURL := mockServer(t, mockupstream.Behavior{Identity: "alpha"})
			beta, betaURL := mockServer(t, mockupstream.Behavior{Identity: "beta"})
			providers := "providers:\n" + provider("alpha", alphaURL, 4, "") + provider("beta", betaURL, 4, "")
			first := providers + "models:\n  - { name: m1, candidates: [{ provider: beta }, { provider: alpha, priority: 1 }] }\n"
			g := startReloadable(t, l, first)
			if code, body := g.complete(t, "m1"); code != 200 || !strings.Contains(body, "Hello from beta") {
				t.Fatalf("m1 before any reload: %d %s", code, body)
			}
			if code, _ := g.complete(t, "m2"); code != http.StatusNotFound {
				t.Fatalf("m2 before it is added: %d, want 404", code)
			}

			// Add a model.
			l.apply(t, g.gatewayProc, g.file, first+"  - { name: m2, candidates: [{ provider: alpha }] }\n")
			g.waitReloads(t, 1, 0)
			if code, body := g.complete(t, "m2"); code != 200 || !strings.Contains(body, "Hello from alpha") {
				t.Fatalf("the added model: %d %s", code, body)
			}
			var models struct{ Data []struct{ ID string } }
			_, body := get(t, g.base+"/v1/models")
			if err := json.Unmarshal([]byte(body), &models); err != nil || len(models.Data) != 2 || models.Data[1].ID != "m2" {
				t.Fatalf("/v1/models after adding m2: %s", body)
			}

			// Remove a provider.
			betaBefore := beta.Stats().Requests
			l.apply(t, g.gatewayProc, g.file, "providers:\n"+provider("alpha", alphaURL, 4, "")+
				"models:\n  - { name: m1, candidates: [{ provider: alpha }] }\n  - { name: m2, candidates: [{ provider: alpha }] }\n")
			g.waitReloads(t, 2, 0)
			alphaBefore := alpha.Stats().Requests
			for range 3 {
				if code, body := g.complete(t, "m1"); code != 200 || !strings.Contains(body, "Hello from alpha") {
					t.Fatalf("m1 after beta was removed: %d %s", code, body)
				}
			}
			if got := beta.Stats().Requests; got != betaBefore {
				t.Errorf("the removed provider got %d more requests", got-betaBefore)
			}
			if got := alpha.Stats().Requests - alphaBefore; got != 3 {
				t.Errorf("alpha served %d of the 3 requests", got)
			}
			// Health is per (key, upstream model): alpha's key serves m1 and
			// m2, and beta's entry is gone.
			var targets []struct{ Provider, Model string }
			g.adminGet(t, "/admin/health", &targets)
			if len(targets) != 2 || targets[0] != (struct{ Provider, Model string }{"alpha", "m1"}) ||
				targets[1] != (struct{ Provider, Model string }{"alpha", "m2"}) {
				t.Errorf("/admin/health after removing beta: %+v, want alpha's m1 and m2", targets)
			}
			var triggers []any
			for _, rec := range g.logs.records() {
				if rec["msg"] == "routes reloaded" {
					triggers = append(triggers, rec["trigger"])
				}
			}
			if len(triggers) != 2 || triggers[0] != l.trigger || triggers[1] != l.trigger {
				t.Errorf("reloads logged with triggers %v, want two by %s", triggers, l.trigger)
			}
			if errs := g.errorRecords(); len(errs) != 0 {
				t.Errorf("errors logged: %v", errs)
			}
		})
	}
}

// TestReloadStreamInFlightFinishes: a stream that started before the reload
// that removes its provider and its model finishes on its plan, and the
// client gets exactly the bytes the provider sent; the next request follows
// the new routes.
func TestReloadStreamInFlightFinishes(t *testing.T) {
	slow, slowURL := mockServer(t, mockupstream.Behavior{Identity: "slow", Chunks: 8, ChunkInterval: 150 * time.Millisecond})
	tee := &teeProxy{target: slowURL}
	teeServer := httptest.NewServer(tee)
	t.Cleanup(teeServer.Close)
	teeURL := teeServer.URL
	_, fastURL := mockServer(t, mockupstream.Behavior{Identity: "fast"})
	g := startReloadable(t, layouts[1], "providers:\n"+provider("slow", teeURL, 4, "")+
		"models:\n  - { name: m, candidates: [{ provider: slow }] }\n")

	type result struct {
		code int
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Post(g.base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			done <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{resp.StatusCode, b, err}
	}()
	if !waitUntil(10*time.Second, func() bool { return slow.Stats().InFlight > 0 }) {
		t.Fatal("the stream never reached its provider")
	}
	writeFile(t, g.file, "providers:\n"+provider("fast", fastURL, 4, "")+
		"models:\n  - { name: m, candidates: [{ provider: fast }] }\n")
	g.waitReloads(t, 1, 0)
	if slow.Stats().InFlight == 0 {
		t.Fatal("the stream ended before the reload; lengthen it")
	}
	if code, body := g.complete(t, "m"); code != 200 || !strings.Contains(body, "Hello from fast") {
		t.Fatalf("a request after the reload: %d %s", code, body)
	}
	r := <-done
	if r.err != nil || r.code != 200 {
		t.Fatalf("the stream in flight: %d %v", r.code, r.err)
	}
	if want := tee.last(); !bytes.Equal(r.body, want) || !bytes.HasSuffix(r.body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("the stream in flight differs from what its provider sent:\n got %q\nwant %q", r.body, want)
	}
	var snap admissionSnapshot
	if !waitUntil(5*time.Second, func() bool {
		g.adminGet(t, "/admin/admission", &snap)
		return snap.Global.Active == 0 && snap.Pending == 0
	}) {
		t.Fatalf("slots still held after the stream: %+v", snap)
	}
}

// admissionSnapshot is the part of GET /admin/admission these tests read.
type admissionSnapshot struct {
	Global  gateStats   `json:"global"`
	Targets []gateStats `json:"targets"`
	Pending int         `json:"pending"`
}

type gateStats struct {
	Label   string `json:"label"`
	ID      string `json:"id"`
	Limit   int    `json:"limit"`
	Active  int    `json:"active"`
	Pending int    `json:"pending"`
}

// target is the gate of provider's only target.
func (s admissionSnapshot) target(t *testing.T, provider string) gateStats {
	t.Helper()
	for _, g := range s.Targets {
		if g.Label == provider {
			return g
		}
	}
	t.Fatalf("no gate for %s in %+v", provider, s)
	return gateStats{}
}

// TestReloadKeepsGates: a reload that leaves a target as it was keeps its
// gate, with the attempt it admitted and the one queued on it; a reload
// that raises its max_concurrency resizes that gate in place, and the queued
// attempt is admitted at once, while the first still runs.
func TestReloadKeepsGates(t *testing.T) {
	one, oneURL := mockServer(t, mockupstream.Behavior{Identity: "one", Latency: 3 * time.Second})
	routes := func(maxConcurrency int, extraModel string) string {
		return "providers:\n" + provider("one", oneURL, maxConcurrency, ", queue_budget: 20s") +
			"models:\n  - { name: m, candidates: [{ provider: one }] }\n" + extraModel
	}
	g := startReloadable(t, layouts[1], routes(1, ""))
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Go(func() {
			code, _ := g.complete(t, "m")
			codes <- code
		})
	}
	t.Cleanup(wg.Wait)
	var snap admissionSnapshot
	if !waitUntil(5*time.Second, func() bool {
		g.adminGet(t, "/admin/admission", &snap)
		return len(snap.Targets) == 1 && snap.Targets[0].Active == 1 && snap.Targets[0].Pending == 1
	}) {
		t.Fatalf("want one attempt admitted and one queued: %+v", snap)
	}
	before := snap.target(t, "one")

	writeFile(t, g.file, routes(1, "  - { name: other, candidates: [{ provider: one }] }\n"))
	g.waitReloads(t, 1, 0)
	g.adminGet(t, "/admin/admission", &snap)
	if after := snap.target(t, "one"); after != before {
		t.Fatalf("the unchanged target's gate changed across the reload: %+v, was %+v", after, before)
	}

	writeFile(t, g.file, routes(2, ""))
	g.waitReloads(t, 2, 0)
	// The queued attempt carries the old limit; the resize reaches the gate
	// with the next Acquire, which a new request makes.
	go func() {
		code, _ := g.complete(t, "m")
		codes <- code
	}()
	if !waitUntil(2*time.Second, func() bool {
		g.adminGet(t, "/admin/admission", &snap)
		return snap.target(t, "one").Limit == 2 && snap.target(t, "one").Active == 2
	}) {
		t.Fatalf("after raising max_concurrency to 2: %+v", snap.target(t, "one"))
	}
	// The gate counts an attempt when it is admitted; the provider sees it
	// a moment later, once the request reached it.
	if !waitUntil(time.Second, func() bool { return one.Stats().InFlight == 2 }) {
		t.Errorf("the provider has %d requests in flight, want 2", one.Stats().InFlight)
	}
	for range 3 {
		if code := <-codes; code != 200 {
			t.Errorf("a request across the reloads: %d", code)
		}
	}
}

// TestReloadInvalidFileKeepsServing: an invalid file changes nothing: the
// routes in service keep serving, the error names the field and line (the
// same words as check-config), is logged once however many events the save
// makes, counted in gateway_config_reloads_total{result="error"} and shown
// by /admin/config; a following valid file is served, and last_error stays
// with its time, older than loaded_at.
func TestReloadInvalidFileKeepsServing(t *testing.T) {
	_, url := mockServer(t, mockupstream.Behavior{Identity: "primary"})
	valid := "providers:\n" + provider("primary", url, 4, "") + "models:\n  - { name: m, candidates: [{ provider: primary }] }\n"
	g := startReloadable(t, layouts[1], valid)
	var start configStatus
	g.adminGet(t, "/admin/config", &start)
	if start.File != g.file || !strings.HasPrefix(start.Digest, "sha256:") || len(start.Digest) != 71 || start.LastError != nil || start.LoadedAt.IsZero() {
		t.Fatalf("/admin/config at start: %+v", start)
	}

	invalid := strings.Replace(valid, "max_concurrency: 4", "max_concurrency: -1", 1) +
		"  - { name: n, candidates: [{ provider: primary }] }\n"
	writeFile(t, g.file, invalid)
	st := g.waitReloads(t, 0, 1)
	var checked, stderr bytes.Buffer
	if code := run([]string{"check-config", g.file}, &checked, &stderr); code != 1 {
		t.Fatalf("check-config on the invalid file: exit %d", code)
	}
	if st.LastError == nil || "gateway: "+st.LastError.Message+"\n" != stderr.String() ||
		!strings.Contains(st.LastError.Message, "line 2: providers[0].max_concurrency must be positive") {
		t.Fatalf("last_error %+v, check-config said %q", st.LastError, stderr.String())
	}
	if st.Digest != start.Digest || !st.LoadedAt.Equal(start.LoadedAt) {
		t.Errorf("a failed reload changed the loaded file: %+v", st)
	}
	// The same bytes again, and a change of mode: more events, no new report.
	writeFile(t, g.file, invalid)
	if err := os.Chmod(g.file, 0o640); err != nil {
		t.Fatal(err)
	}
	// Past the debounce: the watcher ignores a content that failed already
	// without a trace (server.Reload returns nil there), so there is no
	// condition to wait on; the wait lets that ignored reload run before
	// the checks below, which would pass vacuously without it.
	time.Sleep(600 * time.Millisecond)
	if code, body := g.complete(t, "m"); code != 200 {
		t.Fatalf("the routes in service after a failed reload: %d %s", code, body)
	}
	if code, _ := g.complete(t, "n"); code != http.StatusNotFound {
		t.Errorf("a model of the invalid file: %d, want 404", code)
	}
	if n := g.countLogs("routes reload failed; the routes in service keep serving"); n != 1 {
		t.Errorf("the failure was logged %d times, want once", n)
	}
	if sums := scrapeReloads(t, g.addr); sums["error"] != 1 || sums["success"] != 0 {
		t.Errorf("gateway_config_reloads_total %v, want error 1 and success 0", sums)
	}

	// loaded_at and last_error.at are in whole seconds: the next load must
	// fall in a later second than the failure for the order to show.
	if !waitUntil(2*time.Second, func() bool { return time.Now().Truncate(time.Second).After(st.LastError.At) }) {
		t.Fatalf("the clock did not pass the failure's second %v", st.LastError.At)
	}
	writeFile(t, g.file, valid+"  - { name: n, candidates: [{ provider: primary }] }\n")
	st = g.waitReloads(t, 1, 1)
	if code, body := g.complete(t, "n"); code != 200 {
		t.Fatalf("the model of the valid file: %d %s", code, body)
	}
	if st.LastError == nil || !st.LastError.At.Before(st.LoadedAt) || st.Digest == start.Digest {
		t.Errorf("after the valid file: %+v (last_error %+v)", st, st.LastError)
	}
	if sums := scrapeReloads(t, g.addr); sums["error"] != 1 || sums["success"] != 1 {
		t.Errorf("gateway_config_reloads_total %v, want error 1 and success 1", sums)
	}
}

// scrapeReloads reads gateway_config_reloads_total by result.
func scrapeReloads(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	_, body := get(t, "http://"+addr+"/metrics")
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		var result string
		var v float64
		if _, err := fmt.Sscanf(line, "gateway_config_reloads_total{result=%q} %g", &result, &v); err == nil {
			out[result] = v
		}
	}
	return out
}
