package routes

import (
	"strings"
	"testing"
)

// TestParseResume: a route's resume attempts and a provider's prefill
// reach the parsed routes; both are off when absent.
func TestParseResume(t *testing.T) {
	lookup := env(map[string]string{"K1": "sk-one", "K2": "sk-two", "ORG": "org-1"})
	r, err := Parse([]byte(validRoutes), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if r.Models[0].Resume.Attempts != 0 || r.Providers[1].Prefill {
		t.Fatalf("defaults: resume %+v, prefill %v; want off", r.Models[0].Resume, r.Providers[1].Prefill)
	}
	yaml := strings.Replace(validRoutes, "    max_concurrency: 4\n", "    max_concurrency: 4\n    prefill: true\n", 1)
	yaml = strings.Replace(yaml, "  - name: gpt-4o-mini\n", "  - name: gpt-4o-mini\n    resume: { attempts: 3 }\n", 1)
	if r, err = Parse([]byte(yaml), lookup); err != nil {
		t.Fatal(err)
	}
	if r.Models[0].Resume.Attempts != 3 || !r.Providers[1].Prefill || r.Providers[0].Prefill {
		t.Fatalf("resume %+v, prefill %v %v", r.Models[0].Resume, r.Providers[0].Prefill, r.Providers[1].Prefill)
	}
}
