package mockupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"time"
)

// The /mock/behavior route lets a test in another process (a gateway binary driven
// against the mockupstream binary) change behaviour at run time, per model or for all:
//
//	POST   /mock/behavior?model=NAME  body: a JSON Behavior; NAME's own Behavior
//	POST   /mock/behavior             body: a JSON Behavior; the new defaults
//	DELETE /mock/behavior?model=NAME  NAME follows the defaults again
//	DELETE /mock/behavior             every model follows the defaults again
//
// The body is decoded over the current defaults, so it names only what differs:
// {"Status":503,"DownFor":"10s"}. Keys are Behavior's field names (case ignored, as
// encoding/json matches them); durations are Go duration strings ("150ms") or integer
// nanoseconds, DownUntil is RFC 3339, KeyStatus an object of key to status. An unknown
// field or an invalid value is answered 400 and changes nothing; success is 204. A
// DownFor in the body starts when the body is applied, replacing the defaults' window.

// maxBehaviorBytes bounds an admin body; a Behavior is a few hundred bytes.
const maxBehaviorBytes = 1 << 20

func (s *Server) serveBehavior(w http.ResponseWriter, r *http.Request) {
	model, byModel := queryParam(r, "model")
	if byModel && model == "" {
		writeError(w, http.StatusBadRequest, "?model= names no model", "invalid_request_error", "model", "invalid_query")
		return
	}
	switch r.Method {
	case http.MethodPost:
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBehaviorBytes))
		if err != nil {
			writeError(w, http.StatusBadRequest, "read body: "+err.Error(), "invalid_request_error", "", "invalid_request")
			return
		}
		b, err := decodeBehavior(s.Behavior(), raw)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", "", "invalid_behavior")
			return
		}
		if byModel {
			s.SetModelBehavior(model, b)
		} else {
			s.SetBehavior(b)
		}
	case http.MethodDelete:
		if byModel {
			s.ClearModelBehavior(model)
		} else {
			s.clearModelBehaviors()
		}
	default:
		methodNotAllowed(w, "POST, DELETE")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// clearModelBehaviors makes every model follow the defaults again.
func (s *Server) clearModelBehaviors() {
	s.modelsMu.Lock()
	cur := s.models.Load()
	s.models.Store(nil)
	s.modelsMu.Unlock()
	if cur != nil {
		for model := range *cur {
			s.resetSchedules(model)
		}
	}
}

// behaviorPatch decodes a JSON Behavior over base. Its duration fields shadow the
// embedded Behavior's (encoding/json prefers the shallower field), so that they can
// be written as strings.
type behaviorPatch struct {
	*behaviorFields
	Latency         *jsonDuration
	FirstByteDelay  *jsonDuration
	CommentInterval *jsonDuration
	ChunkInterval   *jsonDuration
	SlowDelay       *jsonDuration
	DownFor         *jsonDuration
	DownUntil       *time.Time // to tell whether the body set it
}

// behaviorFields is Behavior without its methods.
type behaviorFields Behavior

// decodeBehavior returns base with the fields of raw (a JSON object) set, validated.
func decodeBehavior(base Behavior, raw []byte) (Behavior, error) {
	base.KeyStatus = maps.Clone(base.KeyStatus) // decoding would add to the defaults' map
	p := behaviorPatch{behaviorFields: (*behaviorFields)(&base)}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Behavior{}, fmt.Errorf("behavior body: %w", err)
	}
	if dec.More() {
		return Behavior{}, errors.New("behavior body: more than one JSON value")
	}
	for _, f := range []struct {
		src *jsonDuration
		dst *time.Duration
	}{
		{p.Latency, &base.Latency}, {p.FirstByteDelay, &base.FirstByteDelay},
		{p.CommentInterval, &base.CommentInterval}, {p.ChunkInterval, &base.ChunkInterval},
		{p.SlowDelay, &base.SlowDelay}, {p.DownFor, &base.DownFor},
	} {
		if f.src != nil {
			*f.dst = time.Duration(*f.src)
		}
	}
	switch {
	case p.DownUntil != nil:
		base.DownUntil = *p.DownUntil
	case p.DownFor != nil:
		base.DownUntil = time.Time{} // the body's DownFor starts now, not the defaults' window
	}
	if err := base.Validate(); err != nil {
		return Behavior{}, err
	}
	return base, nil
}

// jsonDuration is a duration written as a Go duration string or integer nanoseconds.
type jsonDuration time.Duration

func (d *jsonDuration) UnmarshalJSON(raw []byte) error {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = jsonDuration(v)
		return nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string such as \"150ms\" or integer nanoseconds", raw)
	}
	*d = jsonDuration(n)
	return nil
}
