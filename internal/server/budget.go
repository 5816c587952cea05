package server

import (
	"context"
	"time"

	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
)

// openBudgets builds the client and team budgets of the routes file
// (docs/cost.md, "Budgets"): shared through Redis with GATEWAY_REDIS_URL,
// local otherwise, rebuilt from the ledger's costs when records are on.
// With no budget in the file it still answers (every request passes), so
// a reload that adds one needs no restart.
func (g *Gateway) openBudgets(ctx context.Context, r *routes.Routes) error {
	opts := budget.Options{ReservationTTL: g.Config.BudgetReservationTTL, Logger: g.Log}
	if g.Quota != nil {
		// The shared limits' client: one pool, and calls bounded by their
		// context and tried once, which the budgets' degraded mode needs.
		opts.Redis = g.Quota.Client()
	}
	if g.Reports != nil {
		opts.Ledger = readyLedger{g.Reports}
	}
	if g.Quota != nil {
		opts.Replicas = replicaCount(g.Quota.Replicas)
	}
	g.Budgets = budget.New(opts)
	if err := g.setBudgets(ctx, r); err != nil {
		// The limits hold; a window whose spend could not be read yet (the
		// ledger's tables are made by the writer, which has just started)
		// is rebuilt by the first request that needs it.
		g.Log.Warn("budgets: spend not rebuilt yet; the first request of each budget will", "err", err)
	}
	return nil
}

// replicaCount adapts the quota store's count of replicas alive.
type replicaCount func() int

func (f replicaCount) Alive() int { return f() }

// budgetLimits are the routes file's budgets: each team's, then each
// client's.
func budgetLimits(r *routes.Routes) []budget.Limit {
	var out []budget.Limit
	for _, t := range r.Teams {
		if t.Budget != nil {
			out = append(out, budget.Limit{Owner: budget.Owner{Kind: budget.Team, Name: t.Name},
				USD: t.Budget.USD, Per: budget.Per(t.Budget.Per)})
		}
	}
	for _, c := range r.Clients {
		if c.Budget != nil {
			out = append(out, budget.Limit{Owner: budget.Owner{Kind: budget.Client, Name: c.Name},
				USD: c.Budget.USD, Per: budget.Per(c.Budget.Per)})
		}
	}
	return out
}

// closeBudgets replays the settles an outage kept; reservations still held
// expire in Redis. Before the quota store closes the client they share.
func (g *Gateway) closeBudgets() {
	if g.Budgets != nil {
		g.Budgets.Close()
	}
}

// readyLedger is the report writer as the budgets' ledger: a rebuild asked
// for while the writer is still connecting (its migrations make the
// tables) waits up to ledgerWait for it, so the first requests after a
// start are decided on the ledger rather than refused.
type readyLedger struct{ w *report.Writer }

// ledgerWait bounds how long a budget's rebuild waits for the ledger.
const ledgerWait = 3 * time.Second

func (l readyLedger) SpentSince(ctx context.Context, owner, name string, since time.Time) (float64, error) {
	deadline := time.Now().Add(ledgerWait)
	for l.w.State() == report.StateConnecting && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return l.w.SpentSince(ctx, owner, name, since)
}
