package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/cache"
	"github.com/llmgw/gateway/internal/mockupstream"
)

// TestItemKey: an item's key depends on its scope and id, and is never
// the key of an answer made of the same strings.
func TestItemKey(t *testing.T) {
	k := itemKey("client:a", "msg_1")
	if k == itemKey("client:b", "msg_1") || k == itemKey("client:a", "msg_2") || k == itemKey("client:amsg_1", "") {
		t.Fatal("item keys of other scopes or ids are equal")
	}
	if ak, _ := cache.NewKey(cache.Identity{Route: itemsNamespace, Scope: "client:a", Model: "msg_1"}, []byte(`{}`)); ak == k {
		t.Fatal("an item key equals an answer key")
	}
}

// itemsStoreDown is a cache store that is down (every call fails at once) or
// hung (every call waits for its deadline), as Redis can be.
type itemsStoreDown struct{ hung bool }

var errStoreDown = errors.New("store down")

func (b itemsStoreDown) wait(ctx context.Context) error {
	if !b.hung {
		return errStoreDown
	}
	<-ctx.Done()
	return ctx.Err()
}

func (b itemsStoreDown) Get(ctx context.Context, _ cache.Key) (cache.Entry, bool, error) {
	return cache.Entry{}, false, b.wait(ctx)
}

func (b itemsStoreDown) Set(ctx context.Context, _ cache.Key, _ cache.Entry) error {
	return b.wait(ctx)
}

// TestItemsStoreBroken: with the store down or hung, a translated
// Responses answer is still served (its items are not kept), and a
// reference to its message is refused as not held, 400 naming input[1].id,
// within the store's bound: never an error of the gateway's.
func TestItemsStoreBroken(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	for _, hung := range []bool{false, true} {
		up := mockupstream.New(mockupstream.Behavior{Identity: "anthropic"})
		url := startGatewayOn(t, up, newOutcomes(), "    format: anthropic", itemsStoreDown{hung: hung})
		client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
		post := func(body string) (int, []byte, time.Duration) {
			start := time.Now()
			resp, err := client.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, b, time.Since(start)
		}
		status, b, _ := post(`{"model":"m","input":"hi"}`)
		var answer struct {
			Output []struct {
				ID string `json:"id"`
			} `json:"output"`
		}
		if status != http.StatusOK || json.Unmarshal(b, &answer) != nil || len(answer.Output) != 1 {
			t.Fatalf("hung %v: the answer: %d %s", hung, status, b)
		}
		status, b, took := post(`{"model":"m","input":[{"role":"user","content":"hi"},{"type":"item_reference","id":"` + answer.Output[0].ID + `"}]}`)
		var refused struct {
			Error struct {
				Type, Param string
			} `json:"error"`
		}
		if status != http.StatusBadRequest || json.Unmarshal(b, &refused) != nil ||
			refused.Error.Type != typeInvalidRequest || refused.Error.Param != "input[1].id" {
			t.Errorf("hung %v: the reference: %d %s, want 400 naming input[1].id", hung, status, b)
		}
		if took > time.Second {
			t.Errorf("hung %v: the refusal took %v", hung, took)
		}
		client.CloseIdleConnections()
	}
}
