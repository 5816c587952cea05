package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	composetypes "github.com/compose-spec/compose-go/v2/types"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/metrics"
	"github.com/llmgw/gateway/internal/routes"
)

// The tests run in this package's directory, deploy/.
const (
	promConfig     = "prometheus/prometheus.yml"
	promRules      = "prometheus/alerts.yml"
	promRulesTest  = "prometheus/alerts_test.yml"
	dashboardFile  = "grafana/dashboards/gateway.json"
	datasourceFile = "grafana/provisioning/datasources/prometheus.yml"
	dashboardsProv = "grafana/provisioning/dashboards/dashboards.yml"
	routesFile     = "gateway.compose.yaml"
	composeFile    = "../docker-compose.yml"
)

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// samePath returns a predicate matching the paths that name the same file
// as want, whether relative to the test's directory or absolute.
func samePath(want string) func(string) bool {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	w := abs(want)
	return func(p string) bool { return abs(p) == w }
}

// ---------------------------------------------------------------- Prometheus

// promqlParser parses PromQL with the options `promtool` and a server use
// when no experimental feature flag is set.
var promqlParser = parser.NewParser(parser.Options{})

// TestPrometheusConfig loads prometheus.yml with Prometheus' own config
// loader, which is what `promtool check config` and the server run: unknown
// fields, bad durations or relabel rules fail here, not at `docker compose
// up`. Its rule files must exist and parse, and the gateway job must match
// what the alerts select.
func TestPrometheusConfig(t *testing.T) {
	t.Parallel()
	cfg, err := promconfig.LoadFile(promConfig, false, promslog.NewNopLogger())
	if err != nil {
		t.Fatalf("prometheus config: %v", err)
	}
	// As `promtool check config`: a rule file named without a glob must
	// exist, and every rule file must parse.
	var ruleFiles []string
	for _, rf := range cfg.RuleFiles {
		m, err := filepath.Glob(rf)
		if err != nil {
			t.Fatalf("rule_files %q: %v", rf, err)
		}
		if len(m) == 0 && !strings.ContainsAny(rf, "*?[") {
			t.Errorf("rule_files: %q does not exist", rf)
		}
		ruleFiles = append(ruleFiles, m...)
	}
	for _, rf := range ruleFiles {
		if _, errs := rulefmt.ParseFile(rf, false, model.UTF8Validation, promqlParser, promslog.NewNopLogger()); errs != nil {
			t.Errorf("rule file %s: %v", rf, errors.Join(errs...))
		}
	}
	if !slices.ContainsFunc(ruleFiles, samePath(promRules)) {
		t.Errorf("rule_files %v does not load %s", cfg.RuleFiles, promRules)
	}

	scrapeConfigs, err := cfg.GetScrapeConfigs()
	if err != nil {
		t.Fatalf("prometheus scrape configs: %v", err)
	}
	// Every gateway replica of the compose stack, in the one job the
	// alerts select.
	found := map[string]bool{}
	for _, sc := range scrapeConfigs {
		for _, sd := range sc.ServiceDiscoveryConfigs {
			static, ok := sd.(discovery.StaticConfig)
			if !ok {
				continue
			}
			for _, group := range static {
				for _, target := range group.Targets {
					addr := string(target[model.AddressLabel])
					if !slices.Contains(gatewayReplicas, strings.TrimSuffix(addr, ":8080")) {
						continue
					}
					found[addr] = true
					if sc.JobName != "gateway" || sc.MetricsPath != "/metrics" || time.Duration(sc.ScrapeInterval) != 15*time.Second {
						t.Errorf("%s scrape: job %q path %q interval %s, want gateway /metrics 15s (alerts select job=\"gateway\")",
							addr, sc.JobName, sc.MetricsPath, sc.ScrapeInterval)
					}
				}
			}
		}
	}
	for _, r := range gatewayReplicas {
		if !found[r+":8080"] {
			t.Errorf("no scrape config targets %s:8080", r)
		}
	}
}

// gatewayReplicas are the compose services running the gateway; they share
// their limits through the redis service.
var gatewayReplicas = []string{"gateway", "gateway-2"}

// TestAlertRules validates alerts.yml as `promtool check rules` does (schema,
// PromQL of every expression, templates of labels and annotations), runs the
// unit tests of alerts_test.yml on the same rule evaluation a server does,
// and checks each alert's labelling and that a test proves it fires.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	rgs, errs := rulefmt.ParseFile(promRules, false, model.UTF8Validation, promqlParser, promslog.NewNopLogger())
	if errs != nil {
		t.Fatalf("alert rules: %v", errors.Join(errs...))
	}
	// The unit tests prove when each alert fires (and when it stays silent).
	failed, err := runRuleTests(promRulesTest, promqlParser)
	if err != nil {
		t.Fatalf("rule unit tests: %v", err)
	}
	for _, e := range failed {
		t.Errorf("%s: %v", promRulesTest, e)
	}

	tests, err := readRuleTestFile(promRulesTest)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tests.RuleFiles, samePath(promRules)) {
		t.Errorf("%s: rule_files %v does not test %s", promRulesTest, tests.RuleFiles, promRules)
	}
	provenFiring := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				provenFiring[a.Alertname] = true
			}
		}
	}

	exported := exportedSeries(t)
	alerts := 0
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if r.Alert != "" {
				alerts++
				switch r.Labels["severity"] {
				case "critical", "warning", "info":
				default:
					t.Errorf("alert %s: severity label %q, want critical, warning or info", r.Alert, r.Labels["severity"])
				}
				for _, a := range []string{"summary", "description"} {
					if strings.TrimSpace(r.Annotations[a]) == "" {
						t.Errorf("alert %s: no %s annotation", r.Alert, a)
					}
				}
				if !provenFiring[r.Alert] {
					t.Errorf("alert %s: no test in %s expects it to fire", r.Alert, promRulesTest)
				}
			}
			checkNames(t, "rule "+name, r.Expr, exported)
		}
	}
	if alerts == 0 {
		t.Fatalf("%s defines no alerts", promRules)
	}
}

// ------------------------------------------------------------------- Compose

// TestComposeConfig loads docker-compose.yml with compose-go, the loader
// `docker compose` itself is built on: the file is validated against the
// Compose schema, variables interpolated, paths made absolute and references
// between services, volumes and networks checked, without a Docker engine.
// Then the resolved services are cross-checked against the files they mount
// and the gateway's own config parsers.
func TestComposeConfig(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// An empty environment stands in for the developer's (and no .env file
	// is read: that is the compose CLI's job, not the loader's), so what is
	// checked is what a fresh checkout runs: the defaults.
	cf, err := loader.LoadWithContext(t.Context(), composetypes.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []composetypes.ConfigFile{{Filename: filepath.Join(root, filepath.Base(composeFile))}},
		Environment: composetypes.Mapping{},
	}, func(o *loader.Options) { o.SetProjectName("gateway", true) })
	if err != nil {
		t.Fatalf("compose file %s: %v", composeFile, err)
	}
	for _, name := range []string{"postgres", "redis", "primary", "backup", "gateway", "gateway-2", "prometheus", "grafana"} {
		if _, ok := cf.Services[name]; !ok {
			t.Errorf("compose: no service %q", name)
		}
	}
	if t.Failed() {
		return
	}
	// mount returns the container path a host path (relative to the repo
	// root) is bind-mounted at, or "".
	mount := func(svc, hostRel string) string {
		host := filepath.Join(root, hostRel)
		var vols []string
		for _, v := range cf.Services[svc].Volumes {
			if v.Type == composetypes.VolumeTypeBind && filepath.Clean(v.Source) == host {
				return v.Target
			}
			vols = append(vols, v.String())
		}
		t.Errorf("compose: service %s does not mount %s (volumes %v)", svc, hostRel, vols)
		return ""
	}

	gw := cf.Services["gateway"]
	// The environment compose gives the gateway; a variable listed without a
	// value (nil) would be taken from the host and is not set here.
	gwEnv := map[string]string{}
	for k, v := range gw.Environment {
		if v != nil {
			gwEnv[k] = *v
		}
	}
	if gw.Build == nil {
		t.Error("compose: gateway is not built from the Dockerfile")
	}
	if c := gw.DependsOn["postgres"].Condition; c != "service_healthy" {
		t.Errorf("compose: gateway depends on postgres with condition %q, want service_healthy", c)
	}
	if cf.Services["postgres"].HealthCheck == nil {
		t.Error("compose: postgres has no healthcheck, so service_healthy never comes")
	}
	for _, svc := range []string{"primary", "backup"} {
		if cf.Services[svc].Image != gw.Image {
			t.Errorf("compose: %s runs image %q, gateway %q: the mock upstream ships in the gateway image", svc, cf.Services[svc].Image, gw.Image)
		}
	}
	if got, want := mount("gateway", "deploy/"+routesFile), gwEnv["GATEWAY_CONFIG"]; got != want {
		t.Errorf("compose: routes file mounted at %q but GATEWAY_CONFIG is %q", got, want)
	}
	if got := mount("prometheus", "deploy/prometheus"); got != "/etc/prometheus" {
		t.Errorf("compose: deploy/prometheus mounted at %q, want /etc/prometheus (the image's config path)", got)
	}
	if got := mount("grafana", "deploy/grafana/provisioning"); got != "/etc/grafana/provisioning" {
		t.Errorf("compose: provisioning mounted at %q, want /etc/grafana/provisioning", got)
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, dashboardsProv, &prov)
	if len(prov.Providers) != 1 {
		t.Fatalf("%s: want one dashboard provider, got %d", dashboardsProv, len(prov.Providers))
	}
	if got, want := mount("grafana", "deploy/grafana/dashboards"), prov.Providers[0].Options.Path; got != want {
		t.Errorf("compose: dashboards mounted at %q but the provider reads %q", got, want)
	}

	// The gateway's own settings parse from the environment compose gives it.
	if _, _, err := config.Load(copyEnv(gwEnv)); err != nil {
		t.Errorf("compose: gateway environment does not load: %v", err)
	}
	composeReplicas(t, cf, mount)
	// The routes file loads with exactly that environment (keys must be
	// non-empty after ${VAR} expansion), and each provider's base_url names a
	// compose service whose mock upstream listens on that port.
	b, err := os.ReadFile(routesFile)
	if err != nil {
		t.Fatal(err)
	}
	routes, err := routes.Parse(b, func(k string) (string, bool) { v, ok := gwEnv[k]; return v, ok })
	if err != nil {
		t.Fatalf("routes file %s with the compose environment of the gateway: %v", routesFile, err)
	}
	if _, err := candidates.NewPlanner(routes, candidates.PlannerOptions{}); err != nil {
		t.Fatalf("routes file %s: %v", routesFile, err)
	}
	for _, p := range routes.Providers {
		u, err := url.Parse(p.BaseURL)
		if err != nil {
			t.Errorf("provider %s: base_url %q: %v", p.Name, p.BaseURL, err)
			continue
		}
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil {
			t.Errorf("provider %s: base_url %q names no port: %v", p.Name, p.BaseURL, err)
			continue
		}
		svc, ok := cf.Services[host]
		if !ok {
			t.Errorf("provider %s: base_url host %q is no compose service", p.Name, host)
			continue
		}
		if !slices.Contains(svc.Entrypoint, "0.0.0.0:"+port) {
			t.Errorf("provider %s: service %s does not listen on 0.0.0.0:%s (entrypoint %v)", p.Name, host, port, svc.Entrypoint)
		}
	}
}

// copyEnv copies an environment map: config.Load may add to the one it gets.
func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ------------------------------------------------------------------- Grafana

type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Datasource *datasourceRef  `json:"datasource"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []struct {
		Expr       string         `json:"expr"`
		RefID      string         `json:"refId"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // collapsed rows hold their panels
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard: uid %q title %q, want both set", d.UID, d.Title)
	}
	if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
		t.Errorf("dashboard: schemaVersion %d, want a current Grafana schema (36-41)", d.SchemaVersion)
	}

	var ds struct {
		Datasources []struct {
			Type string `yaml:"type"`
			UID  string `yaml:"uid"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, datasourceFile, &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].UID == "" {
		t.Fatalf("%s: want one prometheus datasource with a fixed uid, got %+v", datasourceFile, ds.Datasources)
	}
	if ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("%s: url %q, want http://prometheus:9090 (the compose service)", datasourceFile, ds.Datasources[0].URL)
	}
	dsUID := ds.Datasources[0].UID
	checkDS := func(where string, ref *datasourceRef) {
		if ref == nil || ref.Type != "prometheus" || ref.UID != dsUID {
			t.Errorf("%s: datasource %+v, want the provisioned prometheus uid %q", where, ref, dsUID)
		}
	}

	exported := exportedSeries(t)
	type query struct{ where, expr string }
	var queries []query
	ids := map[int]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("%s: id also used by %s", where, prev)
			}
			ids[p.ID] = where
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			checkDS(where, p.Datasource)
			if len(p.Targets) == 0 {
				t.Errorf("%s: no queries", where)
			}
			for _, tg := range p.Targets {
				w := where + " query " + tg.RefID
				if tg.Datasource != nil {
					checkDS(w, tg.Datasource)
				}
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s: empty expr", w)
					continue
				}
				queries = append(queries, query{w, tg.Expr})
			}
		}
	}
	walk(d.Panels)
	if len(queries) == 0 {
		t.Fatal("dashboard has no queries")
	}

	used := map[string]bool{}
	for _, q := range queries {
		for _, n := range checkNames(t, q.where, q.expr, exported) {
			used[n] = true
		}
	}
	for _, v := range d.Templating.List {
		checkDS("variable "+v.Name, v.Datasource)
		checkNames(t, "variable "+v.Name, v.Definition+" "+string(v.Query), exported)
	}
	// The panels the issue asks for, by the series they must read.
	for _, n := range []string{
		"gateway_requests_total", "gateway_candidate_attempts_total",
		"gateway_upstream_first_byte_seconds_bucket",
		"gateway_admission_active", "gateway_admission_limit", "gateway_admission_pending",
		"gateway_admission_wait_seconds_bucket", "gateway_admission_timeouts_total",
		"gateway_watchdog_timeouts_total", "gateway_report_queue_depth",
		"gateway_report_written_total", "gateway_report_spooled_total",
		"gateway_report_replayed_total", "gateway_report_dropped_total",
		"gateway_stage_duration_seconds_bucket",
	} {
		if !used[n] {
			t.Errorf("dashboard: no panel queries %s", n)
		}
	}

	// Syntax: Prometheus' PromQL parser reads every panel query, with
	// Grafana's variables replaced by values of the right kind.
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "1h")
	userVar := regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
	for _, q := range queries {
		expr := userVar.ReplaceAllString(vars.Replace(q.expr), ".*")
		if _, err := promqlParser.ParseExpr(expr); err != nil {
			t.Errorf("%s is not valid PromQL: %v\n  expr: %s\n  as parsed: %s", q.where, err, q.expr, expr)
		}
	}
}

// ------------------------------------------------------------ metric names

var (
	quoted     = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	metricName = regexp.MustCompile(`(?:^|[^A-Za-z0-9_:])(gateway_[A-Za-z0-9_:]+)`)
)

// metricNames returns the gateway_* series an expression selects. String
// literals are removed first, so label values such as
// gate="gateway_upstream_execution" are not taken for metric names.
func metricNames(expr string) []string {
	expr = quoted.ReplaceAllString(expr, `""`)
	seen := map[string]bool{}
	var out []string
	for _, m := range metricName.FindAllStringSubmatch(expr, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`sum by (gate) (gateway_admission_active{gate="gateway_upstream_execution"}) / ` +
		`histogram_quantile(0.9, rate(gateway_x_seconds_bucket{provider=~"$provider"}[5m])) + my_gateway_y + label_values(gateway_z, model)`)
	want := []string{"gateway_admission_active", "gateway_x_seconds_bucket", "gateway_z"}
	if !slices.Equal(got, want) {
		t.Fatalf("metricNames = %v, want %v", got, want)
	}
}

// checkNames fails the test for every gateway_* series in expr the gateway
// does not export, and returns the names it found.
func checkNames(t *testing.T, where, expr string, exported map[string]string) []string {
	t.Helper()
	names := metricNames(expr)
	for _, n := range names {
		if _, ok := exported[n]; ok {
			continue
		}
		hint := ""
		if base, ok := histogramBase(n, exported); ok {
			hint = fmt.Sprintf(" (%s is a histogram: query %s_bucket, _sum or _count)", base, base)
		}
		t.Errorf("%s: %s is not exported by the gateway%s\n  expr: %s\n  exported: %s",
			where, n, hint, strings.TrimSpace(expr), strings.Join(sortedKeys(exported), ", "))
	}
	return names
}

func histogramBase(n string, exported map[string]string) (string, bool) {
	if _, ok := exported[n+"_bucket"]; ok {
		return n, true
	}
	return "", false
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if strings.HasPrefix(k, "gateway_") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// exportedSeries returns every series name a real gateway registry exposes
// (name -> family type): the registry of internal/metrics, built with the
// compose routes file's planner, a real admission scheduler and the report
// collector, after one observation of each family that only appears once a
// label combination is used. Histograms count as their _bucket, _sum and
// _count series (classic buckets: what Prometheus stores without the
// native-histogram feature), summaries as base, _sum and _count.
func exportedSeries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(routesFile)
	if err != nil {
		t.Fatal(err)
	}
	routes, err := routes.Parse(b, func(string) (string, bool) { return "test-key", true })
	if err != nil {
		t.Fatalf("routes file %s: %v", routesFile, err)
	}
	planner, err := candidates.NewPlanner(routes, candidates.PlannerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Sources{Planner: planner, Admission: admission.New(admission.Config{}), HoldMode: "first_body"})
	model := planner.Models()[0]
	plan, err := planner.Plan(model)
	if err != nil || len(plan) == 0 {
		t.Fatalf("plan %s: %v (%d candidates)", model, err, len(plan))
	}
	var obs candidates.Observer = m
	obs.RequestDone(model, "chat", "success", 200, time.Millisecond)
	obs.CandidateDone(&plan[0], "success", "", time.Millisecond)

	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]string{}
	for _, f := range fams {
		typ := f.GetType().String()
		switch typ {
		case "HISTOGRAM", "GAUGE_HISTOGRAM":
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[f.GetName()+s] = typ
			}
		case "SUMMARY":
			for _, s := range []string{"", "_sum", "_count"} {
				out[f.GetName()+s] = typ
			}
		default:
			out[f.GetName()] = typ
		}
	}
	// The families DESIGN section 8 promises must all be there, or the
	// registry above is not the whole gateway.
	for _, n := range []string{"gateway_requests_total", "gateway_request_duration_seconds_bucket",
		"gateway_candidate_attempts_total", "gateway_upstream_first_byte_seconds_bucket",
		"gateway_stage_duration_seconds_bucket", "gateway_admission_active", "gateway_admission_pending",
		"gateway_admission_wait_seconds_bucket", "gateway_admission_timeouts_total",
		"gateway_watchdog_timeouts_total", "gateway_report_queue_depth", "gateway_report_written_total",
		"gateway_report_spooled_total", "gateway_report_dropped_total"} {
		if _, ok := out[n]; !ok {
			t.Errorf("the metrics registry does not export %s (DESIGN section 8)", n)
		}
	}
	return out
}
