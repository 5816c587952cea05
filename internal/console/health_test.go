package console

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHealthCooldownColumn protects the health table's cooldown column
// (issue 23): a probing target whose cooldown ended says what it waits for,
// never a past cooldown as "N s ago"; a cooling one says when it ends. The
// module runs in Node.js, the console's own code, not a copy.
func TestHealthCooldownColumn(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node missing under CI: %v", err)
		}
		t.Skip("needs Node.js: apt-get install nodejs")
	}
	const script = `
import { healthCooldown } from './overview.js';
const past = '2020-01-01T00:00:00Z', soon = new Date(Date.now() + 4500).toISOString();
for (const t of [
  { state: 'probing', probe_in_flight: false, cooldown_until: past },
  { state: 'probing', probe_in_flight: true, cooldown_until: past },
  { state: 'cooling', probe_in_flight: false, cooldown_until: soon },
  { state: 'healthy', probe_in_flight: false, cooldown_until: null },
]) console.log(healthCooldown(t));
`
	cmd := exec.Command(node, "--input-type=module", "-e", script)
	cmd.Dir = "static"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"over · the next request probes", "over · probe out", "(in ", "–"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) || strings.Contains(got[i], "ago") {
			t.Errorf("row %d: %q, want it to say %q", i, got[i], want[i])
		}
	}
}
