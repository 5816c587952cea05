package candidates

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/routes"
)

func mustPlanner(t testing.TB, src string, seed uint64) *Planner {
	t.Helper()
	r, err := routes.Parse([]byte(src), env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlanner(r, PlannerOptions{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const tieredRoutes = `
providers:
  - { name: a, base_url: "http://a.example/v1", api_keys: [ka1, ka2, ka3], max_concurrency: 1 }
  - { name: b, base_url: "http://b.example/v1", api_keys: [kb1], max_concurrency: 1 }
  - { name: c, base_url: "http://c.example/v1?x=1", api_keys: [kc1], max_concurrency: 1 }
models:
  - name: m
    candidates:
      - { provider: b, priority: 1 }
      - { provider: a, priority: 0, model: up-a }
      - { provider: c, priority: 1, weight: 3 }
`

func ids(cs []Candidate) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.Provider().Name+"/"+c.Target.KeyID[:4])
	}
	return strings.Join(s, " ")
}

// TestPlanTiersAndKeyRotation: tier 0 first, its keys contiguous and rotating
// per request; indexes follow the order.
func TestPlanTiersAndKeyRotation(t *testing.T) {
	src := strings.Replace(tieredRoutes, "?x=1", "", 1)
	p := mustPlanner(t, src, 1)
	var firsts []string
	for i := 0; i < 3; i++ {
		plan, err := p.Plan("m")
		if err != nil {
			t.Fatal(err)
		}
		if len(plan) != 5 {
			t.Fatalf("len = %d, want 5", len(plan))
		}
		for j, c := range plan {
			if c.Index != j {
				t.Fatalf("index %d at position %d", c.Index, j)
			}
		}
		for j := 0; j < 3; j++ {
			if plan[j].Provider().Name != "a" || plan[j].Model != "up-a" {
				t.Fatalf("tier 0 not first: %s", ids(plan))
			}
		}
		firsts = append(firsts, plan[0].Target.KeyID[:4])
		if plan[3].Model != "m" {
			t.Fatalf("default upstream model = %q, want the route name", plan[3].Model)
		}
	}
	if firsts[0] != "key0" || firsts[1] != "key1" || firsts[2] != "key2" {
		t.Fatalf("rotation = %v, want key0 key1 key2", firsts)
	}
}

// TestPlanWeightedDraw: inside a tier, weight 3 goes first about 3/4 of the time,
// and a seeded planner is deterministic.
func TestPlanWeightedDraw(t *testing.T) {
	src := strings.Replace(tieredRoutes, "?x=1", "", 1)
	p := mustPlanner(t, src, 7)
	cFirst := 0
	const n = 4000
	var seq []string
	for i := 0; i < n; i++ {
		plan, _ := p.Plan("m")
		if plan[3].Provider().Name == "c" {
			cFirst++
		}
		if i < 20 {
			seq = append(seq, plan[3].Provider().Name)
		}
	}
	if share := float64(cFirst) / n; share < 0.70 || share > 0.80 {
		t.Fatalf("weight-3 entry first in %.2f of plans, want about 0.75", share)
	}
	p2 := mustPlanner(t, src, 7)
	for i := 0; i < 20; i++ {
		plan, _ := p2.Plan("m")
		if plan[3].Provider().Name != seq[i] {
			t.Fatalf("seeded planners diverge at %d", i)
		}
	}
}

func TestPlanTargetsAndURLs(t *testing.T) {
	src := strings.Replace(tieredRoutes, "?x=1", "", 1)
	src = strings.Replace(src, `{ name: b, base_url: "http://b.example/v1"`, `{ name: b, base_url: "https://b.example:8443/openai/", query: {api-version: "2024"}`, 1)
	p := mustPlanner(t, src, 1)
	plan, err := p.Plan("m")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range plan {
		if seen[c.Target.ID] {
			t.Fatalf("target id %s repeated", c.Target.ID)
		}
		seen[c.Target.ID] = true
		if strings.Contains(c.Target.ID+c.ID+c.Target.KeyID, "ka1") {
			t.Fatal("a key appears in an identity")
		}
		if c.Provider().Name == "b" {
			if c.Provider().ChatURL != "https://b.example:8443/openai/chat/completions?api-version=2024" || c.Provider().Origin != "https://b.example:8443" {
				t.Fatalf("url %s origin %s", c.Provider().ChatURL, c.Provider().Origin)
			}
		}
	}
	if _, err := p.Plan("nope"); err != ErrModelNotFound {
		t.Fatalf("unknown model err = %v", err)
	}
}

func BenchmarkPlan(b *testing.B) {
	src := strings.Replace(tieredRoutes, "?x=1", "", 1)
	r, _ := routes.Parse([]byte(src), env(nil))
	p, _ := NewPlanner(r, PlannerOptions{})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := p.Plan("m"); err != nil {
			b.Fatal(fmt.Sprint(err))
		}
	}
}
