package main

import (
	"fmt"
	"io"

	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/config"
)

// checkConfig loads the routes file and prints, per model, the candidates a
// request would be planned into (one draw; weights make later draws differ).
func checkConfig(cfg config.Config, out io.Writer) error {
	routes, err := candidates.LoadRoutes(cfg.RoutesFile)
	if err != nil {
		return err
	}
	planner, err := candidates.NewPlanner(routes, plannerOptions(cfg))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "routes file %s: %d providers, %d models, %d clients\n",
		cfg.RoutesFile, len(routes.Providers), len(routes.Models), len(routes.Clients))
	for _, p := range planner.Providers() {
		fmt.Fprintf(out, "provider %s: %s keys=%d max_concurrency=%d queue_budget=%s first_byte=%s total=%s\n",
			p.Name, p.Origin, len(p.Targets), p.MaxConcurrency, p.QueueBudget, p.FirstByte, p.Total)
	}
	for _, m := range planner.Models() {
		plan, _ := planner.Plan(m)
		fmt.Fprintf(out, "model %s:\n", m)
		for _, c := range plan {
			fmt.Fprintf(out, "  %d. %s (provider %s, target %s, upstream model %s)\n",
				c.Index, c.ID, c.Provider().Name, c.Target.ID, c.Model)
		}
	}
	fmt.Fprintf(out, "hold mode: %s\n", cfg.HoldMode)
	return nil
}

func plannerOptions(cfg config.Config) candidates.PlannerOptions {
	return candidates.PlannerOptions{DefaultFirstByte: cfg.FirstByteTimeout, DefaultQueueBudget: cfg.QueueBudget}
}
