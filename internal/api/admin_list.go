package api

import "net/http"

// adminRequests serves GET /admin/requests (DESIGN 10.5): newest first,
// filtered and paged. Placeholder until the list query lands.
func (s *Server) adminRequests(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, http.StatusNotImplemented, typeInvalidRequest, "not_implemented", "", "not implemented yet")
}

// adminProviderStats serves GET /admin/stats/providers?window=1h.
// Placeholder until the stats query lands.
func (s *Server) adminProviderStats(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, http.StatusNotImplemented, typeInvalidRequest, "not_implemented", "", "not implemented yet")
}
