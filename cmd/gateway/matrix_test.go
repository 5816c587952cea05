package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// matrixCase is one failure mode, run in both setups: "same" (one provider,
// one mock, one key; route candidates gpt-4o then gpt-4o-mini on it) and
// "cross" (gpt-4o on provider A, gpt-4o-mini on provider B). The fault is
// gpt-4o's, unless fallback gives gpt-4o-mini one too.
type matrixCase struct {
	name     string
	stream   bool
	primary  mockupstream.Behavior
	fallback *mockupstream.Behavior
	provider string // extra provider fields (YAML flow), every provider of the case
	route    string // extra model route fields
	total    string // timeouts.total, when the mode needs a short one
	want     matrixWant
	// keys2, when set, also runs the case on the same provider with two keys
	// (candidates gpt-4o key0/key1, then gpt-4o-mini key0/key1): what the
	// gpt-4o failure skips on the other key.
	keys2  *matrixWant
	then   *matrixWant                                                 // a second request right after (attempts counted from the start)
	custom func(t *testing.T, g *matrixGateway, w *matrixWorld) string // instead of want; returns the outcome
}

func (c *matrixCase) slug() string { return strings.ReplaceAll(c.name, "/", "-") }

// matrixWant is what the client, the mocks and the records must show.
type matrixWant struct {
	status   int
	text     string // the answer's content
	done     bool   // a stream ends with [DONE]
	frame    bool   // a stream ends with the gateway's error frame
	errCode  string // a non-2xx body's error.code
	attempts [2]int // requests gpt-4o and gpt-4o-mini received
	gaps     []gapWant
	within   time.Duration // the whole exchange, client side
	rows     []candRow
	request  reqRow
	prefill  string // the fallback's request ends with this assistant message (resume)
}

// gapWant bounds the time between the i-th and j-th upstream arrivals of the
// case (0-based, over both models, in order).
type gapWant struct {
	i, j     int
	min, max time.Duration
}

// quick is the longest pause allowed between a failure that fails over at
// once and the next attempt: less than the last-resort retry's 250ms
// backoff, so a retry or a wait that should not happen shows.
const quick = 240 * time.Millisecond

// slack: a watchdog runs from admission, a little before the request
// reaches the mock, so a gap after a timeout may be that much shorter.
const slack = 50 * time.Millisecond

func row(idx, retry int, status string, code int, errType string) candRow {
	return candRow{idx: idx, retry: retry, status: status, code: code, errType: errType}
}

var (
	unusedFallback = row(1, 0, "unused", 0, "")
	fallbackOK     = row(1, 0, "success", 200, "")
	requestOK      = reqRow{"success", 200, ""}
)

// rescued is the expectation of a failure of gpt-4o that gpt-4o-mini
// rescues: its answer, one attempt each, after gap.
func rescued(stream bool, failed candRow, gapMin, gapMax, within time.Duration) matrixWant {
	return matrixWant{status: 200, text: answer(fallbackIdentity), done: stream, attempts: [2]int{1, 1},
		gaps: []gapWant{{0, 1, gapMin, gapMax}}, within: within, rows: []candRow{failed, fallbackOK}, request: requestOK}
}

// twoKeys is rescued on the same provider with two keys: a model-scoped
// failure skips gpt-4o on the other key (model_failed) and gpt-4o-mini on
// the first key answers.
func twoKeys(stream bool, failed candRow, gapMin, gapMax, within time.Duration) *matrixWant {
	w := rescued(stream, failed, gapMin, gapMax, within)
	second := row(1, 0, "skipped", 0, "")
	second.skip = "model_failed"
	ok := fallbackOK
	ok.idx = 2
	w.rows = []candRow{failed, second, ok, row(3, 0, "unused", 0, "")}
	return &w
}

// retried is rescued after the last-resort retry: gpt-4o fails, is retried
// once after the backoff (retry_index 1) and fails alike, then gpt-4o-mini
// answers at once.
func retried(stream bool, failed candRow) matrixWant {
	again := failed
	again.retry = 1
	return matrixWant{status: 200, text: answer(fallbackIdentity), done: stream, attempts: [2]int{2, 1},
		gaps:   []gapWant{{0, 1, retryBackoff, retryBackoff + 500*time.Millisecond}, {1, 2, 0, quick}},
		within: 1500 * time.Millisecond, rows: []candRow{failed, again, rowAt(1, fallbackOK)}, request: requestOK}
}

// twoKeysRetried is retried on the same provider with two keys: after the
// retry, gpt-4o on the other key is skipped (model_failed) and gpt-4o-mini
// on the first key answers.
func twoKeysRetried(stream bool, failed candRow) *matrixWant {
	w := retried(stream, failed)
	skipped := row(1, 0, "skipped", 0, "")
	skipped.skip = "model_failed"
	w.rows = []candRow{w.rows[0], w.rows[1], skipped, rowAt(2, fallbackOK), row(3, 0, "unused", 0, "")}
	return &w
}

// rowAt is r at candidate index i.
func rowAt(i int, r candRow) candRow {
	r.idx = i
	return r
}

// retryBackoff is the providers' default retry.backoff.
const retryBackoff = 250 * time.Millisecond

// cutAfterCommit: the client has gpt-4o's first chunks and then the error
// frame; nothing fails over.
func cutAfterCommit(text string, within time.Duration) matrixWant {
	return matrixWant{status: 200, text: text, frame: true, attempts: [2]int{1, 0}, within: within,
		rows:    []candRow{row(0, 0, "failed", 502, "stream_interrupted"), unusedFallback},
		request: reqRow{"failed", 502, "stream_interrupted"}}
}

// both returns the case in its stream and non-stream variants.
func both(name string, mk func(stream bool) matrixCase) []matrixCase {
	s, b := mk(true), mk(false)
	s.name, s.stream = name+"/stream", true
	b.name, b.stream = name+"/body", false
	return []matrixCase{s, b}
}

func streamOnly(name string, c matrixCase) matrixCase {
	c.name, c.stream = name+"/stream", true
	return c
}

func matrixCases() []matrixCase {
	var cs []matrixCase
	add := func(c ...matrixCase) { cs = append(cs, c...) }
	commit3 := "stream_commit: { events: 3 }"

	// A 429 is this (key, model)'s: the fallback model is tried at once,
	// with Retry-After or without (it only cools gpt-4o for later requests).
	// The next request skips gpt-4o while its Retry-After runs, and
	// without one tries it again: one 429 cools nothing.
	cooling := row(0, 0, "skipped", 0, "")
	cooling.skip = "cooling_down"
	add(both("429-retry-after", func(stream bool) matrixCase {
		then := rescued(stream, cooling, 0, 0, time.Second)
		then.attempts, then.gaps = [2]int{1, 2}, nil
		return matrixCase{primary: mockupstream.Behavior{Status: 429, RetryAfter: "5"},
			want: rescued(stream, row(0, 0, "failed", 429, "upstream_http_error"), 0, quick, time.Second), then: &then}
	})...)
	add(both("429", func(stream bool) matrixCase {
		then := rescued(stream, row(0, 0, "failed", 429, "upstream_http_error"), 0, 0, time.Second)
		then.attempts, then.gaps = [2]int{2, 2}, nil
		return matrixCase{primary: mockupstream.Behavior{Status: 429},
			want: rescued(stream, row(0, 0, "failed", 429, "upstream_http_error"), 0, quick, time.Second), then: &then,
			keys2: twoKeys(stream, row(0, 0, "failed", 429, "upstream_http_error"), 0, quick, time.Second)}
	})...)
	// Timeouts are never retried on the same candidate.
	add(streamOnly("hang", matrixCase{primary: mockupstream.Behavior{HangBeforeHeaders: true},
		want:  rescued(true, row(0, 0, "failed", 504, "stream_first_byte_timeout"), 300*time.Millisecond-slack, time.Second, 2*time.Second),
		keys2: twoKeys(true, row(0, 0, "failed", 504, "stream_first_byte_timeout"), 300*time.Millisecond-slack, time.Second, 2*time.Second)}))
	add(matrixCase{name: "hang/body", primary: mockupstream.Behavior{HangBeforeHeaders: true}, total: "1s",
		want: rescued(false, row(0, 0, "failed", 504, "upstream_timeout"), time.Second-slack, 1700*time.Millisecond, 3*time.Second)})
	add(streamOnly("slow-first-token", matrixCase{primary: mockupstream.Behavior{FirstByteDelay: 2 * time.Second},
		want: rescued(true, row(0, 0, "failed", 504, "stream_first_byte_timeout"), 300*time.Millisecond-slack, time.Second, 2*time.Second)}))
	// Before the commit point (the first 3 events are held) a cut, a stall
	// or a malformed event fails over invisibly; a cut or a malformed event
	// (a broken answer) is retried once first, a stall (a timeout) is not.
	add(streamOnly("cut-before-commit", matrixCase{primary: mockupstream.Behavior{ResetAfterChunks: 1}, provider: commit3,
		want:  retried(true, row(0, 0, "failed", 502, "stream_interrupted")),
		keys2: twoKeysRetried(true, row(0, 0, "failed", 502, "stream_interrupted"))}))
	add(streamOnly("stall-before-commit", matrixCase{primary: mockupstream.Behavior{StallAfterChunks: 1}, provider: commit3,
		want: rescued(true, row(0, 0, "failed", 502, "stream_interrupted"), 300*time.Millisecond-slack, time.Second, 2*time.Second)}))
	add(streamOnly("malformed-before-commit", matrixCase{primary: mockupstream.Behavior{MalformedAfterChunks: 1}, provider: commit3,
		want: retried(true, row(0, 0, "failed", 502, "upstream_protocol_error"))}))
	add(streamOnly("no-done-before-commit", matrixCase{primary: mockupstream.Behavior{EndAfterChunks: 3, OmitFinishReason: true},
		provider: "stream_commit: { events: 10 }",
		want:     retried(true, row(0, 0, "failed", 502, "stream_interrupted"))}))
	// After the commit point nothing fails over: the client keeps what it
	// got and the stream ends with the error frame, never [DONE].
	add(streamOnly("cut-after-commit", matrixCase{primary: mockupstream.Behavior{ResetAfterChunks: 2},
		want: cutAfterCommit("Hello from primary chunk 1 2", time.Second)}))
	add(streamOnly("stall-after-commit", matrixCase{primary: mockupstream.Behavior{StallAfterChunks: 2},
		want: cutAfterCommit("Hello from primary chunk 1 2", 2*time.Second)}))
	add(streamOnly("no-done-after-commit", matrixCase{primary: mockupstream.Behavior{EndAfterChunks: 3, OmitFinishReason: true},
		want: cutAfterCommit(answer(primaryIdentity), time.Second)}))
	// A chat stream that gave its finish_reason is whole without [DONE].
	add(streamOnly("no-done-with-finish", matrixCase{primary: mockupstream.Behavior{EndAfterChunks: 3},
		want: matrixWant{status: 200, text: answer(primaryIdentity), attempts: [2]int{1, 0}, within: time.Second,
			rows: []candRow{row(0, 0, "success", 200, ""), unusedFallback}, request: requestOK}}))
	// A context-length refusal fails over (the fallback may have a larger
	// window) and is recorded as such; when every model refuses, the last
	// refusal is the client's answer.
	add(both("context-length", func(stream bool) matrixCase {
		return matrixCase{primary: mockupstream.Behavior{ErrorKind: mockupstream.ErrorContextLength},
			want:  rescued(stream, row(0, 0, "failed", 400, "context_length_exceeded"), 0, quick, time.Second),
			keys2: twoKeys(stream, row(0, 0, "failed", 400, "context_length_exceeded"), 0, quick, time.Second)}
	})...)
	add(both("context-length-everywhere", func(stream bool) matrixCase {
		return matrixCase{primary: mockupstream.Behavior{ErrorKind: mockupstream.ErrorContextLength},
			fallback: &mockupstream.Behavior{ErrorKind: mockupstream.ErrorContextLength},
			want: matrixWant{status: 400, errCode: "context_length_exceeded", attempts: [2]int{1, 1},
				gaps: []gapWant{{0, 1, 0, quick}}, within: time.Second,
				rows:    []candRow{row(0, 0, "failed", 400, "context_length_exceeded"), row(1, 0, "failed", 400, "context_length_exceeded")},
				request: reqRow{"failed", 400, "context_length_exceeded"}}}
	})...)
	// A content-filter 400 is the request's fault: relayed, no failover.
	add(both("content-filter", func(stream bool) matrixCase {
		return matrixCase{primary: mockupstream.Behavior{ErrorKind: mockupstream.ErrorContentFilter},
			want: matrixWant{status: 400, errCode: "content_filter", attempts: [2]int{1, 0}, within: time.Second,
				rows: []candRow{row(0, 0, "failed", 400, "upstream_http_error"), unusedFallback}, request: reqRow{"failed", 400, "upstream_http_error"}}}
	})...)
	add(matrixCase{name: "flapping/body", primary: mockupstream.Behavior{DownFor: flapDown},
		provider: "health: { cooldown: 1s, max_cooldown: 2s }", custom: flapping})

	add(retryCases()...)
	add(resumeCases()...)
	return cs
}

// retryCases need the last-resort retry per provider (retry: { attempts:
// 1, backoff: 250ms, max_wait: 5s } by default): a 5xx or a reset is
// retried once on the same candidate after the backoff (retry_index 1)
// before failing over; a 429/503 whose Retry-After is at most max_wait is
// retried after it only when no other healthy candidate is left.
func retryCases() []matrixCase {
	var cs []matrixCase
	backoff := 250 * time.Millisecond
	cs = append(cs, both("500-once", func(stream bool) matrixCase {
		return matrixCase{primary: mockupstream.Behavior{FailFirst: 1, Status: 500},
			want: matrixWant{status: 200, text: answer(primaryIdentity), done: stream, attempts: [2]int{2, 0},
				gaps: []gapWant{{0, 1, backoff, backoff + 500*time.Millisecond}}, within: 1500 * time.Millisecond,
				rows:    []candRow{row(0, 0, "failed", 500, "upstream_http_error"), row(0, 1, "success", 200, ""), unusedFallback},
				request: requestOK}}
	})...)
	cs = append(cs, both("503", func(stream bool) matrixCase {
		return matrixCase{primary: mockupstream.Behavior{Status: 503},
			want: matrixWant{status: 200, text: answer(fallbackIdentity), done: stream, attempts: [2]int{2, 1},
				gaps:   []gapWant{{0, 1, backoff, backoff + 500*time.Millisecond}, {1, 2, 0, quick}},
				within: 1500 * time.Millisecond,
				rows: []candRow{row(0, 0, "failed", 503, "upstream_http_error"), row(0, 1, "failed", 503, "upstream_http_error"),
					fallbackOK},
				request: requestOK}}
	})...)
	cs = append(cs, both("reset-before-headers", func(stream bool) matrixCase {
		return matrixCase{primary: mockupstream.Behavior{ResetBeforeHeaders: true},
			want: matrixWant{status: 200, text: answer(fallbackIdentity), done: stream, attempts: [2]int{2, 1},
				gaps:   []gapWant{{0, 1, backoff, backoff + 500*time.Millisecond}, {1, 2, 0, quick}},
				within: 1500 * time.Millisecond,
				rows: []candRow{row(0, 0, "failed", 502, "upstream_connect_error"), row(0, 1, "failed", 502, "upstream_connect_error"),
					fallbackOK},
				request: requestOK}}
	})...)
	// gpt-4o's Retry-After (10s) is past max_wait and cools it; gpt-4o-mini's
	// first answer is a 429 with Retry-After 1: no other candidate is healthy,
	// so it is waited for and gpt-4o-mini tried again.
	cs = append(cs, matrixCase{name: "retry-after-wait/body", primary: mockupstream.Behavior{Status: 429, RetryAfter: "10"},
		fallback: &mockupstream.Behavior{Status: 429, RetryAfter: "1", FailFirst: 1},
		want: matrixWant{status: 200, text: answer(fallbackIdentity), attempts: [2]int{1, 2},
			gaps:   []gapWant{{0, 1, 0, quick}, {1, 2, time.Second, 1700 * time.Millisecond}},
			within: 2500 * time.Millisecond,
			rows: []candRow{row(0, 0, "failed", 429, "upstream_http_error"), row(1, 0, "failed", 429, "upstream_http_error"),
				row(1, 1, "success", 200, "")},
			request: requestOK}})
	return cs
}

// resumeCases need stream resume (route resume: { attempts: 1 }, provider
// prefill: true): a stream cut after its commit point goes on with the next
// candidate, given the text relayed so far as an assistant prefill; the
// continuation's row has resumed_from (the candidate it resumed). Their
// routes file does not load without those fields, so they run on a
// gateway of their own.
func resumeCases() []matrixCase {
	resume, prefill := "resume: { attempts: 1 }", "prefill: true"
	relayed := "Hello from primary chunk 1 2"
	from0 := 0
	ok := fallbackOK
	ok.resumedFrom = &from0
	rejected := row(1, 0, "failed", 400, "upstream_http_error")
	rejected.resumedFrom = &from0
	return []matrixCase{
		streamOnly("resume-cut-after-commit", matrixCase{route: resume, provider: prefill,
			primary: mockupstream.Behavior{ResetAfterChunks: 2},
			// The mock continues its answer after the prefill's words, so
			// the client's text is the answer whole: no overlap, no gap.
			want: matrixWant{status: 200, text: answer(primaryIdentity), done: true, attempts: [2]int{1, 1},
				gaps: []gapWant{{0, 1, 0, quick}}, within: time.Second, prefill: relayed,
				rows:    []candRow{row(0, 0, "failed", 502, "stream_interrupted"), ok},
				request: requestOK}}),
		// The fallback refuses the prefilled continuation (a 400): the
		// client's stream ends with the error frame, as without resume.
		streamOnly("resume-fallback-rejects-prefill", matrixCase{route: resume, provider: prefill,
			primary:  mockupstream.Behavior{ResetAfterChunks: 2},
			fallback: &mockupstream.Behavior{Status: 400},
			want: matrixWant{status: 200, text: relayed, frame: true, attempts: [2]int{1, 1},
				gaps: []gapWant{{0, 1, 0, quick}}, within: time.Second, prefill: relayed,
				rows:    []candRow{row(0, 0, "failed", 502, "stream_interrupted"), rejected},
				request: reqRow{"failed", 502, "stream_interrupted"}}}),
	}
}

// TestFailoverMatrix runs every failure mode against the real gateway
// binary, in-process mock providers on loopback and a real Postgres, in the
// same-provider and the cross-provider setup, and then checks that both
// setups gave the same rescue for every mode. A few modes also run on the
// same provider with two keys ("same2"), for what a failure skips on the
// other key.
//
// The resume cases (a route with resume, providers with prefill) run on a
// gateway of their own, so that the other cases keep the default of no
// resume.
func TestFailoverMatrix(t *testing.T) {
	start := time.Now()
	var core, resume []matrixCase
	for _, c := range matrixCases() {
		if c.route != "" {
			resume = append(resume, c)
		} else {
			core = append(core, c)
		}
	}
	var got outcomes
	t.Run("run", func(t *testing.T) {
		t.Run("core", func(t *testing.T) { runMatrix(t, core, &got) })
		t.Run("resume", func(t *testing.T) { runMatrix(t, resume, &got) })
	})
	// Providers fail per model: whether gpt-4o-mini sits on gpt-4o's provider
	// and key or on another provider must not change the rescue.
	t.Run("same rescue", func(t *testing.T) {
		for _, c := range append(core, resume...) {
			t.Run(c.name, func(t *testing.T) {
				o := got.get(c.name)
				switch {
				case o["same"] == "" || o["cross"] == "":
					t.Errorf("not run in both setups (same %q, cross %q)", o["same"], o["cross"])
				case o["same"] != o["cross"]:
					t.Errorf("the setups disagree:\n  same provider:  %s\n  cross provider: %s", o["same"], o["cross"])
				}
			})
		}
	})
	t.Logf("matrix took %s", time.Since(start).Round(time.Millisecond))
}

// runMatrix starts one gateway for the cases in both setups and runs them
// side by side: each has its own mocks and providers, so no health state is
// shared.
func runMatrix(t *testing.T, cases []matrixCase, got *outcomes) {
	var worlds []*matrixWorld
	for i := range cases {
		for _, setup := range []string{"same", "cross"} {
			worlds = append(worlds, newWorld(t, setup, &cases[i]))
		}
		if cases[i].keys2 != nil {
			worlds = append(worlds, newWorld(t, "same2", &cases[i]))
		}
	}
	g := startMatrix(t, worlds)
	t.Run("cases", func(t *testing.T) {
		for _, w := range worlds {
			t.Run(w.setup+"/"+w.c.name, func(t *testing.T) {
				t.Parallel()
				w.arm()
				var outcome string
				switch {
				case w.setup == "same2":
					outcome = checkOnce(t, g, w, *w.c.keys2)
				case w.c.custom != nil:
					outcome = w.c.custom(t, g, w)
				default:
					outcome = checkCase(t, g, w)
				}
				got.put(w.c.name, w.setup, outcome)
			})
		}
	})
	if !waitUntil(5*time.Second, func() bool { return scrapeSums(t, g.addr)["gateway_admission_active"] == 0 }) {
		t.Errorf("admission slots still held after the matrix: %v", scrapeSums(t, g.addr)["gateway_admission_active"])
	}
}

// checkCase sends the case's request (and its second one) and checks them;
// it returns the outcome the setups are compared on (everything but timings
// and provider names).
func checkCase(t *testing.T, g *matrixGateway, w *matrixWorld) string {
	outcome := checkOnce(t, g, w, w.c.want)
	if w.c.then != nil {
		outcome += " then " + checkOnce(t, g, w, *w.c.then)
	}
	return outcome
}

func checkOnce(t *testing.T, g *matrixGateway, w *matrixWorld, want matrixWant) string {
	t.Helper()
	res := g.send(t, w.route, w.c.stream)
	req, rows := g.records(t, res.id)
	attempts := w.attempts()
	arr := w.arr.snapshot()
	outcome := fmt.Sprintf("%s attempts=%v rows=%v request=%v", res, attempts, rows, req)
	t.Logf("%s in %s", outcome, res.elapsed.Round(time.Millisecond))

	if res.status != want.status || res.text != want.text || res.done != want.done || (res.frame != "") != want.frame ||
		res.errCode != want.errCode {
		t.Errorf("client got %s, want %s\nbody: %.1500s", res, clientResult{status: want.status, text: want.text, done: want.done,
			frame: map[bool]string{true: "frame"}[want.frame], errCode: want.errCode}, res.body)
	}
	if want.frame && !strings.Contains(res.frame, `"code":"stream_interrupted"`) {
		t.Errorf("the stream did not end with the gateway's stream_interrupted frame: %q", res.frame)
	}
	if attempts != want.attempts {
		t.Errorf("attempts (gpt-4o, gpt-4o-mini) = %v, want %v; arrivals %v", attempts, want.attempts, arr)
	}
	for _, gw := range want.gaps {
		if gw.j >= len(arr) {
			t.Errorf("no arrival %d to time (arrivals %v)", gw.j, arr)
			continue
		}
		if gap := arr[gw.j].at.Sub(arr[gw.i].at); gap < gw.min || gap > gw.max {
			t.Errorf("gap between attempts %d (%s) and %d (%s) = %s, want within [%s, %s]",
				gw.i, arr[gw.i].model, gw.j, arr[gw.j].model, gap.Round(time.Millisecond), gw.min, gw.max)
		}
	}
	if res.elapsed > want.within {
		t.Errorf("took %s, want at most %s", res.elapsed.Round(time.Millisecond), want.within)
	}
	if req != want.request {
		t.Errorf("request row %v, want %v", req, want.request)
	}
	if len(rows) != len(want.rows) {
		t.Errorf("candidate rows:\n  got  %v\n  want %v", rows, want.rows)
	} else {
		for i, r := range rows {
			wr := want.rows[i]
			wr.model = w.models[wr.idx]
			if r.String() != wr.String() || (wr.resumedFrom == nil) != (r.resumedFrom == nil) {
				t.Errorf("candidate row %d: %v, want %v", i, r, wr)
			}
		}
	}
	if want.prefill != "" {
		checkPrefill(t, w.fallback, want.prefill)
	}
	return outcome
}

// checkPrefill: the continuation asked the fallback to go on from the text
// the client already has, as the last (assistant) message.
func checkPrefill(t *testing.T, m *mockupstream.Server, text string) {
	t.Helper()
	last, _ := m.LastRequestAt("/v1/chat/completions")
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(last.Body, &body); err != nil || body.Model != fallbackModel || len(body.Messages) == 0 {
		t.Errorf("the fallback's last request is not the continuation: %s", last.Body)
		return
	}
	msg := body.Messages[len(body.Messages)-1]
	if content, _ := msg.Content.(string); msg.Role != "assistant" || content != text {
		t.Errorf("the continuation's last message is %s %v, want the assistant prefill %q", msg.Role, msg.Content, text)
	}
}
