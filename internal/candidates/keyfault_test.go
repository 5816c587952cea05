package candidates

import (
	"testing"

	"github.com/llmgw/gateway/internal/upstream"
)

// TestClassifyKeyFault: a 400 that blames the key (Gemini's
// API_KEY_INVALID) fails over to the provider's other keys and cools the
// key, as a 401 does, instead of being relayed as the client's fault.
func TestClassifyKeyFault(t *testing.T) {
	f := Classify(&upstream.StatusError{Code: 400, KeyFault: true, Body: []byte(`{}`)}, false, nil)
	if !f.Failover || f.Scope != ScopeKey || !f.Health || !f.Auth || f.Relay != nil || f.Code != 400 {
		t.Fatalf("%+v", f)
	}
	if se := (&upstream.StatusError{Code: 413, KeyFault: true}); se.ClientFault() || !se.KeyScoped() {
		t.Fatal("a key fault in a 413 is a client fault")
	}
	f = Classify(&upstream.StatusError{Code: 400, Body: []byte(`{}`)}, false, nil)
	if f.Failover || f.Relay == nil {
		t.Fatalf("a plain 400: %+v", f)
	}
}
