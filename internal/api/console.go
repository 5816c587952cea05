package api

import (
	"github.com/go-chi/chi/v5"

	"github.com/llmgw/gateway/internal/console"
)

// mountConsole serves the operator console at /console/ (and redirects
// /console there). The files are embedded in the binary; a console that
// cannot be read from it is a build mistake, logged, and the console is then
// absent rather than the gateway refusing to start.
func (s *Server) mountConsole(r chi.Router) {
	h, err := console.New()
	if err != nil {
		s.opts.Logger.Error("operator console unavailable", "err", err)
		return
	}
	r.Handle("/console", h)
	r.Handle("/console/*", h)
}
