package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/server"
)

// reloadRoutes are versions of the routes file a reload test cycles
// through: the harness's defaultRoutes; primary resized with a second model
// on backup; backup removed. %[1]s and %[2]s are the mocks' base URLs.
var reloadRoutes = []string{
	strings.Replace(defaultRoutes, "%[3]s\n", "", 1),
	`
providers:
  - { name: primary, base_url: "%[1]s/v1", api_keys: ["${PRIMARY_KEY}"], max_concurrency: 4, timeouts: { first_byte: 2s } }
  - { name: backup, base_url: "%[2]s/v1", api_keys: ["${BACKUP_KEY}"], max_concurrency: 8 }
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
  - { name: extra, candidates: [{ provider: backup }] }
`,
	`
providers:
  - { name: primary, base_url: "%[1]s/v1", api_keys: ["${PRIMARY_KEY}"], max_concurrency: 8, timeouts: { first_byte: 2s } }
models:
  - { name: gpt-4o-mini, candidates: [{ provider: primary, model: up-primary-mini }] }
`,
}

// startReloadable starts the harness's gateway with GATEWAY_CONFIG naming a
// file that holds what it serves, and the keys in the environment, as a
// reload reads them.
func startReloadable(t *testing.T, s setup) (g *gateway, write func(version string)) {
	t.Helper()
	t.Setenv("PRIMARY_KEY", primaryKey)
	t.Setenv("BACKUP_KEY", backupKey)
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	if s.env == nil {
		s.env = map[string]string{}
	}
	s.env["GATEWAY_CONFIG"] = file
	g = start(t, s)
	// write replaces the file by rename, as editors and ConfigMaps do: a
	// truncate-then-write could be read half-written by the file watch
	// while the test's own reloads run, and counted as a failed reload.
	write = func(version string) {
		t.Helper()
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf(version, g.PrimaryURL, g.BackupURL)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadRoutes[0])
	return g, write
}

// TestReloadOutcomes walks one gateway through a sequence of files and
// triggers: what each reload returns, what /admin/config counts, and how
// often a failure is logged.
func TestReloadOutcomes(t *testing.T) {
	var logs syncBuffer
	g, write := startReloadable(t, setup{log: &logs})
	steps := []struct {
		name    string
		file    string // a version of the file; "" removes it
		trigger string
		wantErr string // "" for success or nothing to do
		success int64
		errors  int64
		logged  int // "routes reload failed" lines so far
	}{
		{"the file New served, by SIGHUP", reloadRoutes[0], server.TriggerSignal, "", 1, 0, 0},
		{"the same bytes: nothing to do", reloadRoutes[0], server.TriggerSignal, "", 1, 0, 0},
		{"an invalid file", reloadRoutes[1] + "  - { name: bad }\n", server.TriggerFile, "line 11: models[2].candidates must list at least one entry", 1, 1, 1},
		{"its next file event: nothing to do", reloadRoutes[1] + "  - { name: bad }\n", server.TriggerFile, "", 1, 1, 1},
		{"SIGHUP on it reports again", reloadRoutes[1] + "  - { name: bad }\n", server.TriggerSignal, "models[2].candidates", 1, 2, 2},
		{"a valid file", reloadRoutes[1], server.TriggerFile, "", 2, 2, 2},
		{"the file removed", "", server.TriggerFile, "no such file or directory", 2, 3, 3},
		{"the file back", reloadRoutes[2], server.TriggerFile, "", 3, 3, 3},
	}
	file := g.Config.RoutesFile
	for _, st := range steps {
		if st.file == "" {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
		} else {
			write(st.file)
		}
		err := g.Reload(st.trigger)
		if (st.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), st.wantErr)) {
			t.Fatalf("%s: Reload = %v, want %q", st.name, err, st.wantErr)
		}
		cs := g.ConfigStatus()
		if cs.Reloads.Success != st.success || cs.Reloads.Error != st.errors {
			t.Fatalf("%s: reloads %+v, want %d successful and %d failed", st.name, cs.Reloads, st.success, st.errors)
		}
		if n := strings.Count(logs.String(), "routes reload failed"); n != st.logged {
			t.Fatalf("%s: the failure was logged %d times, want %d", st.name, n, st.logged)
		}
		if err != nil && (cs.LastError == nil || cs.LastError.Message != err.Error()) {
			t.Fatalf("%s: last_error %+v", st.name, cs.LastError)
		}
	}
	_, scrape := g.get(t, "/metrics", false)
	for _, want := range []string{`gateway_config_reloads_total{result="error"} 3`, `gateway_config_reloads_total{result="success"} 3`} {
		if !strings.Contains(string(scrape), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The last file has no backup: its target left the health view.
	for _, ts := range g.Health.Snapshot() {
		if ts.Provider == "backup" {
			t.Errorf("the removed provider's target is still tracked: %+v", ts)
		}
	}
	if strings.Contains(logs.String(), primaryKey) || strings.Contains(logs.String(), backupKey) {
		t.Error("a provider key was logged")
	}
}

// TestCheckRoutesIsTheReloadValidation: the error check-config prints for a
// file is the one a reload reports, naming the field and line.
func TestCheckRoutesIsTheReloadValidation(t *testing.T) {
	g, write := startReloadable(t, setup{})
	write(strings.Replace(reloadRoutes[2], "max_concurrency: 8", "max_concurrency: 0", 1))
	reloadErr := g.Reload(server.TriggerSignal)
	_, checkErr := server.LoadRoutesFile(g.Config)
	var fe *routes.FieldError
	if reloadErr == nil || checkErr == nil || reloadErr.Error() != checkErr.Error() || !errors.As(reloadErr, &fe) ||
		fe.Path != "providers[0].max_concurrency" || fe.Line != 3 {
		t.Fatalf("reload: %v\ncheck:  %v", reloadErr, checkErr)
	}
}

// TestReloadsUnderLoad: 100 reloads while requests stream, with the file
// watch running, fail no request; when the load stops every admission gate
// is back to zero active and pending, and (TestMain) no goroutine is left.
func TestReloadsUnderLoad(t *testing.T) {
	g, write := startReloadable(t, setup{
		primary: mockupstream.Behavior{Chunks: 4, ChunkInterval: 2 * time.Millisecond},
	})
	stopWatch := g.WatchConfig(nil)
	defer stopWatch()

	var stop atomic.Bool
	var requests, failed atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				code, body, err := postChat(g, chatBody((w+i)%2 == 0))
				requests.Add(1)
				if err != nil || code != http.StatusOK || !strings.Contains(body, "Hello from") {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %v %s", code, err, body))
				}
			}
		})
	}
	for i := range 100 {
		write(reloadRoutes[(i+1)%len(reloadRoutes)])
		if err := g.Reload(server.TriggerSignal); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	stopWatch() // no reload runs while the state is read below
	if failed.Load() > 0 {
		t.Fatalf("%d of %d requests failed across the reloads; the first: %v", failed.Load(), requests.Load(), firstFailure.Load())
	}
	if requests.Load() < 100 {
		t.Fatalf("only %d requests ran during the reloads", requests.Load())
	}
	cs := g.ConfigStatus()
	if cs.Reloads.Error != 0 || cs.Reloads.Success < 50 {
		t.Fatalf("reloads %+v", cs.Reloads)
	}
	g.assertIdle(t)
	for _, gate := range g.Scheduler.Stats().Targets {
		if gate.Active != 0 || gate.Pending != 0 {
			t.Errorf("gate %s/%s still holds %d active, %d pending", gate.Label, gate.ID, gate.Active, gate.Pending)
		}
	}
	if got := len(g.Upstreams); got != 2 && got != 1 {
		t.Errorf("%d provider clients in service", got)
	}
}

// postChat is a request from a load goroutine, which must not call t.Fatal.
func postChat(g *gateway, body string) (int, string, error) {
	resp, err := g.client.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestReloadClientKeysAndClients: client keys reload with the routes (a key
// added is required from the next request on, and removing every client
// opens the API again), and a provider that keeps its name and connect
// settings keeps its client and its warm connections.
func TestReloadClientKeysAndClients(t *testing.T) {
	g, write := startReloadable(t, setup{})
	const token = "client-SENTINEL-token"
	sum := sha256.Sum256([]byte(token))
	withClient := reloadRoutes[0] + "clients:\n  - { name: app, key_sha256: \"" + hex.EncodeToString(sum[:]) + "\" }\n"
	primaryClient := g.Upstreams["primary"]
	tests := []struct {
		name     string
		file     string
		noKey    int
		withKey  int
		sameConn bool // primary keeps its client
	}{
		{"a client added", withClient, http.StatusUnauthorized, http.StatusOK, true},
		{"every client removed", reloadRoutes[0], http.StatusOK, http.StatusOK, true},
		{"primary's connect timeout changed", strings.Replace(reloadRoutes[0], "first_byte: 2s", "first_byte: 2s, connect: 3s", 1),
			http.StatusOK, http.StatusOK, false},
	}
	for _, tt := range tests {
		write(tt.file)
		if err := g.Reload(server.TriggerSignal); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if resp, _ := g.post(t, chatBody(false)); resp.StatusCode != tt.noKey {
			t.Errorf("%s: without a key %d, want %d", tt.name, resp.StatusCode, tt.noKey)
		}
		if resp, _ := g.post(t, chatBody(false), "Authorization", "Bearer "+token); resp.StatusCode != tt.withKey {
			t.Errorf("%s: with the key %d, want %d", tt.name, resp.StatusCode, tt.withKey)
		}
		if same := g.Upstreams["primary"] == primaryClient; same != tt.sameConn {
			t.Errorf("%s: primary kept its client: %v, want %v", tt.name, same, tt.sameConn)
		}
	}
}
