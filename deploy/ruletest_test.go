package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v3"
)

// ruleTestFile is the part of promtool's rule unit-test format
// (`promtool test rules`) that alerts_test.yml uses. Unknown fields are an
// error, so a test file that starts using a feature this runner lacks
// (promql_expr_test, group_eval_order, external_labels, ...) fails loudly
// instead of having that part silently ignored.
type ruleTestFile struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval model.Duration  `yaml:"evaluation_interval"`
	Tests              []ruleTestGroup `yaml:"tests"`
}

type ruleTestGroup struct {
	Name        string         `yaml:"name"`
	Interval    model.Duration `yaml:"interval"`
	InputSeries []struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	} `yaml:"input_series"`
	AlertRuleTests []alertTestCase `yaml:"alert_rule_test"`
}

type alertTestCase struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []struct {
		ExpLabels      map[string]string `yaml:"exp_labels"`
		ExpAnnotations map[string]string `yaml:"exp_annotations"`
	} `yaml:"exp_alerts"`
}

func readRuleTestFile(path string) (*ruleTestFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f ruleTestFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.EvaluationInterval == 0 {
		f.EvaluationInterval = model.Duration(time.Minute)
	}
	for i, rf := range f.RuleFiles {
		if !filepath.IsAbs(rf) {
			f.RuleFiles[i] = filepath.Join(filepath.Dir(path), rf)
		}
	}
	return &f, nil
}

// runRuleTests evaluates a rule unit-test file the way `promtool test rules`
// does, with the same Prometheus packages: the input series go into a test
// TSDB (promqltest's lazy loader), the rule files are loaded by the rule
// manager and every group is evaluated at each evaluation_interval step up
// to the last eval_time, so `for` durations, templated labels and
// annotations, and staleness behave as on a Prometheus server. At each
// eval_time the firing alerts of the named rule must equal exp_alerts
// exactly (labels, with alertname, and annotations); pending alerts do not
// count. It returns one error per failed case.
func runRuleTests(path string, p parser.Parser) ([]error, error) {
	f, err := readRuleTestFile(path)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i, tg := range f.Tests {
		name := tg.Name
		if name == "" {
			name = fmt.Sprintf("tests[%d]", i)
		}
		for _, e := range runRuleTestGroup(tg, time.Duration(f.EvaluationInterval), f.RuleFiles, p) {
			errs = append(errs, fmt.Errorf("%s: %w", name, e))
		}
	}
	return errs, nil
}

func runRuleTestGroup(tg ruleTestGroup, evalInterval time.Duration, ruleFiles []string, p parser.Parser) (errs []error) {
	interval := time.Duration(tg.Interval)
	if interval == 0 {
		interval = evalInterval
	}
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", model.Duration(interval))
	for _, s := range tg.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	// The PromQL options of `promtool test rules` (and of a server since
	// Prometheus 2.33): @ modifiers and negative offsets allowed.
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: p,
	})
	if err != nil {
		return []error{fmt.Errorf("input_series: %w", err)}
	}
	defer func() {
		if err := suite.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close test storage: %w", err))
		}
	}()
	suite.SubqueryInterval = evalInterval

	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       p,
	})
	groupsMap, loadErrs := m.LoadGroups(interval, labels.EmptyLabels(), "", nil, false, ruleFiles...)
	if loadErrs != nil {
		return loadErrs
	}
	groups := make([]*rules.Group, 0, len(groupsMap))
	for _, g := range groupsMap {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name() < groups[j].Name() })
	for _, g := range groups {
		for _, ar := range g.AlertingRules() {
			// A fresh manager would first try to restore `for` state from
			// the ALERTS_FOR_STATE series; there is none to restore here.
			ar.SetRestored(true)
		}
	}

	byTime := map[time.Duration][]alertTestCase{}
	var evalTimes []time.Duration
	for _, at := range tg.AlertRuleTests {
		if at.Alertname == "" {
			return []error{fmt.Errorf("alert_rule_test at eval_time %s has no alertname", at.EvalTime)}
		}
		d := time.Duration(at.EvalTime)
		if _, ok := byTime[d]; !ok {
			evalTimes = append(evalTimes, d)
		}
		byTime[d] = append(byTime[d], at)
	}
	slices.Sort(evalTimes)
	if len(evalTimes) == 0 {
		return nil
	}

	start := time.Unix(0, 0).UTC()
	next := 0
	for ts := start; ts.Sub(start) <= evalTimes[len(evalTimes)-1]; ts = ts.Add(evalInterval) {
		var evalErrs []error
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				evalErrs = append(evalErrs, fmt.Errorf("load samples till %s: %w", ts.Sub(start), err))
				return
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if r.LastError() != nil {
						evalErrs = append(evalErrs, fmt.Errorf("rule %s at %s: %w", r.Name(), ts.Sub(start), r.LastError()))
					}
				}
			}
		})
		if len(evalErrs) > 0 {
			return evalErrs
		}
		// An eval_time between two evaluations is checked against the
		// earlier one, as promtool does.
		for next < len(evalTimes) && evalTimes[next] < ts.Sub(start)+evalInterval {
			for _, at := range byTime[evalTimes[next]] {
				if err := checkAlerts(groups, at); err != nil {
					errs = append(errs, err)
				}
			}
			next++
		}
	}
	return errs
}

// checkAlerts compares the firing alerts of one alert rule with a test
// case's exp_alerts.
func checkAlerts(groups []*rules.Group, at alertTestCase) error {
	var got, want []string
	found := false
	for _, g := range groups {
		for _, ar := range g.AlertingRules() {
			if ar.Name() != at.Alertname {
				continue
			}
			found = true
			for _, a := range ar.ActiveAlerts() {
				if a.State == rules.StateFiring {
					got = append(got, alertString(a.Labels, a.Annotations))
				}
			}
		}
	}
	if !found {
		return fmt.Errorf("eval_time %s: no alert rule named %s", at.EvalTime, at.Alertname)
	}
	for _, e := range at.ExpAlerts {
		lbls := map[string]string{labels.AlertName: at.Alertname}
		for k, v := range e.ExpLabels {
			lbls[k] = v
		}
		want = append(want, alertString(labels.FromMap(lbls), labels.FromMap(e.ExpAnnotations)))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("alert %s at eval_time %s:\n  got  %s\n  want %s", at.Alertname, at.EvalTime, alertList(got), alertList(want))
	}
	return nil
}

func alertList(alerts []string) string {
	if len(alerts) == 0 {
		return "no firing alert"
	}
	return strings.Join(alerts, "\n       ")
}

func alertString(lbls, annotations labels.Labels) string {
	return "labels " + lbls.String() + " annotations " + annotations.String()
}
