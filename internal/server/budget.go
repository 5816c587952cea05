package server

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/routes"
)

// openBudgets builds the client and team budgets of the routes file
// (docs/cost.md, "Budgets"): shared through Redis with GATEWAY_REDIS_URL,
// local otherwise, rebuilt from the ledger's costs when records are on.
// With no budget in the file it still answers (every request passes), so
// a reload that adds one needs no restart.
func (g *Gateway) openBudgets(ctx context.Context, r *routes.Routes) error {
	opts := budget.Options{ReservationTTL: g.Config.BudgetReservationTTL, Logger: g.Log}
	if !g.Config.RedisURL.Empty() {
		ro, err := redis.ParseURL(g.Config.RedisURL.Reveal())
		if err != nil {
			return fmt.Errorf("GATEWAY_REDIS_URL: %w", err) // quota.New refused it first; kept for safety
		}
		ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond
		g.budgetRedis = redis.NewClient(ro)
		opts.Redis = g.budgetRedis
	}
	if g.Reports != nil {
		opts.Ledger = g.Reports
	}
	if g.Quota != nil {
		opts.Replicas = replicaCount(g.Quota.Replicas)
	}
	g.Budgets = budget.New(opts)
	return g.Budgets.SetLimits(ctx, budgetLimits(r))
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
			out = append(out, budget.Limit{Owner: budget.Owner{Kind: budget.KindTeam, Name: t.Name},
				USD: t.Budget.USD, Per: budget.Per(t.Budget.Per)})
		}
	}
	for _, c := range r.Clients {
		if c.Budget != nil {
			out = append(out, budget.Limit{Owner: budget.Owner{Kind: budget.KindClient, Name: c.Name},
				USD: c.Budget.USD, Per: budget.Per(c.Budget.Per)})
		}
	}
	return out
}

// closeBudgets lets go of the budgets' Redis connections; reservations
// still held expire in Redis.
func (g *Gateway) closeBudgets() {
	if g.Budgets != nil {
		g.Budgets.Close()
	}
	if g.budgetRedis != nil {
		_ = g.budgetRedis.Close()
	}
}
