package cache

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestKey protects what makes two requests the same: key order and
// whitespace do not count, nor stream and stream_options at the top; a
// different temperature, message, model route, scope or client route does.
func TestKey(t *testing.T) {
	id := Identity{Route: "chat", Scope: "app-1", Model: "m"}
	base := `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5}`
	k0, err := NewKey(id, []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		id   Identity
		body string
		same bool
	}{
		{"reordered", id, `{"temperature":0.5,"messages":[{"content":"hi","role":"user"}],"model":"m"}`, true},
		{"whitespace", id, "{ \"model\" : \"m\",\n \"messages\":[ {\"role\":\"user\",\"content\":\"hi\"} ],\t\"temperature\":0.5 }", true},
		{"stream", id, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}],"temperature":0.5}`, true},
		{"escaped string", id, `{"model":"m","messages":[{"role":"user","content":"\u0068i"}],"temperature":0.5}`, true},
		{"temperature", id, `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.7}`, false},
		{"message", id, `{"model":"m","messages":[{"role":"user","content":"ho"}],"temperature":0.5}`, false},
		{"nested stream kept", id, `{"model":"m","messages":[{"role":"user","content":"hi","stream":true}],"temperature":0.5}`, false},
		{"other client", Identity{"chat", "app-2", "m"}, base, false},
		{"other client route", Identity{"messages", "app-1", "m"}, base, false},
		{"moved bytes", Identity{"chat", "app-1m", ""}, base, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := NewKey(tt.id, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if (k == k0) != tt.same {
				t.Errorf("same key = %v, want %v", k == k0, tt.same)
			}
		})
	}
	for _, bad := range []string{``, `[1]`, `{"a":1}{}`, `{"a":`, `"x"`} {
		if _, err := NewKey(id, []byte(bad)); err == nil {
			t.Errorf("NewKey(%q) = nil error, want one", bad)
		}
	}
}

// FuzzCanonical: the canonical form of any object is valid JSON and its
// own canonical form (canonicalizing twice changes nothing).
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":[1,{"d":null,"c":"\u00e9"}]}`, `{"stream":true}`, `{"a":1e400}`, `{"a":"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Canonical(b)
		if err != nil {
			return
		}
		c2, err := Canonical(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("Canonical(%q) = %q, again %q, %v", b, c, c2, err)
		}
	})
}

// TestMemoryTTLAndCompression: an entry is served until its expiry on the
// injected clock and not after; a large body comes back byte for byte.
func TestMemoryTTLAndCompression(t *testing.T) {
	now := time.Unix(1000, 0)
	m := NewMemory(1<<20, func() time.Time { return now })
	ctx := context.Background()
	big := []byte(strings.Repeat(`{"content":"hello world"}`, 1000))
	_ = m.Set(ctx, "k", Entry{Body: big, Stored: now, Expires: now.Add(time.Minute)})
	if m.Weight() >= uint64(len(big)) {
		t.Errorf("weight %d, want a compressed entry below %d", m.Weight(), len(big))
	}
	now = now.Add(59 * time.Second)
	e, ok, err := m.Get(ctx, "k")
	if !ok || err != nil || !bytes.Equal(e.Body, big) {
		t.Fatalf("Get at 59s = %v, %v, body equal %v; want the entry", ok, err, bytes.Equal(e.Body, big))
	}
	now = now.Add(time.Second)
	if _, ok, _ := m.Get(ctx, "k"); ok {
		t.Error("Get at 60s found the entry, want it expired")
	}
}

// TestMemoryBounded: ten times the bound in entries of 2-20 KiB leaves the
// store within its bound.
func TestMemoryBounded(t *testing.T) {
	const bound = 1 << 20
	m := NewMemory(bound, nil)
	ctx := context.Background()
	total := 0
	for i := 0; total < 10*bound; i++ {
		body := bytes.Repeat([]byte{byte(i)}, 2048+(i*7919)%(18<<10))
		for j := range body {
			body[j] ^= byte(j * 31) // little to gain from gzip
		}
		_ = m.Set(ctx, Key(strings.Repeat("k", i%7)+string(rune(i))), Entry{Body: body, Expires: time.Now().Add(time.Hour)})
		total += len(body)
	}
	if w := m.Weight(); w > bound {
		t.Errorf("weight %d after %d bytes set, want at most %d", w, total, bound)
	}
}

// TestFlights: of 20 concurrent joins one leads; the others get its answer
// when it has one, and go their own way when it has none or their own
// context ends first, without waiting for the leader.
func TestFlights(t *testing.T) {
	for _, leaderOK := range []bool{true, false} {
		var fs Flights
		lead, _, _ := fs.Join(context.Background(), "k")
		if lead == nil {
			t.Fatal("first Join did not lead")
		}
		var wg sync.WaitGroup
		got := make(chan bool, 19)
		for range 19 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, e, ok := fs.Join(context.Background(), "k")
				if l != nil {
					t.Error("a second leader")
					l.Done(Entry{}, false)
				}
				got <- ok && string(e.Body) == "answer"
			}()
		}
		// A waiter whose deadline passes leaves before the leader is done.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		if l, _, ok := fs.Join(ctx, "k"); l != nil || ok {
			t.Errorf("timed-out waiter: lead %v ok %v, want neither", l != nil, ok)
		}
		cancel()
		time.Sleep(20 * time.Millisecond) // let the 19 reach their wait
		lead.Done(Entry{Body: []byte("answer")}, leaderOK)
		wg.Wait()
		close(got)
		for ok := range got {
			if ok != leaderOK {
				t.Errorf("waiter served %v, want %v", ok, leaderOK)
			}
		}
		if l, _, _ := fs.Join(context.Background(), "k"); l == nil {
			t.Error("a Join after Done did not lead")
		} else {
			l.Done(Entry{}, false)
		}
	}
}
