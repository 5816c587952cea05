package config

import (
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/watchdog"
)

// TestDefaults protects the documented defaults of DESIGN section 3.
func TestDefaults(t *testing.T) {
	cfg, warns, err := Load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Fatalf("warnings = %v, want none", warns)
	}
	if cfg.ListenAddr != ":8080" || cfg.RoutesFile != "gateway.yaml" || cfg.ExecutionGateLimit != 256 ||
		cfg.QueueBudget != 250*time.Millisecond || cfg.FirstByteTimeout != 30*time.Second ||
		cfg.MaxRequestBytes != 8388608 || cfg.MaxPending != 4096 || !bool(cfg.AutoMigrate) ||
		cfg.HoldMode != watchdog.HoldFirstBody || cfg.ReadHeaderTimeout != 10*time.Second ||
		cfg.ReportRetention != 720*time.Hour || cfg.SpoolDir != "./data/spool" || cfg.GCMinHeap != 32<<20 ||
		cfg.CacheMaxBytes != 64<<20 {
		t.Fatalf("unexpected defaults: %+v", cfg)
	}
}

// TestMalformedNamesVariable: an operator must see which variable is wrong.
func TestMalformedNamesVariable(t *testing.T) {
	cases := map[string]string{
		"GATEWAY_UPSTREAM_EXECUTION_GATE_QUEUE_BUDGET":                "soon",
		"GATEWAY_UPSTREAM_EXECUTION_GATE_LIMIT":                       "-1",
		"GATEWAY_MAX_REQUEST_BYTES":                                   "8MB",
		"GATEWAY_GC_MIN_HEAP":                                         "32MB",
		"GATEWAY_CACHE_MAX_BYTES":                                     "64MB",
		"GATEWAY_AUTO_MIGRATE":                                        "maybe",
		"GATEWAY_STREAM_FIRST_BYTE_TIMEOUT":                           "0s",
		"GATEWAY_UPSTREAM_EXECUTION_GATE_HOLD_STREAM_RESPONSE":        "perhaps",
		"AETHER_GATEWAY_UPSTREAM_EXECUTION_GATE_HOLD_STREAM_RESPONSE": "perhaps",
	}
	for name, value := range cases {
		_, _, err := Load(map[string]string{name: value})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: err = %v, want one naming the variable", name, value, err)
		}
	}
}

// TestCacheMaxBytes: the cache's bound is written as the routes file's
// sizes are, and one that bounds nothing is refused at start.
func TestCacheMaxBytes(t *testing.T) {
	cfg, _, err := Load(map[string]string{"GATEWAY_CACHE_MAX_BYTES": "1MiB"})
	if err != nil || cfg.CacheMaxBytes != 1<<20 {
		t.Errorf("GATEWAY_CACHE_MAX_BYTES=1MiB: %d, %v; want 1048576", cfg.CacheMaxBytes, err)
	}
	if _, _, err := Load(map[string]string{"GATEWAY_CACHE_MAX_BYTES": "0"}); err == nil ||
		!strings.Contains(err.Error(), "GATEWAY_CACHE_MAX_BYTES must be positive") {
		t.Errorf("GATEWAY_CACHE_MAX_BYTES=0: err = %v, want it refused", err)
	}
}

func TestByteSizeAndBool(t *testing.T) {
	for in, want := range map[string]ByteSize{"1024": 1024, "8MiB": 8 << 20, "512 KiB": 512 << 10, "1GiB": 1 << 30} {
		var s ByteSize
		if err := s.UnmarshalText([]byte(in)); err != nil || s != want {
			t.Errorf("ByteSize(%q) = %d, %v; want %d", in, s, err, want)
		}
	}
	for in, want := range map[string]bool{"1": true, "TRUE": true, " yes ": true, "On": true, "0": false, "false": false, "NO": false, "off": false} {
		var b Bool
		if err := b.UnmarshalText([]byte(in)); err != nil || bool(b) != want {
			t.Errorf("Bool(%q) = %v, %v; want %v", in, b, err, want)
		}
	}
}

// TestHoldModeResolution covers every alias, both prefixes and their precedence.
func TestHoldModeResolution(t *testing.T) {
	const (
		mode   = "GATEWAY_UPSTREAM_EXECUTION_GATE_STREAM_HOLD_MODE"
		force  = "GATEWAY_UPSTREAM_EXECUTION_GATE_HOLD_STREAM_RESPONSE"
		amode  = "AETHER_GATEWAY_UPSTREAM_EXECUTION_GATE_STREAM_HOLD_MODE"
		aforce = "AETHER_GATEWAY_UPSTREAM_EXECUTION_GATE_HOLD_STREAM_RESPONSE"
	)
	tests := []struct {
		name string
		env  map[string]string
		want watchdog.HoldMode
		warn bool
	}{
		{"unset", nil, watchdog.HoldFirstBody, false},
		{"headers", map[string]string{mode: "headers"}, watchdog.HoldHeaders, false},
		{"header", map[string]string{mode: "header"}, watchdog.HoldHeaders, false},
		{"off", map[string]string{mode: "OFF"}, watchdog.HoldHeaders, false},
		{"none", map[string]string{mode: " none "}, watchdog.HoldHeaders, false},
		{"disabled", map[string]string{mode: "Disabled"}, watchdog.HoldHeaders, false},
		{"disable", map[string]string{mode: "disable"}, watchdog.HoldHeaders, false},
		{"zero", map[string]string{mode: "0"}, watchdog.HoldHeaders, false},
		{"response", map[string]string{mode: "response"}, watchdog.HoldResponse, false},
		{"full", map[string]string{mode: "FULL"}, watchdog.HoldResponse, false},
		{"body", map[string]string{mode: "body"}, watchdog.HoldResponse, false},
		{"stream", map[string]string{mode: "\tstream\n"}, watchdog.HoldResponse, false},
		{"one", map[string]string{mode: "1"}, watchdog.HoldResponse, false},
		{"first_body", map[string]string{mode: "First_Body"}, watchdog.HoldFirstBody, false},
		{"unknown warns", map[string]string{mode: "sometimes"}, watchdog.HoldFirstBody, true},
		{"aether mode", map[string]string{amode: "headers"}, watchdog.HoldHeaders, false},
		{"gateway wins over aether", map[string]string{mode: "response", amode: "headers"}, watchdog.HoldResponse, false},
		{"force true", map[string]string{mode: "headers", force: "yes"}, watchdog.HoldResponse, false},
		{"force false keeps mode", map[string]string{mode: "headers", force: "off"}, watchdog.HoldHeaders, false},
		{"aether force", map[string]string{mode: "headers", aforce: "true"}, watchdog.HoldResponse, false},
		{"gateway force false wins over aether true", map[string]string{force: "false", aforce: "true"}, watchdog.HoldFirstBody, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, warns, err := Load(env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.HoldMode != tt.want {
				t.Errorf("mode = %s, want %s", cfg.HoldMode, tt.want)
			}
			if (len(warns) > 0) != tt.warn {
				t.Errorf("warnings = %v, want warn=%v", warns, tt.warn)
			}
			if tt.warn && warns[0].Variable != mode {
				t.Errorf("warning names %q, want %q", warns[0].Variable, mode)
			}
		})
	}
}

func FuzzByteSize(f *testing.F) {
	for _, s := range []string{"8388608", "8MiB", " 1 KiB", "-1", "1GiB", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b ByteSize
		if err := b.UnmarshalText([]byte(s)); err == nil && b < 0 {
			t.Fatalf("%q parsed to negative %d", s, b)
		}
	})
}

func FuzzBool(f *testing.F) {
	for _, s := range []string{"yes", "OFF", " 1 ", "maybe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b Bool
		err := b.UnmarshalText([]byte(s))
		var again Bool
		if err == nil && again.UnmarshalText([]byte(s)) != nil {
			t.Fatal("not deterministic")
		}
	})
}

func FuzzDurationVariable(f *testing.F) {
	for _, s := range []string{"250ms", "30s", "1h2m", "soon", "-1s", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, _, err := Load(map[string]string{"GATEWAY_UPSTREAM_EXECUTION_GATE_QUEUE_BUDGET": s})
		if err == nil && cfg.QueueBudget <= 0 {
			t.Fatalf("%q accepted as non-positive budget %s", s, cfg.QueueBudget)
		}
		if err != nil && !strings.Contains(err.Error(), "GATEWAY_UPSTREAM_EXECUTION_GATE_QUEUE_BUDGET") {
			t.Fatalf("error does not name the variable: %v", err)
		}
	})
}
