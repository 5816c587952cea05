package server

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/keys"
	"github.com/llmgw/gateway/internal/routes"
)

// apiKeys is the gateway's part of the keys issued through /admin/keys
// (docs/keys.md): the store the admin routes write, the in-memory set the
// request path reads, the syncer that keeps the set current, and the
// goroutine that gives the budgets the keys' limits. Nil fields without a
// database.
type apiKeys struct {
	store  *keys.Store
	cache  *keys.Cache
	syncer *keys.Syncer

	// The budgets are the routes file's and the keys': both sources
	// replace them whole, under mu, each with the other's last value.
	mu     sync.Mutex
	routes *routes.Routes

	changed chan struct{} // a new key set: the budgets follow (capacity 1)
	cancel  context.CancelFunc
	done    chan struct{}
}

// openKeys builds the keys' store, set and syncer when records are on, and
// loads the snapshot; startKeys starts following Postgres. Without a
// database there are no API keys: only the routes file's clients.
func (g *Gateway) openKeys(ctx context.Context, cacheCompile keys.Compile) error {
	if g.Config.DatabaseURL.Empty() {
		return nil
	}
	st, err := keys.Open(g.Config.DatabaseURL)
	if err != nil {
		return fmt.Errorf("api keys: %w", err)
	}
	k := &g.keys
	k.store = st
	k.cache = keys.NewCache(cacheCompile)
	k.changed = make(chan struct{}, 1)
	k.cache.OnChange(func(*keys.Set) {
		select {
		case k.changed <- struct{}{}:
		default: // a refresh is due already; it reads the newest set
		}
	})
	k.syncer = keys.NewSyncer(k.cache, keys.SyncOptions{
		DatabaseURL: g.Config.DatabaseURL, Refresh: g.Config.KeysRefresh,
		SnapshotPath: filepath.Join(g.Config.SpoolDir, keys.SnapshotFile), Logger: g.Log,
	})
	k.syncer.Start(ctx) // the snapshot is in when this returns
	return nil
}

// startBudgetFollow starts the goroutine that gives the budgets each new
// key set's limits; it ends in closeKeys. After openBudgets.
func (g *Gateway) startBudgetFollow(ctx context.Context) {
	k := &g.keys
	if k.cache == nil {
		return
	}
	ctx, k.cancel = context.WithCancel(ctx)
	k.done = make(chan struct{})
	go func() {
		defer close(k.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-k.changed:
			}
			k.mu.Lock()
			r := k.routes
			k.mu.Unlock()
			// A rebuild may wait on the ledger; on this goroutine rather
			// than the syncer's, so key changes keep arriving meanwhile.
			if err := g.setBudgets(ctx, r); err != nil {
				g.Log.Warn("budgets: spend not rebuilt yet after a key change", "err", err)
			}
		}
	}()
}

// setBudgets gives the budgets the limits of r (the routes in service)
// and of the live API keys.
func (g *Gateway) setBudgets(ctx context.Context, r *routes.Routes) error {
	k := &g.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	k.routes = r
	limits := budgetLimits(r)
	if k.cache != nil {
		limits = append(limits, keyBudgetLimits(k.cache.Current())...)
	}
	return g.Budgets.SetLimits(ctx, limits)
}

// keyBudgetLimits are the live keys' own budgets, owned by the key's
// name as a routes-file client's are by its name.
func keyBudgetLimits(s *keys.Set) []budget.Limit {
	var out []budget.Limit
	s.Each(func(k *keys.Key) {
		if k.Budget != nil && k.RevokedAt == nil {
			out = append(out, budget.Limit{Owner: budget.Owner{Kind: budget.Client, Name: k.Name},
				USD: k.Budget.USD, Per: budget.Per(k.Budget.Per)})
		}
	})
	return out
}

// closeKeys stops the syncer (which writes the snapshot a change is
// missing from) and the budgets' follower, and closes the store's pool.
func (g *Gateway) closeKeys() {
	k := &g.keys
	if k.syncer != nil {
		k.syncer.Close()
	}
	if k.cancel != nil {
		k.cancel()
		<-k.done
	}
	if k.store != nil {
		k.store.Close()
	}
}
