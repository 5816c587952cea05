package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeWithoutRoutesFileSaysWhereItLooked: `gateway serve` without a
// routes file exits 1 naming the absolute path it looked at, whether the
// default applied, and how to start one; before, it said only
// "open gateway.yaml: no such file or directory".
func TestServeWithoutRoutesFileSaysWhereItLooked(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("GATEWAY_CONFIG", "")
	os.Unsetenv("GATEWAY_CONFIG") // t.Setenv restores it after the test
	t.Setenv("GATEWAY_SPOOL_DIR", filepath.Join(dir, "spool"))
	var out, errb bytes.Buffer
	if code := run([]string{"serve"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, errb.String())
	}
	for _, want := range []string{
		"no such file or directory",
		"looked for " + filepath.Join(dir, "gateway.yaml"),
		"GATEWAY_CONFIG is unset",
		"cp examples/openai.yaml gateway.yaml",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
}

// TestMakeRunWithoutRoutesFileStartsNothing: scripts/run.sh (make run)
// without a routes file exits 1 with the three-line recipe before it
// starts anything; before, it started the Postgres under ./data/pg, then
// the gateway failed and left that Postgres running.
func TestMakeRunWithoutRoutesFileStartsNothing(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	_, pgBefore := os.Stat(filepath.Join(root, "data", "pg", "postmaster.pid"))
	cmd := exec.Command(bash, filepath.Join(root, "scripts", "run.sh"))
	cmd.Env = append(os.Environ(), "GATEWAY_CONFIG="+filepath.Join(t.TempDir(), "missing.yaml"),
		"GATEWAY_DATABASE_URL=", "DATABASE_URL=")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("run.sh: %v, want exit 1; stderr:\n%s", err, errb.String())
	}
	for _, want := range []string{"no routes file at", "cp examples/openai.yaml gateway.yaml", "export OPENAI_API_KEY=", "make run"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if strings.Contains(errb.String(), "pg-local") {
		t.Errorf("run.sh started Postgres without a routes file:\n%s", errb.String())
	}
	if _, pgAfter := os.Stat(filepath.Join(root, "data", "pg", "postmaster.pid")); pgBefore != nil && pgAfter == nil {
		t.Errorf("run.sh left a Postgres running under ./data/pg")
	}
}
