package pricing

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCost(t *testing.T) {
	gpt4o := Price{Input: 2.5, Output: 10, CachedInput: 1.25, CacheWrite: 2.5}
	sonnet := Price{Input: 3, Output: 15, CachedInput: 0.3, CacheWrite: 3.75}
	for _, tc := range []struct {
		name string
		p    Price
		u    Usage
		want float64
	}{
		{"cached billed once at its price", gpt4o, Usage{Input: 1000, CachedInput: 400, Output: 200}, (600*2.5 + 400*1.25 + 200*10) / 1e6},
		{"reasoning inside output, not added", gpt4o, Usage{Input: 1000, CachedInput: 400, Output: 200, Reasoning: 50}, (600*2.5 + 400*1.25 + 200*10) / 1e6},
		{"cache write", sonnet, Usage{Input: 2200, CachedInput: 2000, CacheWrite: 100, Output: 50}, (100*3 + 2000*0.3 + 100*3.75 + 50*15) / 1e6},
		{"request fee", Price{Input: 1, Output: 1, Request: 0.01}, Usage{}, 0.01},
		{"negative counts are 0", gpt4o, Usage{Input: -5, Output: -1, CachedInput: -9}, 0},
		{"cached beyond input clamped", gpt4o, Usage{Input: 10, CachedInput: 1000}, 10 * 1.25 / 1e6},
		{"absurd counts clamped", gpt4o, Usage{Input: 1e15, Output: 1e15}, (1e9*2.5 + 1e9*10) / 1e6},
		{"NaN and negative prices are 0", Price{Input: math.NaN(), Output: -3, Request: math.Inf(1)}, Usage{Input: 10, Output: 10}, MaxRequest},
	} {
		got := tc.p.Cost(tc.u)
		if math.Abs(got-tc.want) > 1e-12 || got < 0 || math.IsNaN(got) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMicros(t *testing.T) {
	for in, want := range map[float64]int64{0: 0, -1: 0, 0.004: 4000, 0.0000011: 2, 1: 1_000_000, math.NaN(): 0} {
		if got := Micros(in); got != want {
			t.Errorf("Micros(%v) = %d, want %d", in, got, want)
		}
	}
	if Micros(math.Inf(1)) <= 0 {
		t.Errorf("Micros(+Inf) must clamp, not wrap")
	}
}

func TestLookup(t *testing.T) {
	d := Default()
	for _, tc := range []struct {
		vendor, model string
		ok            bool
		input         float64
	}{
		{"openai", "gpt-4o", true, 2.5},
		{"openai", "gpt-4o-2024-08-06", true, 2.5},
		{"anthropic", "claude-3-5-haiku-20241022", true, 0.8},
		{"anthropic", "claude-sonnet-4-5@20250929", true, 3},
		{"bedrock", "anthropic.claude-3-5-sonnet-20241022-v2:0", true, 3},
		// Cross-region inference profiles bill as the model they route to.
		{"bedrock", "us.anthropic.claude-3-5-sonnet-20241022-v2:0", true, 3},
		{"bedrock", "global.anthropic.claude-sonnet-4-5-20250929-v1:0", true, 3},
		{"bedrock", "us-gov.anthropic.claude-3-5-sonnet-20241022-v2:0", true, 3},
		{"bedrock", "xx.anthropic.claude-3-5-sonnet-20241022-v2:0", false, 0},
		{"bedrock", "us.", false, 0},
		{"openai", "gpt-nonexistent", false, 0},
		{"anthropic", "gpt-4o", false, 0},
	} {
		p, ok := d.Lookup(tc.vendor, tc.model)
		if ok != tc.ok || p.Input != tc.input {
			t.Errorf("Lookup(%s, %s) = %v %v, want %v %v", tc.vendor, tc.model, p.Input, ok, tc.input, tc.ok)
		}
	}
	if got := BaseModel("amazon.nova-pro-v1:0"); got != "amazon.nova-pro-v1:0" {
		t.Errorf("a Bedrock version is not a date: %s", got)
	}
}

func TestDefaultTable(t *testing.T) {
	d := Default()
	if d.Len() < 40 || strings.Join(d.Vendors(), ",") != "anthropic,bedrock,gemini,openai" {
		t.Fatalf("default table: %d entries, vendors %v", d.Len(), d.Vendors())
	}
	for _, v := range d.Vendors() {
		for m, p := range d.prices[v] {
			if p.AsOf == "" || !strings.HasPrefix(p.Source, "https://") || p.Input <= 0 {
				t.Errorf("%s.%s: as_of %q source %q input %v", v, m, p.AsOf, p.Source, p.Input)
			}
		}
	}
}

// TestParseErrors: a malformed price file names the field (vendor, model,
// field) and its line, and says what is wrong in the user's terms.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, path, want string }{
		{"openai:\n  m: { input: x, output: 1 }", "openai.m.input", `line 2: openai.m.input: "x" is not a number`},
		{"openai:\n  m: { input: \"NaN\", output: 1 }", "openai.m.input", `line 2: openai.m.input: "NaN" is not a number (write it without quotes)`},
		{"openai:\n  m: { input: \"2.5\", output: 1 }", "openai.m.input", `line 2: openai.m.input: "2.5" is not a number (write it without quotes)`},
		{"openai:\n  m: { input: .nan, output: 1 }", "openai.m.input", `line 2: openai.m.input: must be a number from 0 to 10000, got NaN`},
		{"openai:\n  m: { input: 1, output: .inf }", "openai.m.output", `line 2: openai.m.output: must be a number from 0 to 10000, got +Inf`},
		{"openai:\n  m: { input: -1, output: 1 }", "openai.m.input", `line 2: openai.m.input: must be a number from 0 to 10000, got -1`},
		{"openai:\n  m:\n    input: 1\n    output: [1]", "openai.m.output", `line 4: openai.m.output: must be a number, not a list`},
		{"openai:\n  m: { input: 1, output: 1, cached_input: { a: 1 } }", "openai.m.cached_input", `line 2: openai.m.cached_input: must be a number, not a mapping`},
		{"openai:\n  m: { input: 1 }", "openai.m.output", `line 2: openai.m.output: is required`},
		{"openai:\n  m: { input: 1, output: 1, inptu: 2 }", "openai.m.inptu", ""},
		{"openai:\n  m: { input: 1, output: 1, input: 2 }", "openai.m.input", `line 2: openai.m.input: is written twice`},
		{"openai:\n  m: { input: 1, output: 1 }\n  m: { input: 2, output: 2 }", "openai.m", `line 3: openai.m: is listed twice`},
		{"openai:\n  m: { input: 10001, output: 1 }", "openai.m.input", ""},
		{"openai:\n  m: { input: 1, output: 1, request: 101 }", "openai.m.request", `line 2: openai.m.request: must be a number from 0 to 100, got 101`},
		{"openai:\n  m: { input: 1, output: 1, source: [x] }", "openai.m.source", ""},
		{"openai:\n  m: 5", "openai.m", ""},
		{"openai: {}", "openai", ""},
		{"[1]", "(file)", ""},
	} {
		_, err := Parse([]byte(tc.in))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Path != tc.path {
			t.Errorf("Parse(%q) = %v, want a FieldError at %s", tc.in, err, tc.path)
		} else if tc.want != "" && err.Error() != tc.want {
			t.Errorf("Parse(%q)\n got %s\nwant %s", tc.in, err, tc.want)
		}
	}
	// null is as if left out: cached_input takes input.
	if p, err := Parse([]byte("openai:\n  m: { input: 2, output: 3, cached_input: null }")); err != nil {
		t.Fatal(err)
	} else if got, _ := p.Lookup("openai", "m"); got.CachedInput != 2 {
		t.Errorf("cached_input null: %+v", got)
	}
	p, err := Parse([]byte("as_of: 2026-01-01\nopenai:\n  m: { input: 2, output: 3 }"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := p.Lookup("openai", "m"); got.CachedInput != 2 || got.CacheWrite != 2 || got.Request != 0 || got.AsOf != "2026-01-01" {
		t.Errorf("defaults: %+v", got)
	}
}

func TestLoadTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(path, make([]byte, MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Load of a 4 MiB+1 file: %v", err)
	}
}

func FuzzCost(f *testing.F) {
	f.Add(int64(1000), int64(200), int64(400), int64(0), 2.5, 10.0, 1.25)
	f.Fuzz(func(t *testing.T, in, out, cached, write int64, pin, pout, pcached float64) {
		c := Price{Input: pin, Output: pout, CachedInput: pcached, CacheWrite: pin}.Cost(Usage{Input: in, Output: out, CachedInput: cached, CacheWrite: write})
		if c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
			t.Fatalf("cost %v", c)
		}
	})
}
