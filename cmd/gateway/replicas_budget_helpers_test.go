package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/pgtest"
)

// The budget tests' fleet: replicas of the real binary sharing a private
// redis-server (so FLUSHALL and an outage touch no other test) and one
// Postgres database, which is the ledger the budgets are rebuilt from.
//
// Prices make every figure known in advance: input 1 USD and output 1000
// USD per million tokens, so a prompt token costs 1 micro-dollar and an
// output token 1000. The mock answers budgetChunks output tokens and as
// many prompt tokens as its body's bytes / 4 (rounded up); a request's
// estimate is its body's bytes / 4 at the input price plus its max_tokens
// at the output price (docs/cost.md, "Reservation"), so a client whose
// requests ask for max_tokens below budgetChunks is underestimated by
// 1000 micro-dollars per missing token.

// budgetChunks is the output tokens of every mock budgetAnswer.
const budgetChunks = 8

// budgetRoutes is provider p behind model m with the prices above, teams
// and clients appended by the caller.
func budgetRoutes(url, tail string) string {
	return `
providers:
  - name: p
    base_url: "` + url + `/v1"
    api_keys: ["sk-budget"]
    max_concurrency: 64
    queue_budget: 30s
    prices:
      m: { input: 1, output: 1000 }
models:
  - { name: m, candidates: [{ provider: p }] }
` + tail
}

// budgetClient is a client line of the routes file with a daily budget.
func budgetClient(name, token string, usd float64) replicaClient {
	return replicaClient{name: name, token: token,
		limits: "budget: { usd: " + strconv.FormatFloat(usd, 'f', -1, 64) + ", per: day }"}
}

// budgetBody is a chat request asking for maxTokens.
func budgetBody(maxTokens int) string {
	return `{"model":"m","max_tokens":` + strconv.Itoa(maxTokens) + `,"messages":[{"role":"user","content":"hello"}]}`
}

// estimateMicros is what the gateway reserves for body: bytes / 4 prompt
// tokens at 1 micro-dollar and max_tokens at 1000.
func estimateMicros(body string, maxTokens int) int64 {
	return int64(len(body)/4) + int64(maxTokens)*1000
}

// budgetFleet is n replicas, their Redis and their ledger.
type budgetFleet struct {
	t      *testing.T
	red    *privateRedis
	dsn    string
	routes string
	env    []string
	rs     []*replica
	mock   *peakMock
}

// startBudgetFleet starts a private Redis, a mock provider and n replicas
// of clients' routes.
func startBudgetFleet(t *testing.T, n int, b mockupstream.Behavior, clients []replicaClient, env ...string) *budgetFleet {
	t.Helper()
	b.Chunks = budgetChunks
	f := &budgetFleet{t: t, red: startPrivateRedis(t), dsn: pgtest.DatabaseURL(t), mock: newPeakMock(t, b), env: env}
	f.routes = writeReplicaRoutes(t, budgetRoutes(f.mock.url, ""), clients...)
	f.rs = make([]*replica, n)
	var wg sync.WaitGroup
	for i := range f.rs {
		wg.Go(func() { f.rs[i] = f.startReplica(i) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	f.seeEachOther()
	return f
}

// startReplica runs replica i (again) on the fleet's routes, Redis and
// ledger.
func (f *budgetFleet) startReplica(i int) *replica {
	id := "r" + strconv.Itoa(i)
	e := append([]string{"GATEWAY_CONFIG=" + f.routes, "GATEWAY_DATABASE_URL=" + f.dsn,
		"GATEWAY_ADMIN_TOKEN=" + fmtAdminToken, "GATEWAY_SPOOL_DIR=" + f.t.TempDir(),
		"GATEWAY_REDIS_URL=" + f.red.url(), "GATEWAY_REPLICA_ID=" + id, "GATEWAY_REDIS_LEASE_TTL=3s"}, f.env...)
	p := startGateway(f.t, e...)
	return &replica{gatewayProc: p, id: id, base: "http://" + p.addr}
}

// seeEachOther waits until every replica counts the whole fleet: a share
// during an outage divides by the replicas last seen.
func (f *budgetFleet) seeEachOther() {
	t := f.t
	t.Helper()
	for _, r := range f.rs {
		if !waitUntil(5*time.Second, func() bool { return scrapeSums(t, r.addr)["gateway_quota_replicas"] == float64(len(f.rs)) }) {
			t.Fatalf("replica %s: gateway_quota_replicas %v, want %d", r.id, scrapeSums(t, r.addr)["gateway_quota_replicas"], len(f.rs))
		}
	}
}

// stopAll stops every replica (SIGTERM: a deploy; the writer drains its
// records to Postgres first).
func (f *budgetFleet) stopAll() {
	t := f.t
	t.Helper()
	for _, r := range f.rs {
		r.signal(t, syscall.SIGTERM)
	}
	for _, r := range f.rs {
		if code := r.exitCode(t, 10*time.Second); code != 0 {
			t.Fatalf("replica %s exited %d on SIGTERM:\n%s", r.id, code, r.logs.String())
		}
	}
}

// startAll starts every replica again and waits until they see each other.
func (f *budgetFleet) startAll() {
	t := f.t
	t.Helper()
	var wg sync.WaitGroup
	for i := range f.rs {
		wg.Go(func() { f.rs[i] = f.startReplica(i) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	f.seeEachOther()
}

// budgetAnswer is one request's outcome as the client saw it.
type budgetAnswer struct {
	code      int
	body      string
	remaining string // x-gateway-budget-remaining-usd
	err       error
}

// post sends body as token to replica i.
func (f *budgetFleet) post(i int, token, body string) budgetAnswer {
	resp, b, err := replicaPost(context.Background(), f.rs[i%len(f.rs)], token, body)
	if err != nil {
		return budgetAnswer{err: err}
	}
	return budgetAnswer{code: resp.StatusCode, body: string(b), remaining: resp.Header.Get("X-Gateway-Budget-Remaining-Usd")}
}

// refusedForBudget fails unless a is the documented refusal of client's
// daily budget.
func refusedForBudget(t *testing.T, what string, a budgetAnswer, client string) {
	t.Helper()
	if a.err != nil {
		t.Errorf("%s: %v", what, a.err)
		return
	}
	var e struct {
		Error struct{ Type, Code, Message string }
	}
	_ = json.Unmarshal([]byte(a.body), &e)
	if a.code != http.StatusTooManyRequests || e.Error.Type != "insufficient_quota" || e.Error.Code != "budget_exceeded" ||
		e.Error.Message != "budget exceeded: client "+client+", day" {
		t.Errorf("%s: %d %s, want 429 insufficient_quota / budget_exceeded naming client %s, day", what, a.code, a.body, client)
	}
}

// budgetView is one budget of GET /admin/budgets.
type budgetView struct {
	Owner struct {
		Kind, Name string
	} `json:"owner"`
	Window       string  `json:"window"`
	LimitUSD     float64 `json:"limit_usd"`
	SpentUSD     float64 `json:"spent_usd"`
	ReservedUSD  float64 `json:"reserved_usd"`
	RemainingUSD float64 `json:"remaining_usd"`
	Degraded     bool    `json:"degraded"`
}

// budgetOf reads client's budget from r's /admin/budgets.
func budgetOf(t *testing.T, r *replica, client string) budgetView {
	t.Helper()
	var v struct{ Budgets []budgetView }
	r.adminGET(t, "/admin/budgets", &v)
	for _, b := range v.Budgets {
		if b.Owner.Kind == "client" && b.Owner.Name == client {
			return b
		}
	}
	t.Fatalf("replica %s: no budget of client %s in /admin/budgets: %+v", r.id, client, v.Budgets)
	return budgetView{}
}

// ledgerRow is one request of the ledger.
type ledgerRow struct {
	status            string
	code              int
	cost              float64
	created, finished time.Time
}

// ledger reads client's requests from Postgres.
func (f *budgetFleet) ledger(client string) []ledgerRow {
	t := f.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT status, coalesce(status_code, 0), coalesce(cost_usd, -1), created_at, coalesce(finished_at, created_at) FROM requests WHERE client = $1`, client)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ledgerRow, error) {
		var l ledgerRow
		var code int32
		err := r.Scan(&l.status, &code, &l.cost, &l.created, &l.finished)
		l.code = int(code)
		return l, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ledgerOf waits until the ledger holds n finished requests of client,
// every one a costed success, and returns their costs and the costs' sum
// in micro-dollars (costs here are whole micro-dollars).
func (f *budgetFleet) ledgerOf(client string, n int) (costs []int64, sum int64) {
	t := f.t
	t.Helper()
	var rows []ledgerRow
	done := func() bool {
		rows = f.ledger(client)
		for _, r := range rows {
			if r.status == "pending" {
				return false
			}
		}
		return len(rows) >= n
	}
	if !waitUntil(5*time.Second, done) || len(rows) != n {
		t.Fatalf("the ledger holds %d requests of %s, want %d finished", len(rows), client, n)
	}
	for i, r := range rows {
		if r.status != "success" || r.code != http.StatusOK || r.cost <= 0 {
			t.Fatalf("ledger row %d of %s: %s %d cost %v, want a costed success", i, client, r.status, r.code, r.cost)
		}
		costs = append(costs, micros(r.cost))
		sum += micros(r.cost)
	}
	return costs, sum
}

// usd formats micro-dollars.
func usd(m int64) string { return fmt.Sprintf("%.6f", float64(m)/1e6) }

// micros is USD in whole micro-dollars (costs here are whole ones).
func micros(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

// okCount counts the 200s of answers and fails on anything but a 200 or
// the budget's refusal.
func okCount(t *testing.T, answers []budgetAnswer, client string) (ok, refused int) {
	t.Helper()
	for i, a := range answers {
		if a.err == nil && a.code == http.StatusOK {
			ok++
			continue
		}
		refused++
		refusedForBudget(t, fmt.Sprintf("request %d of %s", i, client), a, client)
	}
	return ok, refused
}

// trimUSD parses a remaining header.
func trimUSD(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		t.Fatalf("x-gateway-budget-remaining-usd %q: %v", s, err)
	}
	return v
}
