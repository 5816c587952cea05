// Command gateway runs the LLM gateway.
//
//	gateway [serve]              run the server (default)
//	gateway check-config [file]  load env and routes file, print planned candidates
//	gateway migrate up|down|status
//
// main only wires packages together; behaviour lives in internal/.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"

	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/logsink"
	"github.com/llmgw/gateway/internal/report"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	cfg, warns, err := config.Load(nil)
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	for _, w := range warns {
		log.Warn("setting accepted with a fallback", "variable", w.Variable, "detail", w.Message)
	}
	switch cmd {
	case "serve":
		if err := serve(cfg, log); err != nil {
			log.Error("gateway stopped", "err", err)
			return 1
		}
		return 0
	case "check-config":
		return checkConfigCommand(cfg, args, stdout, stderr)
	case "migrate":
		if len(args) != 1 {
			fmt.Fprintln(stderr, "usage: gateway migrate up|down|status")
			return 2
		}
		if cfg.DatabaseURL.Empty() {
			fmt.Fprintln(stderr, "gateway: migrate needs GATEWAY_DATABASE_URL (or DATABASE_URL)")
			return 2
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := report.Migrate(ctx, cfg.DatabaseURL, args[0], stdout); err != nil {
			fmt.Fprintln(stderr, "gateway: migrate:", err)
			return 1
		}
		return 0
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, "usage: gateway [serve | check-config [file] | migrate up|down|status]")
		return 0
	default:
		fmt.Fprintf(stderr, "gateway: unknown command %q (want serve, check-config or migrate)\n", cmd)
		return 2
	}
}

// newLogger writes to w through a logsink, so that the access log can
// write a tick's lines at once.
func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel)))
	sink := logsink.NewWriter(w)
	var h slog.Handler
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: level})
	} else {
		h = tint.NewTextHandler(sink, &tint.Options{Level: level, TimeFormat: time.TimeOnly,
			NoColor: !colorful(w)})
	}
	return slog.New(logsink.NewHandler(h, sink))
}

// colorful reports whether text logs written to w may carry ANSI colours:
// only when w is a terminal, so that files, pipes and log collectors get plain
// text, and never when NO_COLOR is set (no-color.org). A character device is
// taken for a terminal; the only other ones a log goes to in practice, such as
// /dev/null, do not mind the escapes.
func colorful(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
