// Package pgtest gives tests a real Postgres: every call to DatabaseURL creates
// a fresh, uniquely named database and drops it when the test ends.
//
// The server is found once per test process: GATEWAY_TEST_DATABASE_URL when
// set, else postgres@127.0.0.1:5432 when it answers, else a throwaway cluster
// started with scripts/pg-local.sh. When none can be had the test fails with the
// reasons; it never skips, because CI must not go green on a skipped Postgres
// test.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDatabaseURL names the variable that points tests at a specific server. Its
// DSN must allow CREATE DATABASE.
const EnvDatabaseURL = "GATEWAY_TEST_DATABASE_URL"

// DefaultURL is the server tried when EnvDatabaseURL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

var (
	// probeURL is DefaultURL; a variable so the fallback path can be exercised.
	probeURL = DefaultURL

	discoverOnce sync.Once
	adminURL     string
	discoverErr  error
)

// AdminURL returns the DSN of the server's maintenance database, discovering
// (and if need be starting) the server on first use.
func AdminURL(t testing.TB) string {
	t.Helper()
	discoverOnce.Do(func() { adminURL, discoverErr = discover() })
	if discoverErr != nil {
		t.Fatalf("pgtest: no Postgres server for this test: %v", discoverErr)
	}
	return adminURL
}

// DatabaseURL returns the DSN of a new empty database that exists for the rest
// of the calling test and is dropped in t.Cleanup (connections still open by
// then are terminated).
func DatabaseURL(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adminExec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// WITH (FORCE) (Postgres 13+) terminates sessions a test leaked, which
		// would otherwise make the drop fail.
		sql := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"
		if err := adminExec(ctx, admin, sql); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// databaseName derives a valid, unique identifier (at most 63 bytes) from the
// test name, so a leaked database still says which test made it.
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	stem := b.String()
	if len(stem) > 40 {
		stem = stem[:40]
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return "gwtest_" + stem + "_" + hex.EncodeToString(suffix[:])
}

// withDatabase points a DSN (URL or keyword/value form) at another database.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse admin url: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// Keyword/value form: a later keyword overrides an earlier one.
	return dsn + " dbname=" + name, nil
}

func adminExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func ping(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// discover finds a server in the documented order and returns its admin DSN, or
// an error naming every place it looked.
func discover() (string, error) {
	if dsn := os.Getenv(EnvDatabaseURL); dsn != "" {
		if err := ping(dsn); err != nil {
			return "", fmt.Errorf("%s is set but that server does not answer: %w", EnvDatabaseURL, err)
		}
		return dsn, nil
	}
	defaultErr := ping(probeURL)
	if defaultErr == nil {
		return probeURL, nil
	}
	dsn, localErr := startLocal()
	if localErr != nil {
		return "", fmt.Errorf("%s is unset; 127.0.0.1:5432 does not answer (%v); "+
			"scripts/pg-local.sh start failed: %w", EnvDatabaseURL, defaultErr, localErr)
	}
	return dsn, nil
}

// startLocal runs scripts/pg-local.sh start from the repository root and returns
// the DSN it prints last.
func startLocal() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	// Generous: the script may have to apt-get install the server first.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "pg-local.sh"), "start")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w; stderr: %s", err, strings.TrimSpace(lastLines(stderr.String(), 10)))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dsn := strings.TrimSpace(lines[len(lines)-1])
	if dsn == "" {
		return "", errors.New("pg-local.sh printed no DSN")
	}
	if err := ping(dsn); err != nil {
		return "", fmt.Errorf("pg-local.sh started %s but it does not answer: %w", dsn, err)
	}
	return dsn, nil
}

// repoRoot walks up from the working directory (a test runs in its package
// directory) to the directory holding go.mod and scripts/pg-local.sh.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "scripts", "pg-local.sh")); err != nil {
				return "", fmt.Errorf("found %s/go.mod but no scripts/pg-local.sh", dir)
			}
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
