package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/server"
)

// fragmentMark is the first line of a YAML block in the docs that is
// deliberately not a whole routes file (providers without models, a model
// naming a provider shown elsewhere): "# fragment of a routes file".
const fragmentMark = "# fragment"

// yamlBlocks returns the ```yaml blocks of a Markdown file with the line
// each starts on.
func yamlBlocks(t *testing.T, path string) (blocks []string, lines []int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cur *strings.Builder
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = &strings.Builder{}
			lines = append(lines, i+2)
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	if cur != nil {
		t.Fatalf("%s: a ```yaml block is not closed", path)
	}
	return blocks, lines
}

var docVarRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// TestDocsYAMLBlocksAreValidRoutes: every ```yaml block of README.md and
// docs/*.md, and every file in examples/, is a routes file that passes the
// validation check-config and a reload run (server.CheckRoutes), with each
// ${VAR} it uses set, as a reader would set it. A block marked
// "# fragment" on its first line is a part of one: it must still be YAML
// that fits the routes format (no unknown or misspelt field).
func TestDocsYAMLBlocksAreValidRoutes(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{"../../README.md"}, docs...)
	cfg, _, err := config.Load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(where, src string) {
		for _, m := range docVarRef.FindAllStringSubmatch(src, -1) {
			t.Setenv(m[1], "sk-docs-"+strings.ToLower(m[1]))
		}
		if strings.HasPrefix(src, fragmentMark) {
			var r routes.Routes
			dec := yaml.NewDecoder(bytes.NewReader([]byte(src)))
			dec.KnownFields(true)
			if err := dec.Decode(&r); err != nil {
				t.Errorf("%s: the fragment does not fit the routes format: %v\n%s", where, err, src)
			}
			return
		}
		if _, err := server.CheckRoutes(cfg, where, []byte(src)); err != nil {
			t.Errorf("%s: %v (mark the block %q if it is a part of a file)\n%s", where, err, fragmentMark, src)
		}
	}
	checked := 0
	for _, doc := range docs {
		blocks, lines := yamlBlocks(t, doc)
		for i, src := range blocks {
			check(fmt.Sprintf("%s:%d", filepath.Base(doc), lines[i]), src)
			checked++
		}
	}
	examples, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples {
		b, err := os.ReadFile(ex)
		if err != nil {
			t.Fatal(err)
		}
		check(ex, string(b))
		checked++
	}
	if checked < 5 {
		t.Fatalf("only %d YAML blocks and examples found", checked)
	}
}

// TestDocsSayNothingOfTheBuildMachine: user docs describe the gateway, not
// the machine it was developed on.
func TestDocsSayNothingOfTheBuildMachine(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../../README.md", "../../deploy/README.md")
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, phrase := range []string{"Docker engine", "development machine has no"} {
			if strings.Contains(string(b), phrase) {
				t.Errorf("%s mentions %q", doc, phrase)
			}
		}
	}
}
