package api

import (
	"context"
	"net/http"

	"github.com/google/uuid"
)

type ctxKey int

const (
	keyRequestID ctxKey = iota
	keyClientRequestID
)

// withRequestID gives every request the gateway's own fresh UUIDv7, on the
// response and in the context. A client's X-Request-Id is kept aside for the
// record when it is well-formed, and never echoed.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, identify(w, r))
	})
}

// identify sets the request's ID on the response and in the context.
func identify(w http.ResponseWriter, r *http.Request) *http.Request {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	w.Header().Set("X-Request-Id", id.String())
	ctx := context.WithValue(r.Context(), keyRequestID, id)
	if c := r.Header.Get("X-Request-Id"); validClientRequestID(c) {
		ctx = context.WithValue(ctx, keyClientRequestID, c)
	}
	return r.WithContext(ctx)
}

func requestID(ctx context.Context) uuid.UUID {
	id, _ := ctx.Value(keyRequestID).(uuid.UUID)
	return id
}

func clientRequestID(ctx context.Context) string {
	s, _ := ctx.Value(keyClientRequestID).(string)
	return s
}

// validClientRequestID accepts 1-128 characters of [A-Za-z0-9._:-].
func validClientRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
