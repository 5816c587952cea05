package main

import (
	"bytes"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fixture = "testdata/bench-results.json"

// TestChartAndTable draws the fixture's chart offline and prints its table:
// the PNG decodes at the chart's size, and the table has a row per figure and
// names the target missed.
func TestChartAndTable(t *testing.T) {
	out := filepath.Join(t.TempDir(), "charts", "bench.png")
	var stdout bytes.Buffer
	if err := run(fixture, out, "", true, false, &stdout); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the chart is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1152 || b.Dy() != 480 {
		t.Errorf("chart is %dx%d px, want 1152x480", b.Dx(), b.Dy())
	}
	table := stdout.String()
	for _, row := range []string{
		"| scenario | figure | bare proxy | gateway | gateway / bare proxy |",
		"| open 500 rps | added latency p50 / p99 (ms) | 0.300 / 0.800 | 0.350 / 1.000 | 1.17x / 1.25x |",
		"| open 2000 rps | errors | 0 | 2 |  |",
		"| closed 64 conns | throughput (req/s) | 6000 | 7200 | 1.20x |",
		"| stream 1000/s | added first chunk p50 / p99 (ms) | 0.400 / 1.200 | 0.450 / 1.300 | 1.12x / 1.08x |",
		"| stream 500/s | CPU per request (µs), gateway + its Postgres | 360 | 400 + 22 | 1.17x |",
		"| 2000 open streams | peak RSS (MiB) | 127.5 | 146.6 | 1.15x |",
		"Targets met: 2 of 3. Not met:\n\n- zero errors (gateway requests; records dropped): missed (2 errors; 0 records dropped)\n",
	} {
		if !strings.Contains(table, row) {
			t.Errorf("table lacks %q:\n%s", row, table)
		}
	}
}

// TestRewriteDoc replaces only the text between the markers, and a second
// rewrite of the same run changes nothing.
func TestRewriteDoc(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "benchmarks.md")
	before, after := "# Benchmarks\n\nIntro.\n\n", "\n\n## What we tried\n\nStays.\n"
	if err := os.WriteFile(doc, []byte(before+beginMarker+"\nold table\n"+endMarker+after), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := run(fixture, filepath.Join(dir, "bench.png"), doc, false, false, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(doc)
	s := string(b)
	if !strings.HasPrefix(s, before+beginMarker) || !strings.HasSuffix(s, endMarker+after) {
		t.Errorf("text outside the markers changed:\n%s", s)
	}
	if strings.Contains(s, "old table") || strings.Count(s, beginMarker) != 1 ||
		!strings.Contains(s, "Measured 2026-12-01 22:10 UTC, mode full (a fixture).") ||
		!strings.Contains(s, "| 2000 open streams | peak RSS (MiB) |") {
		t.Errorf("section not rewritten with the run:\n%s", s)
	}
}

// TestRewriteDocRefusesPartialRuns: a quick run, or one of some phases only,
// does not replace the doc's full run without -force.
func TestRewriteDocRefusesPartialRuns(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"quick": func(s string) string { return strings.Replace(s, `"mode": "full"`, `"mode": "quick"`, 1) },
		"only": func(s string) string {
			return strings.Replace(s, `"mode": "full",`, `"mode": "full", "only": ["open"],`, 1)
		},
	} {
		in := filepath.Join(dir, name+".json")
		if err := os.WriteFile(in, []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
		doc := filepath.Join(dir, name+".md")
		orig := "x\n" + beginMarker + "\nkept\n" + endMarker + "\n"
		if err := os.WriteFile(doc, []byte(orig), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := run(in, filepath.Join(dir, "c.png"), doc, false, false, &bytes.Buffer{}); !errors.Is(err, errNotComplete) {
			t.Errorf("%s run: err %v, want errNotComplete", name, err)
		}
		if got, _ := os.ReadFile(doc); string(got) != orig {
			t.Errorf("%s run: doc changed to %q", name, got)
		}
		if err := run(in, filepath.Join(dir, "c.png"), doc, false, true, &bytes.Buffer{}); err != nil {
			t.Errorf("%s run with -force: %v", name, err)
		}
	}
}

// TestRewriteDocWithoutMarkers fails rather than append or guess.
func TestRewriteDocWithoutMarkers(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "benchmarks.md")
	if err := os.WriteFile(doc, []byte("# no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(fixture, filepath.Join(dir, "c.png"), doc, false, false, &bytes.Buffer{}); !errors.Is(err, errNoMarkers) {
		t.Errorf("err %v, want errNoMarkers", err)
	}
}

// TestRepoDocHasMarkers: make bench-doc can rewrite docs/benchmarks.md, and
// the doc shows the chart the target writes.
func TestRepoDocHasMarkers(t *testing.T) {
	b, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i || strings.Count(s, beginMarker) != 1 {
		t.Errorf("docs/benchmarks.md needs one %q followed by %q", beginMarker, endMarker)
	}
	if !strings.Contains(s, "](bench.png)") {
		t.Error("docs/benchmarks.md does not show bench.png")
	}
	if _, err := os.Stat("../../docs/bench.png"); err != nil {
		t.Error(err)
	}
}
