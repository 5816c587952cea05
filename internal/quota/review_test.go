package quota

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestReviewPasswordNeverLeaks: whether Redis takes the URL's password,
// refuses it or is not there, neither the log (debug included) nor the
// errors New and Take return carry the password.
func TestReviewPasswordNeverLeaks(t *testing.T) {
	url := redisURL(t)
	opts, _ := redis.ParseURL(url)
	const pw = "pw-Zq81xLk-must-not-leak"
	var buf safeBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, u := range []string{
		"redis://:" + pw + "@" + opts.Addr + "/0",
		"redis://user:" + pw + "@" + opts.Addr + "/0",
		"redis://:" + pw + "@127.0.0.1:1/0", // nobody listening
	} {
		s, err := New(Options{URL: u, Replica: "a", TTL: 3 * time.Second, Namespace: namespace(t), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		s.Start(Hooks{})
		h, _, terr := s.Take(context.Background(), slots(1, "t"))
		s.Give(h)
		if terr != nil && strings.Contains(terr.Error(), pw) {
			t.Errorf("Take's error carries the password: %v", terr)
		}
		NewRates(s).Admit(context.Background(), "c", Limits{RequestsPerMinute: 1})
		s.Close()
	}
	if _, err := New(Options{URL: "redis://:" + pw + "@host:notaport/0"}); err == nil || strings.Contains(err.Error(), pw) {
		t.Errorf("New with a bad URL: %v", err)
	}
	if strings.Contains(buf.String(), pw) {
		t.Fatalf("the log carries the password:\n%s", buf.String())
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
