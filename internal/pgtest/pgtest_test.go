package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestDatabaseURLFreshAndDropped protects the isolation contract: each call gets
// its own empty database, and it is gone once the test that asked for it ends.
func TestDatabaseURLFreshAndDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var names []string
	t.Run("child", func(t *testing.T) {
		for range 2 {
			conn, err := pgx.Connect(ctx, DatabaseURL(t))
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			var name string
			var tables int
			err = conn.QueryRow(ctx, `SELECT current_database(),
				(SELECT count(*) FROM pg_tables WHERE schemaname = 'public')`).Scan(&name, &tables)
			if err != nil {
				t.Fatalf("query: %v", err)
			}
			if tables != 0 {
				t.Errorf("database %s has %d tables, want an empty database", name, tables)
			}
			// Left open on purpose: the cleanup must drop it anyway.
			t.Cleanup(func() { conn.Close(context.Background()) })
			names = append(names, name)
		}
	})
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("databases %v, want two distinct ones", names)
	}
	admin, err := pgx.Connect(ctx, AdminURL(t))
	if err != nil {
		t.Fatalf("connect admin: %v", err)
	}
	defer admin.Close(context.Background())
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names).Scan(&left); err != nil {
		t.Fatalf("query: %v", err)
	}
	if left != 0 {
		t.Errorf("%d of %v still exist after the test ended, want 0", left, names)
	}
}

// TestWithDatabase covers both DSN forms the env variable may use.
func TestWithDatabase(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://u:p@h:5432/postgres?sslmode=disable", "postgres://u:p@h:5432/x?sslmode=disable"},
		{"postgresql://h/db", "postgresql://h/x"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname=x"},
	}
	for _, tt := range tests {
		got, err := withDatabase(tt.in, "x")
		if err != nil || got != tt.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestDatabaseName keeps generated names valid identifiers within 63 bytes.
func TestDatabaseName(t *testing.T) {
	long := "TestSomething/with spaces/and-a-very-long-subtest-name-that-goes-on-and-on"
	a, b := databaseName(long), databaseName(long)
	if a == b {
		t.Errorf("two names for the same test are equal: %q", a)
	}
	if len(a) > 63 {
		t.Errorf("name %q is %d bytes, want at most 63", a, len(a))
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			t.Fatalf("name %q contains %q", a, r)
		}
	}
}
