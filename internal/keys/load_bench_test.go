package keys

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkFullReload100k is a full reload of 100,000 keys from Postgres
// (the query, the scan, the set's build), the cost every
// GATEWAY_KEYS_REFRESH and every reconnection pays when the table changed
// (docs/keys.md).
func BenchmarkFullReload100k(b *testing.B) {
	ctx := context.Background()
	conn := seed100k(b)
	c := NewCache(func(k *Key) any { return k.Name })
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.load(ctx, conn, 100_000); err != nil || c.Current().Len() != 100_000 {
			b.Fatalf("%d keys, %v", c.Current().Len(), err)
		}
	}
}

// BenchmarkFullReload100kUnchanged is what a full reload of 100,000 keys
// costs when the table has not changed: reading its mark.
func BenchmarkFullReload100kUnchanged(b *testing.B) {
	ctx := context.Background()
	conn := seed100k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, n, err := tableMark(ctx, conn); err != nil || n != 100_000 {
			b.Fatal(n, err)
		}
	}
}

// seed100k is a connection to a fresh database of 100,000 keys.
func seed100k(b *testing.B) *pgx.Conn {
	const n = 100_000
	ctx := context.Background()
	dsn := pgMigrated(b)
	conn, err := pgx.Connect(ctx, dsn.Reveal())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close(ctx) })
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{fmt.Sprintf("0190c0de-0000-7000-8000-%012d", i), fmt.Sprintf("client-%06d", i),
			fmt.Sprintf("team-%d", i%50), DigestHex(fmt.Sprint("secret-", i)), "sk-gw-AbCd…wxYz",
			[]string{"gpt-4o*", "claude-*"}, 600, map[string]string{"owner": "ana"}}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"api_keys"},
		[]string{"id", "name", "team", "key_sha256", "hint", "models", "requests_per_minute", "metadata"},
		pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	return conn
}
