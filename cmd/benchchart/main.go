// Command benchchart turns the results `make bench` writes (cmd/bench's
// BENCH_JSON, by default data/bench-results.json) into the chart and the
// results table of docs/benchmarks.md: the latency the gateway and the bare
// proxy add over direct at each open-loop rate, and the time they add to the
// first chunk at each stream rate.
//
//	benchchart -in data/bench-results.json -out data/bench.png -table
//	benchchart -in data/bench-results.json -out docs/bench.png -doc docs/benchmarks.md
//
// -table prints the markdown table; -doc replaces the text between the doc's
// bench-results markers with it, and refuses a quick or partial (BENCH_ONLY)
// run unless -force, so the committed chart and table are a full run's.
// Everything renders offline: gonum/plot carries its fonts.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/llmgw/gateway/cmd/bench/results"
)

// The doc's generated section lies between these lines.
const (
	beginMarker = "<!-- bench-results:begin (written by `make bench-doc`; do not edit by hand) -->"
	endMarker   = "<!-- bench-results:end -->"
)

// errNotComplete: -doc was given a quick or partial run.
var errNotComplete = errors.New("benchchart: not a full run of every phase (BENCH_QUICK or BENCH_ONLY); the doc shows full runs only (-force to write it anyway)")

// errNoMarkers: the doc has no generated section to replace.
var errNoMarkers = errors.New("benchchart: the doc has no bench-results markers")

func main() {
	in := flag.String("in", "data/bench-results.json", "the results cmd/bench wrote (BENCH_JSON)")
	out := flag.String("out", "data/bench.png", "the chart to write (PNG)")
	table := flag.Bool("table", false, "print the markdown results table")
	doc := flag.String("doc", "", "rewrite the results section of this markdown file")
	force := flag.Bool("force", false, "with -doc: accept a quick or partial run")
	flag.Parse()
	if err := run(*in, *out, *doc, *table, *force, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(in, out, doc string, table, force bool, stdout io.Writer) error {
	f, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("benchchart: %w (run make bench first)", err)
	}
	res, err := results.Decode(f)
	f.Close()
	if err != nil {
		return err
	}
	if doc != "" && !res.Complete() && !force {
		return errNotComplete
	}
	var png bytes.Buffer
	if err := drawChart(&png, res); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out, png.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benchchart: chart in %s\n", out)
	if table {
		results.WriteTable(stdout, res)
	}
	if doc != "" {
		if err := rewriteDoc(doc, res); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "benchchart: results section of %s rewritten\n", doc)
	}
	return nil
}

// section is the doc's generated text: where and how the run was measured,
// then the table.
func section(res *results.Run) string {
	var b strings.Builder
	b.WriteString(beginMarker + "\n\n")
	for _, h := range res.Header {
		b.WriteString(h + "\n")
	}
	b.WriteString("\n")
	results.WriteTable(&b, res)
	b.WriteString("\n" + endMarker)
	return b.String()
}

// rewriteDoc replaces the text between the markers of the doc at path.
func rewriteDoc(path string, res *results.Run) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i {
		return fmt.Errorf("%w: %s needs %q and %q", errNoMarkers, path, beginMarker, endMarker)
	}
	s = s[:i] + section(res) + s[j+len(endMarker):]
	return os.WriteFile(path, []byte(s), 0o644)
}
