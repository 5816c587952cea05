package candidates

// An attempt's life is one state, moved only by Attempt.to along the
// transitions of one table (transitions below; docs/architecture.md draws
// it). Before the commit point the loop (or a hedged flight) moves it;
// from committed on, the relay does.

// state is where an attempt is in its life.
type state uint8

const (
	stIdle      state = iota // no slots: fresh, or built for a candidate not admitted yet
	stAdmitted               // holds its slots (reset); nothing sent
	stSending                // the provider's request is out, no response yet
	stHolding                // response in: reading up to the commit point
	stCommitted              // commit point passed: Run hands it to the relay
	stRelaying               // its first bytes reached the client (Sent)
	stDrained                // committed, and the provider's answer was read to its end
	stLost                   // a hedged flight another attempt beat: it lets go unrelayed
	stAborted                // a panic ended it: it lets go, the panic's handler settles
	stReleased               // slots, response and context let go; records not settled yet
	stClosed                 // released and its records settled: nothing is left
	nStates
)

var stateNames = [nStates]string{"idle", "admitted", "sending", "holding", "committed", "relaying",
	"drained", "lost", "aborted", "released", "closed"}

func (s state) String() string {
	if s < nStates {
		return stateNames[s]
	}
	return "state(?)"
}

// transitions is every move an attempt may make, and the only place that
// says so.
var transitions = [nStates][nStates]bool{
	// A closed attempt is reset for the next candidate of the same request.
	stIdle:   {stAdmitted: true},
	stClosed: {stAdmitted: true},
	// Before the commit point: a failure releases it (the loop settles its
	// row next), a hedged flight may lose or panic anywhere.
	stAdmitted: {stSending: true, stReleased: true, stLost: true, stAborted: true},
	stSending:  {stHolding: true, stReleased: true, stLost: true, stAborted: true},
	// An answer whole within the hold (a body read at once, a stream's last
	// event) commits drained.
	stHolding: {stCommitted: true, stDrained: true, stReleased: true, stLost: true, stAborted: true},
	// After the commit point the relay reads it to its end (a relay that
	// holds a body back reads before Sent), ends it with Finish (released)
	// or aborts it on a panic.
	stCommitted: {stRelaying: true, stDrained: true, stReleased: true, stLost: true, stAborted: true},
	stRelaying:  {stDrained: true, stReleased: true, stAborted: true},
	stDrained:   {stReleased: true, stLost: true, stAborted: true},
	stLost:      {stReleased: true},
	stAborted:   {stReleased: true},
	stReleased:  {stClosed: true},
}

// transitionError is a move the table forbids: a bug in the loop or the
// relay, never the provider's or the client's doing.
type transitionError struct{ From, To state }

func (e *transitionError) Error() string {
	return "candidates: attempt cannot go from " + e.From.String() + " to " + e.To.String()
}

// allowed reports whether an attempt in from may move to to.
func allowed(from, to state) bool { return from < nStates && to < nStates && transitions[from][to] }

// stateHook, when set (tests only), sees every move of every attempt.
var stateHook func(a *Attempt, from, to state)

// to moves the attempt to next; a move the table forbids panics with a
// *transitionError: going on would leak or double-settle slots and records.
func (a *Attempt) to(next state) {
	if !allowed(a.state, next) {
		panic(&transitionError{From: a.state, To: next})
	}
	if stateHook != nil {
		stateHook(a, a.state, next)
	}
	a.state = next
}

// live reports whether the attempt holds its slots and may still be relayed
// or lost: admitted and not let go.
func (s state) live() bool { return s >= stAdmitted && s <= stDrained }

// committed reports whether the attempt passed its commit point and has not
// been let go.
func (s state) committed() bool { return s == stCommitted || s == stRelaying || s == stDrained }
