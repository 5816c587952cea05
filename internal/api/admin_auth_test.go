package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestAdminAuthSaysWhich protects the operator who mistyped the admin
// token: a missing token and a wrong one get different 401 messages, both
// OpenAI-shaped with code invalid_api_key, and neither message echoes what
// was sent or tells anything of the real token.
func TestAdminAuthSaysWhich(t *testing.T) {
	s := adminServer(t, nil)
	for _, tc := range []struct {
		name, auth, want string
	}{
		{"missing", "", "admin token required"},
		{"empty bearer", "Bearer ", "admin token required"},
		{"wrong", "Bearer admin-test-tokeX", "admin token is not valid"},
		{"prefix of the token", "Bearer admin-test", "admin token is not valid"},
		{"longer", "Bearer " + testAdminToken + "x", "admin token is not valid"},
		{"not bearer", "Basic " + testAdminToken, "admin token is not valid"},
		{"lower-case scheme", "bearer " + testAdminToken, "admin token is not valid"},
		{"right", "Bearer " + testAdminToken, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, e := adminGetRaw(t, s, "/admin/admission", tc.auth)
			if tc.want == "" {
				if code != http.StatusOK {
					t.Fatalf("status %d (%s), want 200", code, e.Message)
				}
				return
			}
			if code != http.StatusUnauthorized || e.Type != typeAuthentication || e.Code != codeInvalidAPIKey {
				t.Fatalf("got %d %s/%s, want 401 %s/%s", code, e.Type, e.Code, typeAuthentication, codeInvalidAPIKey)
			}
			if !strings.HasPrefix(e.Message, tc.want) {
				t.Errorf("message %q, want it to start with %q", e.Message, tc.want)
			}
			for _, leak := range []string{"admin-test", "tokeX", testAdminToken} {
				if strings.Contains(e.Message, leak) {
					t.Errorf("message %q echoes %q", e.Message, leak)
				}
			}
		})
	}
}
