package main

// targetSpec is one target the benchmark checks: the phase that measures it
// (a BENCH_ONLY name, or "all"), the row's label exactly as targetRows prints it
// in a full run, and its threshold in short.
type targetSpec struct{ phase, target, threshold string }

// targetList is every row targetRows writes after a full run of every phase, in
// its order. TestTargetListMatchesReport holds targetRows to it, and
// TestDocTargetsTable holds the targets table of docs/benchmarks.md to it, so
// the doc cannot promise a target the code does not check, or the reverse.
var targetList = []targetSpec{
	{"open", "added latency p50 ≤ 1.2x baseline's at 1000 RPS", "≤ 1.2x"},
	{"open", "added latency p99 ≤ 1.5x baseline's at 1000 RPS", "≤ 1.5x"},
	{"open", "added latency p50 ≤ 1.2x baseline's at 2000 RPS", "≤ 1.2x"},
	{"open", "added latency p99 ≤ 1.5x baseline's at 2000 RPS", "≤ 1.5x"},
	{"closed", "closed-loop throughput ≥ 0.8x baseline's", "≥ 0.8x"},
	{"stream", "streaming added time to first chunk p50 ≤ 1.2x baseline's at 500 streams/s", "≤ 1.2x"},
	{"stream", "streaming added time to first chunk p99 ≤ 1.5x baseline's at 500 streams/s", "≤ 1.5x"},
	{"stream", "streaming added time to first chunk p50 ≤ 1.2x baseline's at 1000 streams/s", "≤ 1.2x"},
	{"stream", "streaming added time to first chunk p99 ≤ 1.5x baseline's at 1000 streams/s", "≤ 1.5x"},
	{"open", "CPU per request ≤ 1.5x baseline's (all open-loop runs)", "≤ 1.5x"},
	{"open", "CPU per request with its Postgres ≤ 1.15x baseline's (non-stream, all open-loop runs)", "≤ 1.15x"},
	{"stream", "CPU per request with its Postgres ≤ 1.25x baseline's (stream, all stream runs)", "≤ 1.25x"},
	{"hold", "gateway peak RSS < 150 MiB with 2000 open streams", "< 150 MiB"},
	{"hanging", "hanging primary: first chunk p99 after the first cooldown ≤ 1.2x backup alone's", "≤ 1.2x"},
	{"hanging", "hanging primary: last chunk p99 after the first cooldown ≤ 1.2x backup alone's", "≤ 1.2x"},
	{"hanging", "hanging primary: requests that paid the timeout ≤ failures (3) per cooldown period (2s) + probes, per run", "≤ 3 per 2 s + probes"},
	{"hanging", "hanging primary: after the first cooldown began, only the probes paid the timeout", "probes only"},
	{"tail", "tail rescue: first chunk p99 at least 5x lower with hedging on (after: p95)", "≥ 5x lower"},
	{"tail", "tail rescue: fewer than 10% extra upstream requests with hedging on", "< 10%"},
	{"replicas", "shared admission: Redis round trips on the grant path ≤ 1 at p50", "≤ 1"},
	{"translate", "translated Anthropic stream: added time to first chunk p50 ≤ 1.3x the pass-through's", "≤ 1.3x"},
	{"translate", "translated Bedrock stream: added time to first chunk p50 ≤ 1.3x the pass-through's", "≤ 1.3x"},
	{"translate", "translated Gemini stream: added time to first chunk p50 ≤ 1.3x the pass-through's", "≤ 1.3x"},
	{"budget", "budget in Redis: script calls per budgeted request ≤ 1 to reserve + ≤ 1 to settle", "≤ 1 + ≤ 1"},
	{"budget", "budget in Redis: p50 latency of a budgeted request ≤ 1.1x an unbudgeted one's", "≤ 1.1x"},
	{"tracing", "tracing off: gateway CPU per request ≤ 1.02x the build before tracing's", "≤ 1.02x"},
	{"tracing", "tracing off: p50 ≤ 1.02x the build before tracing's", "≤ 1.02x"},
	{"tracing", "tracing on at 1.0: gateway CPU per request ≤ 1.15x tracing off's", "≤ 1.15x"},
	{"tracing", "tracing on at 1.0: p50 ≤ 1.15x tracing off's", "≤ 1.15x"},
	{"all", "zero errors (gateway requests; records dropped)", "0"},
}
