package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/config"
)

// TestTextLogsHaveNoColourOffTerminal: text logs sent to a file, a pipe or a
// buffer (a log collector, `2>file`, `| tee`) carry no ANSI escapes, which
// would otherwise litter every line with unreadable bytes.
func TestTextLogsHaveNoColourOffTerminal(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	cfg := config.Config{LogFormat: "text", LogLevel: "info"}
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (w io.Writer, read func() string)
	}{
		{"buffer", func(t *testing.T) (io.Writer, func() string) {
			var b bytes.Buffer
			return &b, b.String
		}},
		{"file", func(t *testing.T) (io.Writer, func() string) {
			f, err := os.Create(filepath.Join(t.TempDir(), "gateway.log"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f, func() string {
				b, err := os.ReadFile(f.Name())
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
		}},
		{"pipe", func(t *testing.T) (io.Writer, func() string) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return w, func() string {
				w.Close()
				b, err := io.ReadAll(r)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, read := tc.open(t)
			log := newLogger(cfg, w)
			log.Info("gateway listening", "addr", "127.0.0.1:8080")
			log.Warn("records are disabled")
			log.Error("gateway stopped", "err", "boom")
			out := read()
			if strings.ContainsRune(out, '\x1b') {
				t.Fatalf("ANSI escapes in text logs written to a %s:\n%q", tc.name, out)
			}
			if !strings.Contains(out, "gateway listening") || !strings.Contains(out, "addr=127.0.0.1:8080") {
				t.Fatalf("log output missing the line or its attribute:\n%q", out)
			}
		})
	}
}

// TestColourfulOnlyOnTerminal: colours are for a person at a terminal, and
// NO_COLOR turns them off even there.
func TestColourfulOnlyOnTerminal(t *testing.T) {
	tty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		// A container without /dev/ptmx cannot show a terminal; CI's
		// machine has one, and there the test must run.
		if os.Getenv("CI") != "" {
			t.Fatalf("no pseudo-terminal to test with: %v", err)
		}
		t.Skipf("no pseudo-terminal to test with (%v); mount devpts to run it", err)
	}
	defer tty.Close()
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		name    string
		w       io.Writer
		noColor string
		want    bool
	}{
		{"terminal", tty, "", true},
		{"terminal with NO_COLOR", tty, "1", false},
		{"regular file", f, "", false},
		{"buffer", &bytes.Buffer{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NO_COLOR", tc.noColor)
			if got := colorful(tc.w); got != tc.want {
				t.Errorf("colorful = %v, want %v", got, tc.want)
			}
		})
	}
}
