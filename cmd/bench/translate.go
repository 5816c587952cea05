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

// The translation phase (issue 15): what translating costs a stream's first
// chunk. The same OpenAI client streams go to the usual pass-through model and
// to a model whose provider is the mock's Anthropic Messages endpoint, which
// the gateway translates into chat.completion.chunk events; direct (the mock's
// chat endpoint) runs in the same round, so each is an added time. The mock
// sends its content with no gap here (X-Mock-Chunk-Interval: 0s): the
// translated stream's first client bytes go with the first text delta, which
// would otherwise come one chunk interval after the pass-through's first
// (role) event, and that interval is the mock's, not the gateway's.
const (
	translateProvider = "translate-anthropic"
	translateModel    = "bench-translated"
)

// translateSpec sizes the phase: streams at rate for duration per run, rounds
// of direct, pass-through and translated back to back in a rotated order.
type translateSpec struct {
	rate     int
	duration time.Duration
	rounds   int
}

// translateRoutes returns the phase's provider and model for the routes file.
func translateRoutes(mockURL string) (providers, models string) {
	return fmt.Sprintf(`  - name: %s
    format: anthropic
    base_url: %s/v1
    api_keys: ["${BENCH_UPSTREAM_KEY}"]
    max_concurrency: 4096
    timeouts: { connect: 2s, first_byte: 10s, total: 60s }
    forward_headers: [X-Mock-Chunks, X-Mock-Chunk-Interval]
`, translateProvider, mockURL), fmt.Sprintf(`  - name: %s
    candidates:
      - { provider: %s, model: %s }
`, translateModel, translateProvider, benchModel)
}

// translateRound is one round: the three runs' first-chunk latencies.
type translateRound struct {
	direct, pass, translated runResult
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
	translated := b.streaming(streamChunks, 0)
	translated.body = []byte(strings.Replace(string(pass.body), `"model":"`+benchModel+`"`, `"model":"`+translateModel+`"`, 1))
	run := openLoopSpec{rate: spec.rate, duration: spec.duration, maxInFlight: maxInFlight, timeout: requestTimeout}
	warm := run
	warm.duration = 500 * time.Millisecond
	openLoop(ctx, b.clients[gateway], b.urls[gateway]+chatPath, translated, warm)
	b.st.waitRecordsWritten(ctx, 10*time.Second)
	for round := range spec.rounds {
		var tr translateRound
		for _, which := range rotate([]string{"direct", "pass", "translated"}, round) {
			if ctx.Err() != nil {
				return
			}
			switch which {
			case "direct":
				tr.direct = openLoop(ctx, b.clients[direct], b.urls[direct]+chatPath, pass, run)
			case "pass":
				tr.pass = openLoop(ctx, b.clients[gateway], b.urls[gateway]+chatPath, pass, run)
			case "translated":
				tr.translated = openLoop(ctx, b.clients[gateway], b.urls[gateway]+chatPath, translated, run)
			}
			b.st.waitRecordsWritten(ctx, 10*time.Second)
		}
		res.rounds = append(res.rounds, tr)
		logf("translated stream round %d: added first chunk p50 %s ms pass-through, %s ms translated",
			round+1, ms(tr.added(tr.pass, 0.5)), ms(tr.added(tr.translated, 0.5)))
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

// ratio is the translated stream's added time at q over the pass-through's,
// median over rounds (rounds where the pass-through added nothing are left out).
func (t *translateResult) ratio(q float64) (float64, []float64) {
	var per []float64
	for _, tr := range t.rounds {
		p, x := tr.added(tr.pass, q), tr.added(tr.translated, q)
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
	fmt.Fprintf(w, "\nTranslated stream (gateway only): streams at %d/s for %v per run, %d rounds of direct (the mock's chat endpoint), the pass-through model and a model whose provider is the mock's Anthropic Messages endpoint (translated to chat.completion.chunk events), back to back in a rotated order; the mock sends its chunks with no gap, so both streams' first content leaves it at the same time. Added = the run's first-chunk percentile minus direct's in the same round; latencies are medians over rounds.\n\n",
		t.spec.rate, t.spec.duration, t.spec.rounds)
	tb := &table{}
	tb.add("translated stream", "direct", "pass-through", "translated", "translated / pass-through")
	count := func(f func(translateRound) runResult) string {
		n, e := 0, 0
		for _, tr := range t.rounds {
			n += len(f(tr).samples)
			e += runErrors(f(tr))
		}
		return fmt.Sprintf("%d / %d", n, e)
	}
	dir := func(tr translateRound) runResult { return tr.direct }
	pas := func(tr translateRound) runResult { return tr.pass }
	trn := func(tr translateRound) runResult { return tr.translated }
	tb.add("requests / errors, all rounds", count(dir), count(pas), count(trn), "")
	lat := func(f func(translateRound) runResult) string {
		var p50, p99 []time.Duration
		for _, tr := range t.rounds {
			fc := firstChunks(f(tr))
			p50, p99 = append(p50, pct(fc, 0.5)), append(p99, pct(fc, 0.99))
		}
		return ms(median(p50)) + " / " + ms(median(p99))
	}
	tb.add("first chunk p50 / p99 (ms)", lat(dir), lat(pas), lat(trn), "")
	added := func(f func(translateRound) runResult) string {
		var p50, p99 []time.Duration
		for _, tr := range t.rounds {
			p50, p99 = append(p50, tr.added(f(tr), 0.5)), append(p99, tr.added(f(tr), 0.99))
		}
		return fmt.Sprintf("%.3f / %.3f", float64(median(p50))/1e6, float64(median(p99))/1e6)
	}
	r50, per50 := t.ratio(0.5)
	r99, _ := t.ratio(0.99)
	tb.add("added first chunk p50 / p99 (ms)", "–", added(pas), added(trn), fmt.Sprintf("%s / %s", ratioOrNA(r50), ratioOrNA(r99)))
	var rounds []string
	for _, v := range per50 {
		rounds = append(rounds, fmt.Sprintf("%.2f", v))
	}
	tb.add("added first chunk p50 ratio, per round", "", "", "", strings.Join(rounds, ", "))
	tb.write(w)
}

func (t *translateResult) writeTargets(tb *table, verdict func(ok, measured bool) string) {
	r50, _ := t.ratio(0.5)
	tb.add("translated stream: added time to first chunk p50 ≤ 1.3x the pass-through's", ratioOrNA(r50), verdict(r50 <= 1.3, !math.IsNaN(r50)))
}

func (t *translateResult) errs() map[string]int {
	m := map[string]int{}
	for _, tr := range t.rounds {
		for _, r := range []runResult{tr.pass, tr.translated} {
			for _, s := range r.samples {
				if s.err != "" {
					m["translated stream phase: "+s.err]++
				}
			}
		}
	}
	return m
}
