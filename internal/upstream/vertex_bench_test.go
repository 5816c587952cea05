package upstream

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// BenchmarkVertexTokenReuse: a vertex attempt's access token while the
// cached one is fresh, as Client.Send asks for it: served without a
// fetch (the mock's token endpoint is called once, before the loop). The
// target is 20µs.
func BenchmarkVertexTokenReuse(b *testing.B) {
	m := mockupstream.New(mockupstream.Behavior{})
	srv := httptest.NewServer(m)
	defer srv.Close()
	key, _, err := m.VertexServiceAccount(srv.URL+mockupstream.PathToken, nil)
	if err != nil {
		b.Fatal(err)
	}
	ts, err := NewGoogleTokens(key, 0)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := ts.Token(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ts.Token(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if n := m.TokenCalls(); n != 1 {
		b.Fatalf("the token endpoint was called %d times, want once", n)
	}
}
