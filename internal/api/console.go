package api

import "github.com/go-chi/chi/v5"

// mountConsole serves the operator console at /console/. Placeholder until
// the console lands.
func (s *Server) mountConsole(r chi.Router) {}
