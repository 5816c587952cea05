package mockupstream

import (
	"encoding/json"
	"maps"
	"sync/atomic"
)

// Per-model behaviour and counts. A gateway's fallback model usually sits on the same
// provider and key as its primary, so both reach one mock with the same forwarded
// headers; only the body's "model" tells them apart. A model given its own Behavior
// (SetModelBehavior, POST /mock/behavior?model=) answers with it instead of the
// defaults, and every model's requests are counted apart (StatsForModel).
//
// The defaults' hot path pays one nil check of an atomic pointer for the per-model
// behaviours, and one sync.Map load for the model's counters once the body is parsed.

// modelState is what the mock keeps per model name: its counters and the state of the
// schedules that count per model.
type modelState struct {
	count    counters
	inFlight atomic.Int64
	// failFirst counts the requests that met a Behavior with FailFirst set.
	failFirst atomic.Uint64
	// downFrom is when (unix ns) the model's first request carrying HeaderDownFor came,
	// 0 before it.
	downFrom atomic.Int64
}

// SetModelBehavior makes requests for model (the body's "model", exactly) behave as b
// instead of the defaults; X-Mock-* headers still apply on top. b is whole, not merged
// with the defaults: start from Behavior() to change a few fields (and zero DownUntil
// there to give a new DownFor). b.DownFor starts now unless b.DownUntil is set, and the
// model's FailFirst count starts again. Requests already running keep what they
// started with.
func (s *Server) SetModelBehavior(model string, b Behavior) {
	s.resolveDown(&b)
	b.KeyStatus = maps.Clone(b.KeyStatus) // the caller's map may change later
	s.modelsMu.Lock()
	defer s.modelsMu.Unlock()
	next := make(map[string]*Behavior, 1)
	if cur := s.models.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	next[model] = &b
	s.resetSchedules(model)
	s.models.Store(&next)
}

// ClearModelBehavior makes model follow the defaults again.
func (s *Server) ClearModelBehavior(model string) {
	s.modelsMu.Lock()
	defer s.modelsMu.Unlock()
	cur := s.models.Load()
	if cur == nil {
		return
	}
	if _, ok := (*cur)[model]; !ok {
		return
	}
	s.resetSchedules(model)
	if len(*cur) == 1 {
		s.models.Store(nil) // back to the defaults' hot path
		return
	}
	next := maps.Clone(*cur)
	delete(next, model)
	s.models.Store(&next)
}

// ModelBehavior returns model's own Behavior, and false when it follows the defaults.
func (s *Server) ModelBehavior(model string) (Behavior, bool) {
	if cur := s.models.Load(); cur != nil {
		if b, ok := (*cur)[model]; ok {
			return *b, true
		}
	}
	return Behavior{}, false
}

// StatsForModel returns the counters of the requests whose body named model, over all
// endpoints; zero for a model never seen. A request is counted for its model once its
// body parses, so a malformed body counts in Stats and StatsFor only.
func (s *Server) StatsForModel(model string) Stats {
	v, ok := s.states.Load(model)
	if !ok {
		return Stats{}
	}
	ms := v.(*modelState)
	st := Stats{InFlight: ms.inFlight.Load()}
	ms.count.addTo(&st)
	return st
}

// Reset forgets every model's own Behavior, counters, FailFirst counts and DownFor
// starts, so one long-running mock can serve the cases of a test matrix one after
// another. The defaults, the per-endpoint Stats and the recorded requests stay.
// Requests running meanwhile are counted on what Reset dropped.
func (s *Server) Reset() {
	s.modelsMu.Lock()
	s.models.Store(nil)
	s.modelsMu.Unlock()
	s.states.Clear()
}

// state returns model's state, made on its first request.
func (s *Server) state(model string) *modelState {
	if v, ok := s.states.Load(model); ok {
		return v.(*modelState)
	}
	v, _ := s.states.LoadOrStore(model, new(modelState))
	return v.(*modelState)
}

// resetSchedules starts model's FailFirst count and header DownFor again.
func (s *Server) resetSchedules(model string) {
	if v, ok := s.states.Load(model); ok {
		ms := v.(*modelState)
		ms.failFirst.Store(0)
		ms.downFrom.Store(0)
	}
}

// resolveDown turns a relative DownFor into DownUntil, from now.
func (s *Server) resolveDown(b *Behavior) {
	if b.DownFor > 0 && b.DownUntil.IsZero() {
		b.DownUntil = s.now().Add(b.DownFor)
	}
}

// modelBehavior returns the Behavior a request for model starts from.
func (s *Server) modelBehavior(model string) *Behavior {
	if cur := s.models.Load(); cur != nil {
		if b, ok := (*cur)[model]; ok {
			return b
		}
	}
	return s.behavior.Load()
}

// track counts the request for its model; the handler calls it once the body parsed.
func (c *call) track(model string) {
	c.ms = c.s.state(model)
	c.ms.count.requests.Add(1)
	c.ms.inFlight.Add(1)
}

// peekModel reads the body's "model" for choosing a Behavior before the endpoint
// parses the body; "" when it has none (the endpoint then rejects the body).
func peekModel(body []byte) string {
	var m struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &m) // a body that does not parse is rejected later
	return m.Model
}
