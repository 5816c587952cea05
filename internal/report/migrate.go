package report

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/llmgw/gateway/internal/secret"
	"github.com/llmgw/gateway/migrations"
)

// Migrate runs a goose command over the embedded migrations: "up" applies all
// pending ones, "down" rolls back the latest, "status" lists them. Output for an
// operator goes to out. Concurrent runs (several replicas starting with
// AutoMigrate) serialise on a Postgres advisory lock.
func Migrate(ctx context.Context, databaseURL secret.String, command string, out io.Writer) error {
	switch command {
	case "up", "down", "status":
	default:
		return fmt.Errorf("report: unknown migrate command %q (want up, down or status)", command)
	}
	cfg, err := pgx.ParseConfig(databaseURL.Reveal())
	if err != nil {
		return fmt.Errorf("report: parse database url: %w", err)
	}
	p, err := newMigrationProvider(stdlib.OpenDB(*cfg))
	if err != nil {
		return err
	}
	defer p.Close()

	switch command {
	case "up":
		results, err := p.Up(ctx)
		for _, r := range results {
			fmt.Fprintln(out, r)
		}
		if err != nil {
			return fmt.Errorf("report: migrate up: %w", err)
		}
		if len(results) == 0 {
			fmt.Fprintln(out, "no pending migrations")
		}
	case "down":
		r, err := p.Down(ctx)
		if errors.Is(err, goose.ErrNoNextVersion) {
			fmt.Fprintln(out, "no migration to roll back")
			return nil
		}
		if err != nil {
			return fmt.Errorf("report: migrate down: %w", err)
		}
		fmt.Fprintln(out, r)
	case "status":
		statuses, err := p.Status(ctx)
		if err != nil {
			return fmt.Errorf("report: migrate status: %w", err)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tSTATE\tAPPLIED AT\tSOURCE")
		for _, s := range statuses {
			applied := "-"
			if !s.AppliedAt.IsZero() {
				applied = s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, applied, s.Source.Path)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("report: migrate status: %w", err)
		}
	}
	return nil
}

// migrateUp is the writer's AutoMigrate step: quiet unless something is applied.
func migrateUp(ctx context.Context, cfg *pgx.ConnConfig, log *slog.Logger) error {
	p, err := newMigrationProvider(stdlib.OpenDB(*cfg))
	if err != nil {
		return err
	}
	defer p.Close()
	results, err := p.Up(ctx)
	for _, r := range results {
		log.Info("report migration applied", "migration", r.String())
	}
	return err
}

// newMigrationProvider wraps db (which the provider's Close closes) in a goose
// provider over migrations.FS that does not touch goose's global state.
func newMigrationProvider(db *sql.DB) (*goose.Provider, error) {
	// Retry the advisory lock every second for up to two minutes: another
	// replica may be migrating right now.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 120))
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("report: migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSessionLocker(locker),
	)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("report: migration provider: %w", err)
	}
	return p, nil
}
