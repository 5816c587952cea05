package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The tracing phase's A/B: issue 34 holds the gateway with tracing off to
// 1.02x the build before tracing existed, so the phase runs that build as
// a fourth gateway in the same rounds. It is built from a git ref
// (BENCH_TRACE_BASE_REF; by default the first parent of the merge that
// brought tracing in) in a detached worktree of its own, removed after
// the build, or taken prebuilt from BENCH_TRACE_BASE_BIN.

// traceMergeSubject finds the merge that brought tracing in: the default
// baseline is its first parent, the main line just before it.
const traceMergeSubject = "Merge branch 'h/trace'"

// traceBaseBin returns the baseline gateway's binary and what it was built
// from, for the report.
func (b *bencher) traceBaseBin(ctx context.Context) (bin, from string, err error) {
	spec := b.s.tracePhase
	if spec.baseBin != "" {
		if _, err := os.Stat(spec.baseBin); err != nil {
			return "", "", fmt.Errorf("BENCH_TRACE_BASE_BIN: %w", err)
		}
		return spec.baseBin, spec.baseBin + " (BENCH_TRACE_BASE_BIN)", nil
	}
	ref := spec.baseRef
	if ref == "" {
		out, err := git(ctx, "", "log", "--merges", "--reverse", "--format=%H", "--grep", traceMergeSubject)
		if err != nil {
			return "", "", err
		}
		first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		if first == "" {
			return "", "", errors.New("no merge commit says " + traceMergeSubject + ": set BENCH_TRACE_BASE_REF")
		}
		ref = first + "^1"
	}
	commit, err := git(ctx, "", "rev-parse", "--verify", ref+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("baseline ref %q: %w", ref, err)
	}
	commit = strings.TrimSpace(commit)
	src := filepath.Join(b.st.tmp, "trace-base-src")
	if _, err := git(ctx, "", "worktree", "add", "--detach", src, commit); err != nil {
		return "", "", err
	}
	defer func() {
		// The worktree is only the build's: git forgets it with its files.
		if _, rerr := git(context.WithoutCancel(ctx), "", "worktree", "remove", "--force", src); rerr != nil {
			logf("tracing: removing the baseline's worktree: %v", rerr)
		}
	}()
	bin = filepath.Join(b.st.tmp, "gateway-trace-base")
	logf("tracing: building the baseline gateway at %s (%.12s)", ref, commit)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gateway")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build the baseline at %s: %w: %s", ref, err, bytes.TrimSpace(out))
	}
	return bin, fmt.Sprintf("%s (commit %.12s)", ref, commit), nil
}

// git runs git in dir (the current directory when "") and returns its
// output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}
