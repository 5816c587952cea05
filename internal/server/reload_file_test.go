package server_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/server"
)

// TestReloadRefusesOversizedFile: a routes file over the 16 MiB cap, or a
// symlink swapped to /dev/zero under the running gateway, is a load error
// (routes.ErrFileTooLarge) returned without reading the rest;
// the routes in service keep serving and /admin/config keeps their digest.
func TestReloadRefusesOversizedFile(t *testing.T) {
	g, write := startReloadable(t, setup{})
	if err := g.Reload(server.TriggerSignal); err != nil {
		t.Fatal(err)
	}
	served := g.ConfigStatus().Digest
	file := g.Config.RoutesFile
	big := func() {
		// Valid YAML throughout: a comment, so only the size is wrong.
		b := bytes.Repeat([]byte("#"), routes.MaxFileBytes+1)
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	devZero := func() {
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/dev/zero", file); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name  string
		apply func()
	}{{"one byte over the cap", big}, {"a symlink to /dev/zero", devZero}} {
		tt.apply()
		err := g.Reload(server.TriggerSignal)
		if !errors.Is(err, routes.ErrFileTooLarge) {
			t.Fatalf("%s: Reload = %v, want ErrFileTooLarge", tt.name, err)
		}
		cs := g.ConfigStatus()
		if cs.Digest != served || cs.LastError == nil || !strings.Contains(cs.LastError.Message, "16 MiB") {
			t.Fatalf("%s: /admin/config %+v (last_error %+v)", tt.name, cs, cs.LastError)
		}
		if resp, body := g.post(t, chatBody(false)); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: the routes in service stopped serving: %d %s", tt.name, resp.StatusCode, body)
		}
		_ = os.Remove(file)
		write(reloadRoutes[0])
	}
}

// dirLog is a gateway log that, once file is set, is also written to a file
// next to the routes file, as with GATEWAY_LOG_LEVEL=debug and stderr
// redirected into the routes file's directory.
type dirLog struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	file *os.File
}

func (d *dirLog) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.buf.Write(p)
	if d.file != nil {
		return d.file.Write(p)
	}
	return len(p), nil
}

func (d *dirLog) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.buf.String()
}

// TestWatchIgnoresOtherFilesInTheDirectory: with the debug log written into
// the routes file's directory, a change of another file there neither
// reloads nor logs (before, each debug line about a change was a change,
// and the log fed itself without end, postponing every reload); a change of
// the routes file still reloads.
func TestWatchIgnoresOtherFilesInTheDirectory(t *testing.T) {
	logs := &dirLog{}
	g, write := startReloadable(t, setup{log: logs})
	if err := g.Reload(server.TriggerSignal); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(g.Config.RoutesFile)
	f, err := os.Create(filepath.Join(dir, "gateway.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	logs.mu.Lock()
	logs.file = f
	logs.mu.Unlock()
	stop := g.WatchConfig(nil)
	defer stop()

	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not routes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write(reloadRoutes[2])
	eventually(t, 10*time.Second, "the routes file change reloaded", func() (bool, string) {
		return g.ConfigStatus().Reloads.Success >= 2, fmt.Sprintf("%d log lines about changes", strings.Count(logs.String(), "changed"))
	})
	stop()
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "changed") && (strings.Contains(line, "gateway.log") || strings.Contains(line, "notes.txt")) {
			t.Fatalf("a change of another file was logged: %s", line)
		}
	}
	if cs := g.ConfigStatus(); cs.Reloads.Success != 2 || cs.Reloads.Error != 0 {
		t.Fatalf("reloads %+v, want the one of the routes file", cs.Reloads)
	}
}

// TestReloadClearsErrorWhenFileRestored: after a failed reload, putting
// back the file in service clears last_error in /admin/config and logs
// that it did, whether a file event or SIGHUP finds it; before, last_error
// stayed newer than loaded_at and read as a failure still standing.
func TestReloadClearsErrorWhenFileRestored(t *testing.T) {
	for _, trigger := range []string{server.TriggerFile, server.TriggerSignal} {
		t.Run(trigger, func(t *testing.T) {
			var logs syncBuffer
			g, write := startReloadable(t, setup{log: &logs})
			if err := g.Reload(server.TriggerSignal); err != nil {
				t.Fatal(err)
			}
			write(reloadRoutes[0] + "  - { name: bad }\n")
			if err := g.Reload(trigger); err == nil {
				t.Fatal("the invalid file reloaded")
			}
			if g.ConfigStatus().LastError == nil {
				t.Fatal("no last_error after the failure")
			}
			write(reloadRoutes[0])
			if err := g.Reload(trigger); err != nil {
				t.Fatal(err)
			}
			cs := g.ConfigStatus()
			if cs.LastError != nil || cs.Reloads.Success != 1 || cs.Reloads.Error != 1 {
				t.Fatalf("after the restore: %+v (last_error %+v)", cs, cs.LastError)
			}
			if n := strings.Count(logs.String(), "last reload error cleared"); n != 1 {
				t.Fatalf("the clearing was logged %d times, want once:\n%s", n, logs.String())
			}
			// The next check of the same bytes is a plain no-op again.
			if err := g.Reload(trigger); err != nil || strings.Count(logs.String(), "last reload error cleared") != 1 {
				t.Fatalf("a further check: %v", err)
			}
		})
	}
}

// TestReloadRetiredClientsBounded: reloads that each remove a provider (and
// change the other's connect settings) do not grow the list of retired
// provider clients: a client no plan references any more leaves it at the
// next reload. What the last few reloads retired may still be reachable
// (5 of them in this run), so the bound is a small constant, far under the
// 180 clients the reloads retire.
func TestReloadRetiredClientsBounded(t *testing.T) {
	g, write := startReloadable(t, setup{})
	const reloads, bound = 120, 8
	for i := range reloads {
		write(reloadRoutes[1+i%2]) // two providers, then one: backup removed
		if err := g.Reload(server.TriggerSignal); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		if resp, body := g.post(t, chatBody(i%4 == 0)); resp.StatusCode != http.StatusOK {
			t.Fatalf("reload %d: %d %s", i, resp.StatusCode, body)
		}
		if i%10 == 9 {
			runtime.GC() // collects the retired clients no plan holds
		}
	}
	runtime.GC()
	write(reloadRoutes[1])
	if err := g.Reload(server.TriggerSignal); err != nil {
		t.Fatal(err)
	}
	if n := g.RetiredClients(); n > bound {
		t.Fatalf("%d retired clients listed after %d reloads, want at most %d", n, reloads+1, bound)
	}
	if resp, body := g.post(t, chatBody(true)); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the reloads: %d %s", resp.StatusCode, body)
	}
}
