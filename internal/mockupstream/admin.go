package mockupstream

import (
	"encoding/json"
	"net/http"
	"net/url"
)

// The /mock/* routes let a test in another process (a gateway binary, a script) read
// what an in-process test reads with Stats, StatsFor and LastRequestAt.

// serveStats answers GET /mock/stats with Stats, with StatsFor(path) when the query
// names ?path=, or with StatsForModel(model) for ?model=.
func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) {
	st := s.Stats()
	model, byModel := queryParam(r, "model")
	path, byPath := queryPath(r)
	switch {
	case byModel && byPath:
		writeError(w, http.StatusBadRequest, "name one of path and model", "invalid_request_error", "model", "invalid_query")
		return
	case byModel:
		st = s.StatsForModel(model)
	case byPath:
		var known bool
		if st, known = s.StatsFor(path); !known {
			writeError(w, http.StatusBadRequest, "not a model endpoint: "+path, "invalid_request_error", "path", "unknown_url")
			return
		}
	}
	body, _ := json.Marshal(st) // plain integers cannot fail to encode
	writeJSON(w, http.StatusOK, body)
}

// lastRequestJSON is the /mock/last-request answer. Header keeps Go's canonical names
// ("X-Api-Key"). Body is the request body itself when it is valid JSON, so a test reads
// body.system directly, and a JSON string holding it otherwise.
type lastRequestJSON struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Query  url.Values      `json:"query"`
	Header http.Header     `json:"headers"`
	Body   json.RawMessage `json:"body"`
}

// serveLastRequest answers GET /mock/last-request[?path=/v1/messages] with the last
// request of that endpoint (of any model endpoint without ?path=): 404 before there is
// one, 400 for a path that is not a model endpoint.
func (s *Server) serveLastRequest(w http.ResponseWriter, r *http.Request) {
	path, _ := queryPath(r)
	if path != "" {
		if _, ok := endpointOf(path); !ok {
			writeError(w, http.StatusBadRequest, "not a model endpoint: "+path, "invalid_request_error", "path", "unknown_url")
			return
		}
	}
	rec, ok := s.LastRequestAt(path)
	if !ok {
		writeError(w, http.StatusNotFound, "no request recorded", "invalid_request_error", "path", "not_found")
		return
	}
	out := lastRequestJSON{Method: rec.Method, Path: rec.Path, Query: rec.Query, Header: rec.Header, Body: rec.Body}
	if !json.Valid(rec.Body) {
		out.Body, _ = json.Marshal(string(rec.Body)) // a string cannot fail to encode
	}
	body, err := json.Marshal(out)
	if err != nil { // not expected: every field is valid JSON by now
		writeError(w, http.StatusInternalServerError, "encode recorded request: "+err.Error(), "server_error", "", "server_error")
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// queryPath returns the ?path= parameter and whether the query has one.
func queryPath(r *http.Request) (string, bool) { return queryParam(r, "path") }

// queryParam returns the query parameter name and whether the query has it.
func queryParam(r *http.Request, name string) (string, bool) {
	if r.URL.RawQuery == "" {
		return "", false
	}
	q := r.URL.Query()
	if !q.Has(name) {
		return "", false
	}
	return q.Get(name), true
}
