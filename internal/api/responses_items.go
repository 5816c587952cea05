package api

import (
	"bytes"
	"context"
	"time"

	"github.com/llmgw/gateway/internal/cache"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/upstream/responsesclient"
)

// Output items of translated Responses answers. OpenAI stores every
// response unless the request says store: false, and its clients name the
// items of an earlier answer as {"type":"item_reference","id":...} rather
// than send them again (the Vercel AI SDK's openai(model) does, in every
// tool round trip). A provider the gateway translates for stores nothing,
// so the gateway keeps the message and function_call items it made, as
// their Responses JSON, for itemsTTL, scoped to the client that made them,
// in the response cache's store (shared by the replicas when that is
// Redis), and resolves the references of that client's later requests
// from them. Requests passed through to OpenAI are left alone: OpenAI
// holds their items.

// itemsTTL is how long a kept item can be referenced (docs/formats.md).
const itemsTTL = time.Hour

// itemsNamespace leads every item's key, so no item key can be an
// answer's (those hash a route, a scope, a model and a body).
const itemsNamespace = "llmgw responses output item v1"

// itemKey is the store key of the item id made for scope.
func itemKey(scope, id string) cache.Key { return cache.PartsKey(itemsNamespace, scope, id) }

// itemsScope is the identity kept items are scoped to: the client, as the
// response cache's client scope names it (a configured client's name, a
// managed key's name; "" on a gateway without client keys).
func itemsScope(who string) string { return "client:" + who }

// prepareItems readies a Responses request whose candidates include one
// the gateway translates for: its item references resolved from the
// client's kept items, and its answer's items kept unless it said
// store: false. It runs before the first translation (checkFirst).
func (s *Server) prepareItems(ctx context.Context, chat *upstream.ChatRequest, plan []candidates.Candidate, who string) {
	if chat.Route != upstream.RouteResponses || !translatesAny(plan, chat.Route) {
		return
	}
	scope := itemsScope(who)
	// Only a body that names the type has references: every other request
	// pays one scan of its bytes, and no decode.
	if bytes.Contains(chat.Body, []byte(`"item_reference"`)) {
		chat.Items = s.lookupItems(ctx, scope, responsesclient.References(chat.Body))
	}
	if !chat.NoStore {
		chat.KeepItems = func(items []responsesclient.Item) { s.keepItems(ctx, scope, items) }
	}
}

func translatesAny(plan []candidates.Candidate, route upstream.Route) bool {
	for i := range plan {
		if plan[i].Target.Provider.Endpoint.Translates(route) {
			return true
		}
	}
	return false
}

// lookupItems reads the items ids names, each within storeTimeout. It stops
// at the first that is not there (or not read in time): the translation
// refuses the request at that reference, 400, whatever the rest are.
func (s *Server) lookupItems(ctx context.Context, scope string, ids []string) responsesclient.Items {
	if len(ids) == 0 {
		return nil
	}
	items := make(responsesclient.Items, len(ids))
	for _, id := range ids {
		e, ok := s.cacheGet(ctx, itemKey(scope, id))
		if !ok {
			break
		}
		items[id] = e.Body
	}
	return items
}

// keepItems stores the items of one answer for itemsTTL, all within
// storeTimeout, and not cut short by the client leaving: it runs before the
// answer's last bytes are written. A store that fails keeps nothing, and a
// later reference to the item is refused (400), never an error of the
// gateway.
func (s *Server) keepItems(ctx context.Context, scope string, items []responsesclient.Item) {
	if len(items) == 0 {
		return
	}
	st := s.cacheStore()
	ctx = context.WithoutCancel(ctx)
	sctx, cancel := s.storeContext(ctx)
	defer cancel()
	now := time.Now()
	for _, it := range items {
		if err := st.Set(sctx, itemKey(scope, it.ID), cache.Entry{Body: it.JSON, Stored: now, Expires: now.Add(itemsTTL)}); err != nil {
			// Counted as any store failure is: the items not kept are
			// refused when referenced, and the count says why.
			s.cacheStoreFailed(ctx, "set", err)
			return
		}
	}
}
