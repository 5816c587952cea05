package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// envTable reads the first table with the header "| variable | default |
// meaning |" in a doc: variable name -> default as written, "" for a
// default that is not a literal value (none, the host name). A row may
// name several variables as "`A` / `B`" with defaults "`a` / `b`".
func envTable(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	literal := regexp.MustCompile("^`([^`]*)`$")
	out := map[string]string{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| variable | default | meaning |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, " | ")
		if len(cells) < 3 {
			t.Fatalf("%s: row %q has no default", path, line)
		}
		names := strings.Split(strings.TrimPrefix(cells[0], "| "), " / ")
		defaults := strings.Split(cells[1], " / ")
		if len(defaults) != len(names) {
			defaults = make([]string, len(names)) // one "none" for all
		}
		for i, n := range names {
			m := name.FindStringSubmatch(n)
			if m == nil {
				t.Fatalf("%s: row %q names no variable", path, line)
			}
			def := ""
			if d := literal.FindStringSubmatch(strings.TrimSpace(defaults[i])); d != nil {
				def = d[1]
			}
			out[m[1]] = def
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no env table", path)
	}
	return out
}

// TestEnvTablesMatchConfig: the env tables of README.md and
// docs/architecture.md list exactly the variables Config reads (and the
// two hold-mode ones resolveHoldMode reads), each with its envDefault, so
// the docs cannot drift from the struct.
func TestEnvTablesMatchConfig(t *testing.T) {
	want := map[string]string{
		"GATEWAY_" + holdModeSuffix:     "first_body",
		"GATEWAY_" + holdResponseSuffix: "false",
	}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		if v := f.Tag.Get("env"); v != "" && v != "-" {
			want[v] = f.Tag.Get("envDefault")
		}
	}
	for _, doc := range []string{"../../README.md", "../../docs/architecture.md"} {
		got := envTable(t, doc)
		for v, def := range want {
			d, ok := got[v]
			switch {
			case !ok:
				t.Errorf("%s: the env table lacks %s (default %q)", doc, v, def)
			case d != def:
				t.Errorf("%s: %s's default is %q in the table, %q in Config", doc, v, d, def)
			}
		}
		for v := range got {
			if _, ok := want[v]; !ok {
				t.Errorf("%s: the env table lists %s, which Config does not read", doc, v)
			}
		}
	}
}
