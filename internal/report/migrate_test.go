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

	column := func(name string) string {
		return "SELECT count(*) FROM information_schema.columns WHERE table_name = 'requests' AND column_name = '" + name + "'"
	}
	index := func(name string) string {
		return "SELECT count(*) FROM pg_indexes WHERE indexname = '" + name + "'"
	}
	table := func(name string) string {
		return "SELECT count(*) FROM pg_tables WHERE tablename = '" + name + "'"
	}
	candColumn := func(name string) string {
		return "SELECT count(*) FROM information_schema.columns WHERE table_name = 'request_candidates' AND column_name = '" + name + "'"
	}
	for _, q := range []string{column("route"), column("replica"), index("requests_created_at_id_idx"), index("request_candidates_attempted_idx"),
		candColumn("resumed_from"), column("cost_usd"), column("team"), candColumn("cost_usd"), index("requests_client_cost_idx"),
		index("requests_team_spend_idx"), table("api_keys"), table("admin_audit"), index("api_keys_live_name_idx"), column("trace_id"),
		column("cache"), column("saved_usd")} {
		if n := queryInt(t, dsn, q); n != 1 {
			t.Fatalf("after up: %s = %d, want 1", q, n)
		}
	}
	for _, name := range []string{"requests_created_at_idx", "requests_client_spend_idx", "requests_client_created_at_idx"} {
		if n := queryInt(t, dsn, index(name)); n != 0 {
			t.Errorf("after up: %s still there (00004 and 00007 replace it)", name)
		}
	}

	// down steps back one migration at a time: the cache columns, the trace id, the API keys' tables, the client index with the
	// cost (its two predecessors are back), the cost columns, resumed_from, the console indexes (and the
	// plain created_at index is back), the replica column, the route column...
	for _, step := range []struct {
		gone, kept []string
	}{
		{gone: []string{column("cache"), column("saved_usd")}, kept: []string{column("trace_id")}},
		{gone: []string{column("trace_id")}, kept: []string{table("api_keys")}},
		{gone: []string{table("api_keys"), table("admin_audit")}, kept: []string{index("requests_client_cost_idx")}},
		{gone: []string{index("requests_client_cost_idx")},
			kept: []string{index("requests_client_spend_idx"), index("requests_client_created_at_idx")}},
		{gone: []string{column("cost_usd"), column("team"), candColumn("cost_usd"), candColumn("usage_estimated"),
			index("requests_client_spend_idx"), index("requests_team_spend_idx")}, kept: []string{candColumn("resumed_from")}},
		{gone: []string{candColumn("resumed_from")}, kept: []string{index("requests_created_at_id_idx")}},
		{gone: []string{index("requests_created_at_id_idx"), index("requests_status_created_at_idx"),
			index("requests_model_created_at_idx"), index("requests_client_created_at_idx"),
			index("request_candidates_attempted_idx")},
			kept: []string{index("requests_created_at_idx"), column("replica")}},
		{gone: []string{column("replica")}, kept: []string{column("route")}},
		{gone: []string{column("route")}, kept: []string{index("requests_created_at_idx")}},
	} {
		out.Reset()
		if err := Migrate(ctx, secret.New(dsn), "down", &out); err != nil {
			t.Fatalf("down: %v", err)
		}
		for _, q := range step.gone {
			if n := queryInt(t, dsn, q); n != 0 {
				t.Errorf("after down (%s): %s = %d, want 0", strings.TrimSpace(out.String()), q, n)
			}
		}
		for _, q := range step.kept {
			if n := queryInt(t, dsn, q); n != 1 {
				t.Errorf("after down (%s): %s = %d, want 1", strings.TrimSpace(out.String()), q, n)
			}
		}
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM pg_tables WHERE tablename IN ('requests', 'request_candidates')"); n != 2 {
		t.Errorf("after the steps above: %d report tables, want 2", n)
	}
	// ...then the tables.
	out.Reset()
	if err := Migrate(ctx, secret.New(dsn), "down", &out); err != nil {
		t.Fatalf("second down: %v", err)
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM pg_tables WHERE tablename IN ('requests', 'request_candidates')"); n != 0 {
		t.Errorf("after one more down: %d report tables, want 0", n)
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
