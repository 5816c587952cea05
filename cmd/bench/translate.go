package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The translation phase (issues 15 and 31): what translating costs a stream's
// first chunk. The same OpenAI client streams go to the usual pass-through model
// and to one model per translated format, each served by the mock's endpoint of
// that format (Anthropic Messages, Bedrock ConverseStream, Gemini
// streamGenerateContent), which the gateway translates into
// chat.completion.chunk events; direct (the mock's chat endpoint) runs in the
// same round, so each is an added time. The mock sends its content with no gap
// here (X-Mock-Chunk-Interval: 0s): a translated stream's first client bytes go
// with the first text delta, which would otherwise come one chunk interval after
// the pass-through's first (role) event, and that interval is the mock's, not
// the gateway's.

// translateFormat is one translated format the phase measures: its provider
// block (after name, format and the mock's base URL) and its label.
type translateFormat struct {
	format, label, baseSuffix, auth string
}

// translateFormats are measured in this order; each has provider
// translate-<format> and model bench-translated-<format>. The bedrock
// provider signs with made-up static keys: the mock checks the signature's
// shape, and the signing is what the phase must include.
var translateFormats = []translateFormat{
	{"anthropic", "Anthropic", "/v1", `api_keys: ["${BENCH_UPSTREAM_KEY}"]`},
	{"bedrock", "Bedrock", "", `bedrock: { region: us-east-1 }
    aws: { access_key_id: AKIDBENCHMOCK, secret_access_key: bench-mock-secret }`},
	{"gemini", "Gemini", "/v1beta", `api_keys: ["${BENCH_UPSTREAM_KEY}"]`},
}

func (f translateFormat) model() string { return "bench-translated-" + f.format }

// translateSpec sizes the phase: streams at rate for duration per run, rounds
// of direct, pass-through and each translated format back to back in a
// rotated order.
type translateSpec struct {
	rate     int
	duration time.Duration
	rounds   int
}

// translateRoutes returns the phase's providers and models for the routes file.
func translateRoutes(mockURL string) (providers, models string) {
	var p, m strings.Builder
	for _, f := range translateFormats {
		fmt.Fprintf(&p, `  - name: translate-%s
    format: %s
    base_url: %s%s
    %s
    max_concurrency: 4096
    timeouts: { connect: 2s, first_byte: 10s, total: 60s }
    forward_headers: [X-Mock-Chunks, X-Mock-Chunk-Interval]
`, f.format, f.format, mockURL, f.baseSuffix, f.auth)
		fmt.Fprintf(&m, `  - name: %s
    candidates:
      - { provider: translate-%s, model: %s }
`, f.model(), f.format, benchModel)
	}
	return p.String(), m.String()
}

// translateRound is one round: the runs' first-chunk latencies; translated
// is indexed as translateFormats.
type translateRound struct {
	direct, pass runResult
	translated   []runResult
}

type translateResult struct {
	spec   translateSpec
	rounds []translateRound
}

// translate runs the phase into rep.translate.
func (b *bencher) translate(ctx context.Context, rep *report) {
	spec := b.s.translate
	res := &translateResult{spec: spec}
	rep.translate = res
	pass := b.streaming(streamChunks, 0)
	reqs := make([]*request, len(translateFormats))
	order := []string{"direct", "pass"}
	for i, f := range translateFormats {
		reqs[i] = b.streaming(streamChunks, 0)
		reqs[i].body = []byte(strings.Replace(string(pass.body), `"model":"`+benchModel+`"`, `"model":"`+f.model()+`"`, 1))
		order = append(order, f.format)
	}
	run := openLoopSpec{rate: spec.rate, duration: spec.duration, maxInFlight: maxInFlight, timeout: requestTimeout}
	warm := run
	warm.duration = 500 * time.Millisecond
	for _, r := range reqs {
		openLoop(ctx, b.clients[gateway], b.urls[gateway]+chatPath, r, warm)
	}
	b.st.waitRecordsWritten(ctx, 10*time.Second)
	for round := range spec.rounds {
		tr := translateRound{translated: make([]runResult, len(translateFormats))}
		for _, which := range rotate(order, round) {
			if ctx.Err() != nil {
				return
			}
			switch which {
			case "direct":
				tr.direct = openLoop(ctx, b.clients[direct], b.urls[direct]+chatPath, pass, run)
			case "pass":
				tr.pass = openLoop(ctx, b.clients[gateway], b.urls[gateway]+chatPath, pass, run)
			default:
				i := slices.IndexFunc(translateFormats, func(f translateFormat) bool { return f.format == which })
				tr.translated[i] = openLoop(ctx, b.clients[gateway], b.urls[gateway]+chatPath, reqs[i], run)
			}
			b.st.waitRecordsWritten(ctx, 10*time.Second)
		}
		res.rounds = append(res.rounds, tr)
		line := fmt.Sprintf("translated stream round %d: added first chunk p50 %s ms pass-through", round+1, ms(tr.added(tr.pass, 0.5)))
		for i, f := range translateFormats {
			line += fmt.Sprintf(", %s ms %s", ms(tr.added(tr.translated[i], 0.5)), f.format)
		}
		logf("%s", line)
	}
}

// firstChunks is a run's sorted first-chunk latencies of successful streams.
func firstChunks(r runResult) []time.Duration {
	var out []time.Duration
	for _, s := range r.samples {
		if s.err == "" {
			out = append(out, s.first)
		}
	}
	slices.Sort(out)
	return out
}

func runErrors(r runResult) int {
	n := 0
	for _, s := range r.samples {
		if s.err != "" {
			n++
		}
	}
	return n
}

// added is run's first-chunk percentile q minus direct's in the same round.
func (tr translateRound) added(run runResult, q float64) time.Duration {
	return pct(firstChunks(run), q) - pct(firstChunks(tr.direct), q)
}

// ratio is format i's added time at q over the pass-through's, median over
// rounds (rounds where the pass-through added nothing are left out).
func (t *translateResult) ratio(i int, q float64) (float64, []float64) {
	var per []float64
	for _, tr := range t.rounds {
		p, x := tr.added(tr.pass, q), tr.added(tr.translated[i], q)
		if p > 0 {
			per = append(per, float64(x)/float64(p))
		}
	}
	if len(per) == 0 {
		return math.NaN(), nil
	}
	return medianFloat(per), per
}

func (t *translateResult) write(w io.Writer) {
	fmt.Fprintf(w, "\nTranslated streams (gateway only): streams at %d/s for %v per run, %d rounds of direct (the mock's chat endpoint), the pass-through model and one model per translated format, each served by the mock's endpoint of that format (Anthropic Messages, Bedrock ConverseStream, Gemini streamGenerateContent) and translated to chat.completion.chunk events, back to back in a rotated order; the mock sends its chunks with no gap, so every stream's first content leaves it at the same time. Added = the run's first-chunk percentile minus direct's in the same round; latencies are medians over rounds.\n\n",
		t.spec.rate, t.spec.duration, t.spec.rounds)
	tb := &table{}
	// runs are the table's columns: direct, pass-through, then each format.
	runs := []func(translateRound) runResult{
		func(tr translateRound) runResult { return tr.direct },
		func(tr translateRound) runResult { return tr.pass },
	}
	head := []string{"translated stream", "direct", "pass-through"}
	for i, f := range translateFormats {
		runs = append(runs, func(tr translateRound) runResult { return tr.translated[i] })
		head = append(head, f.label)
	}
	tb.add(head...)
	row := func(label string, cell func(col int, f func(translateRound) runResult) string) {
		cells := []string{label}
		for col, f := range runs {
			cells = append(cells, cell(col, f))
		}
		tb.add(cells...)
	}
	row("requests / errors, all rounds", func(_ int, f func(translateRound) runResult) string {
		n, e := 0, 0
		for _, tr := range t.rounds {
			n += len(f(tr).samples)
			e += runErrors(f(tr))
		}
		return fmt.Sprintf("%d / %d", n, e)
	})
	row("first chunk p50 / p99 (ms)", func(_ int, f func(translateRound) runResult) string {
		var p50, p99 []time.Duration
		for _, tr := range t.rounds {
			fc := firstChunks(f(tr))
			p50, p99 = append(p50, pct(fc, 0.5)), append(p99, pct(fc, 0.99))
		}
		return ms(median(p50)) + " / " + ms(median(p99))
	})
	row("added first chunk p50 / p99 (ms)", func(col int, f func(translateRound) runResult) string {
		if col == 0 {
			return "–"
		}
		var p50, p99 []time.Duration
		for _, tr := range t.rounds {
			p50, p99 = append(p50, tr.added(f(tr), 0.5)), append(p99, tr.added(f(tr), 0.99))
		}
		return fmt.Sprintf("%.3f / %.3f", float64(median(p50))/1e6, float64(median(p99))/1e6)
	})
	row("added p50 / p99 over the pass-through's", func(col int, _ func(translateRound) runResult) string {
		if col < 2 {
			return ""
		}
		r50, _ := t.ratio(col-2, 0.5)
		r99, _ := t.ratio(col-2, 0.99)
		return ratioOrNA(r50) + " / " + ratioOrNA(r99)
	})
	row("added p50 ratio, per round", func(col int, _ func(translateRound) runResult) string {
		if col < 2 {
			return ""
		}
		_, per := t.ratio(col-2, 0.5)
		var rounds []string
		for _, v := range per {
			rounds = append(rounds, fmt.Sprintf("%.2f", v))
		}
		return strings.Join(rounds, ", ")
	})
	tb.write(w)
}

// translateTarget is the target row of format f.
func translateTarget(f translateFormat) string {
	return "translated " + f.label + " stream: added time to first chunk p50 ≤ 1.3x the pass-through's"
}

func (t *translateResult) writeTargets(tb *table, verdict func(ok, measured bool) string) {
	for i, f := range translateFormats {
		r50, _ := t.ratio(i, 0.5)
		tb.add(translateTarget(f), ratioOrNA(r50), verdict(r50 <= 1.3, !math.IsNaN(r50)))
	}
}

func (t *translateResult) errs() map[string]int {
	m := map[string]int{}
	for _, tr := range t.rounds {
		for i, r := range append([]runResult{tr.pass}, tr.translated...) {
			label := "pass-through"
			if i > 0 {
				label = translateFormats[i-1].format
			}
			for _, s := range r.samples {
				if s.err != "" {
					m["translated stream phase ("+label+"): "+s.err]++
				}
			}
		}
	}
	return m
}
