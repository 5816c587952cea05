package candidates

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// TestTransitionTable checks every (from, to) pair against the life an
// attempt has, written out here on its own: the allowed moves happen, every
// other one panics with a *transitionError and leaves the state as it was.
func TestTransitionTable(t *testing.T) {
	want := map[[2]state]bool{}
	for _, p := range [][2]state{
		{stIdle, stAdmitted}, {stClosed, stAdmitted},
		{stAdmitted, stSending}, {stSending, stHolding},
		{stHolding, stCommitted}, {stHolding, stDrained},
		{stCommitted, stRelaying}, {stCommitted, stDrained}, {stRelaying, stDrained},
		{stLost, stReleased}, {stAborted, stReleased}, {stReleased, stClosed},
	} {
		want[p] = true
	}
	// Anything that holds slots is released when it fails or ends, and a
	// panic may abort it; a hedged flight loses anywhere before it relays.
	for _, s := range []state{stAdmitted, stSending, stHolding, stCommitted, stRelaying, stDrained} {
		want[[2]state{s, stReleased}], want[[2]state{s, stAborted}] = true, true
		if s != stRelaying {
			want[[2]state{s, stLost}] = true
		}
	}
	for from := range nStates {
		for to := range nStates {
			t.Run(from.String()+"->"+to.String(), func(t *testing.T) {
				ok := want[[2]state{from, to}]
				if got := allowed(from, to); got != ok {
					t.Fatalf("allowed = %v, want %v", got, ok)
				}
				a := &Attempt{state: from}
				err := tryTo(a, to)
				var te *transitionError
				switch {
				case ok && (err != nil || a.state != to):
					t.Fatalf("allowed move: err %v, state %s", err, a.state)
				case !ok && (!errors.As(err, &te) || te.From != from || te.To != to || a.state != from):
					t.Fatalf("forbidden move: err %v, state %s", err, a.state)
				}
			})
		}
	}
}

// tryTo moves a to next and returns the panic of a forbidden move as an
// error.
func tryTo(a *Attempt, next state) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err, _ = v.(error)
			if err == nil {
				panic(v)
			}
		}
	}()
	a.to(next)
	return nil
}

// stateLog records, while on, the moves of every attempt (stateHook).
var stateLog struct {
	mu    sync.Mutex
	on    bool
	moves map[*Attempt][]state
}

func init() {
	stateHook = func(a *Attempt, _, to state) {
		stateLog.mu.Lock()
		if stateLog.on {
			stateLog.moves[a] = append(stateLog.moves[a], to)
		}
		stateLog.mu.Unlock()
	}
}

// watchStates records the moves of every attempt until the test ends and
// returns them.
func watchStates(t *testing.T) func() map[*Attempt][]state {
	stateLog.mu.Lock()
	stateLog.on, stateLog.moves = true, map[*Attempt][]state{}
	stateLog.mu.Unlock()
	stop := func() map[*Attempt][]state {
		stateLog.mu.Lock()
		defer stateLog.mu.Unlock()
		stateLog.on = false
		return stateLog.moves
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestAttemptsEndClosed runs real requests against loopback providers (a
// retry of the same candidate and a failover, a stream cut after commit, a body, a hedged race with a loser)
// and checks that every attempt that got slots went through its life to
// closed, with the gates back to zero.
func TestAttemptsEndClosed(t *testing.T) {
	var mu sync.Mutex
	modes := map[string]string{}
	serve := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			mode := modes[name]
			mu.Unlock()
			switch mode {
			case "500":
				http.Error(w, `{"error":{"message":"down"}}`, http.StatusInternalServerError)
				return
			case "body":
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
				return
			case "cuttext", "cont":
				// A text stream cut after its commit point, and its
				// continuation (the prefill is the cut one's text).
				w.Header().Set("Content-Type", "text/event-stream")
				if mode == "cuttext" {
					_, _ = w.Write([]byte(`data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Hello"}}]}` + "\n\n"))
					return
				}
				_, _ = w.Write([]byte(`data: {"id":"c2","model":"m","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"))
				return
			case "slow":
				select {
				case <-r.Context().Done():
					return
				case <-time.After(2 * time.Second):
				}
			}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(ev1))
			w.(http.Flusher).Flush()
			if mode != "cut" {
				_, _ = w.Write([]byte("data: [DONE]\n\n"))
			}
		}))
	}
	sa, sb := serve("a"), serve("b")
	defer sa.Close()
	defer sb.Close()
	h := newHealthRig(t, `
providers:
  - { name: a, base_url: "`+sa.URL+`/v1", api_keys: [ka], max_concurrency: 4, retry: { backoff: 1ms } }
  - { name: b, base_url: "`+sb.URL+`/v1", api_keys: [kb], max_concurrency: 4, prefill: true }
models:
  - name: m
    candidates: [ { provider: a, priority: 0 }, { provider: b, priority: 1 } ]
  - name: rm
    resume: { attempts: 1 }
    candidates: [ { provider: a, priority: 0 }, { provider: b, priority: 1 } ]
  - name: hm
    hedge: { after: 30ms }
    candidates: [ { provider: a, priority: 0 }, { provider: b, priority: 1 } ]
`)
	ca, cb := upstream.NewClient(upstream.ClientOptions{Provider: "a"}), upstream.NewClient(upstream.ClientOptions{Provider: "b"})
	defer ca.CloseIdle()
	defer cb.CloseIdle()
	h.run.Upstreams = map[string]Sender{"a": ca, "b": cb}

	for _, tt := range []struct {
		name, model, a, b string
		stream            bool
		rows              string // each candidate's last row
		retries           int    // attempts beyond one per tried candidate
		lost              bool
	}{
		{"failover after a retry", "m", "500", "", true, "a:failed b:success", 1, false},
		{"cut after commit", "m", "cut", "", true, "a:failed b:unused", 0, false},
		{"body", "m", "body", "", false, "a:success b:unused", 0, false},
		{"cut after commit, resumed", "rm", "cuttext", "cont", true, "a:failed b:success", 0, false},
		{"hedged loser", "hm", "slow", "", true, "a:cancelled b:success", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			modes["a"], modes["b"] = tt.a, tt.b
			mu.Unlock()
			moves := watchStates(t)
			pol, plan, err := h.plan.PlanPolicy(tt.model)
			if err != nil {
				t.Fatal(err)
			}
			l := &ledger{cands: map[int]report.Candidate{}}
			h.run.Record = l
			ex := chatOf(tt.model)
			if pol.Resume > 0 { // a resumable stream's body says it streams
				ex, _ = upstream.ParseChatRequest([]byte(`{"model":"rm","messages":[{"role":"user","content":"hi"}],"stream":true}`))
			}
			att, _ := h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: tt.model, Stream: tt.stream,
				Priority: admission.Interactive, Received: h.clock.Now(), Candidates: plan, Exchange: ex,
				Hedge: pol.Hedge, Resume: pol.Resume})
			if att == nil {
				t.Fatal("nothing committed")
			}
			relayTo(&strings.Builder{}, att)
			idle(t, h)
			if got := candidateStatuses(l, plan); got != tt.rows {
				t.Fatalf("rows %q, want %q", got, tt.rows)
			}
			lives, lost := 0, false
			for _, ms := range moves() {
				for j, s := range ms {
					if s == stAdmitted {
						lives++
						if j > 0 && ms[j-1] != stClosed {
							t.Fatalf("reused before it closed: %v", ms)
						}
					}
					lost = lost || s == stLost
				}
				if ms[len(ms)-1] != stClosed {
					t.Fatalf("an attempt ended %s: %v", ms[len(ms)-1], ms)
				}
			}
			if want := strings.Count(tt.rows, ":") - strings.Count(tt.rows, "unused") + tt.retries; lives != want || lost != tt.lost {
				t.Fatalf("%d attempts (lost: %v), want %d (lost: %v)", lives, lost, want, tt.lost)
			}
		})
	}
}

// candidateStatuses lists the rows of plan as provider:status.
func candidateStatuses(l *ledger, plan []Candidate) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rows []string
	for i := range plan {
		rows = append(rows, l.cands[i].Provider+":"+l.cands[i].Status)
	}
	return strings.Join(rows, " ")
}
