package report

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/secret"
)

// TestMigrateUpDownStatus protects `gateway migrate`: up creates the tables, status
// reports the state, down removes them, and repeating up or down is harmless.
func TestMigrateUpDownStatus(t *testing.T) {
	ctx := context.Background()
	dsn := migratedURL(t) // runs "up" once

	var out bytes.Buffer
	if err := Migrate(ctx, secret.New(dsn), "up", &out); err != nil {
		t.Fatalf("second up: %v", err)
	}
	if !strings.Contains(out.String(), "no pending migrations") {
		t.Errorf("second up printed %q, want it to say nothing was pending", out.String())
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM pg_tables WHERE tablename IN ('requests', 'request_candidates')"); n != 2 {
		t.Fatalf("after up: %d report tables, want 2", n)
	}

	out.Reset()
	if err := Migrate(ctx, secret.New(dsn), "status", &out); err != nil {
		t.Fatalf("status: %v", err)
	}
	if !strings.Contains(out.String(), "00001_init.sql") || !strings.Contains(out.String(), "applied") {
		t.Errorf("status printed %q, want 00001_init.sql applied", out.String())
	}

	routeColumn := "SELECT count(*) FROM information_schema.columns WHERE table_name = 'requests' AND column_name = 'route'"
	if n := queryInt(t, dsn, routeColumn); n != 1 {
		t.Fatalf("after up: requests.route columns %d, want 1", n)
	}

	// down steps back one migration at a time: first the route column...
	out.Reset()
	if err := Migrate(ctx, secret.New(dsn), "down", &out); err != nil {
		t.Fatalf("down: %v", err)
	}
	if n := queryInt(t, dsn, routeColumn); n != 0 {
		t.Errorf("after one down: requests.route still there")
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM pg_tables WHERE tablename IN ('requests', 'request_candidates')"); n != 2 {
		t.Errorf("after one down: %d report tables, want 2", n)
	}
	// ...then the tables.
	out.Reset()
	if err := Migrate(ctx, secret.New(dsn), "down", &out); err != nil {
		t.Fatalf("second down: %v", err)
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM pg_tables WHERE tablename IN ('requests', 'request_candidates')"); n != 0 {
		t.Errorf("after two downs: %d report tables, want 0", n)
	}
	out.Reset()
	if err := Migrate(ctx, secret.New(dsn), "down", &out); err != nil {
		t.Fatalf("down at version 0: %v", err)
	}
	out.Reset()
	if err := Migrate(ctx, secret.New(dsn), "status", &out); err != nil {
		t.Fatalf("status: %v", err)
	}
	if !strings.Contains(out.String(), "pending") {
		t.Errorf("status after down printed %q, want the migration pending", out.String())
	}

	if err := Migrate(ctx, secret.New(dsn), "sideways", &out); err == nil {
		t.Error("unknown command: got nil error")
	}
}
