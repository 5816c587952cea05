package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPanicAtHandOff protects the hand-off of the committed attempt from the
// attempt loop to the relay: a panic right after Run returned it must still
// release its slots and settle its records (candidate and request failed,
// 500, gateway_internal_error), and the client, sent nothing yet, gets
// the OpenAI-shaped 500.
func TestPanicAtHandOff(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "body"}[stream], func(t *testing.T) {
			g := start(t, setup{db: true})
			var once sync.Once
			g.API.SetTestHook(func(p string) {
				if p == "committed" {
					once.Do(func() { panic("injected fault at " + p) })
				}
			})
			resp, body, _ := g.postRaw(t, chatBody(stream), "X-Request-Id", "handoff")
			if e := decodeError(t, body); resp.StatusCode != 500 || e.Error.Type != "server_error" || e.Error.Code != "internal_error" {
				t.Fatalf("got %d %s", resp.StatusCode, body)
			}
			if strings.Contains(string(body), "injected") {
				t.Fatal("panic value leaked to the client")
			}
			g.assertIdle(t)
			for _, gs := range g.Scheduler.Stats().Targets {
				if gs.Active != 0 || gs.Pending != 0 || gs.Admitted != gs.Released {
					t.Fatalf("gate %s %s not back to zero: %+v", gs.Gate, gs.Label, gs)
				}
			}
			db, err := pgx.Connect(context.Background(), g.DatabaseURL)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close(context.Background())
			var id string
			eventually(t, 5*time.Second, "the request row in Postgres", func() (bool, string) {
				err := db.QueryRow(context.Background(), `SELECT id::text FROM requests WHERE client_request_id = 'handoff'`).Scan(&id)
				return err == nil, fmt.Sprint(err)
			})
			r, rows := g.ledger(t, id)
			wantRows(t, rows, "failed/500/gateway_internal_error(primary)", "unused/0/(backup)")
			if r.Status != "failed" || r.StatusCode == nil || *r.StatusCode != 500 {
				t.Fatalf("request row %+v", r)
			}
			if r2, _ := g.post(t, chatBody(stream)); r2.StatusCode != 200 {
				t.Fatalf("gateway unhealthy after the panic: %d", r2.StatusCode)
			}
		})
	}
}
