package api

import "net/http"

// adminConfig serves GET /admin/config: the loaded routes file's digest,
// load time and last reload error. Placeholder until reload lands.
func (s *Server) adminConfig(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, http.StatusNotImplemented, typeInvalidRequest, "not_implemented", "", "not implemented yet")
}
