package mockupstream

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The benchmarks measure whole requests through loopback (client and server in this
// process), the way the gateway's benchmarks will use the mock: the mock's cost per
// request must stay well below the gateway's. Run with -cpu 1 for the one-core figure.

func BenchmarkNonStream(b *testing.B) {
	benchChat(b, []byte(chatBody), Behavior{Identity: "bench"})
}

func BenchmarkStream(b *testing.B) {
	benchChat(b, []byte(streamUsageBody), Behavior{Identity: "bench", Usage: true, Chunks: 16})
}

func benchChat(b *testing.B, body []byte, behavior Behavior) {
	s := New(behavior)
	ts := httptest.NewServer(s)
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()

	do := func(b *testing.B) {
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		// Reading to EOF returns the connection to the pool, as the gateway does.
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}

	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			do(b)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(4) // several connections per CPU, like a gateway under load
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				do(b)
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	})
}
