package api

import (
	"net/http"
	"time"
)

// ConfigSource reports the routes file the gateway serves and how its
// reloads went (implemented by internal/server).
type ConfigSource interface {
	ConfigStatus() ConfigStatus
}

// ConfigStatus is GET /admin/config. It never holds a secret: the digest is
// of the file as written (keys appear there as ${VAR} references or not at
// all in a file fit to commit), and error messages are the validator's,
// which redact keys.
type ConfigStatus struct {
	File     string       `json:"file"`
	Digest   string       `json:"digest"` // "sha256:<hex>" of the loaded file's bytes; "" when not loaded from a file
	LoadedAt time.Time    `json:"loaded_at"`
	Reloads  ReloadCounts `json:"reloads"`
	// LastError is the latest failed reload, kept after a later success
	// (compare its At with LoadedAt); nil when no reload has failed.
	LastError *ConfigError `json:"last_error"`
}

// ReloadCounts are the reloads attempted since the start, by result.
type ReloadCounts struct {
	Success int64 `json:"success"`
	Error   int64 `json:"error"`
}

// ConfigError is a failed reload: what was wrong (the YAML path and line
// for an invalid file) and when.
type ConfigError struct {
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// adminConfig serves GET /admin/config: the loaded routes file's digest,
// load time, reload counts and last reload error.
func (s *Server) adminConfig(w http.ResponseWriter, r *http.Request) {
	if s.opts.Config == nil {
		writeError(w, r, http.StatusNotFound, typeInvalidRequest, codeNotFound, "", "this gateway reports no routes file")
		return
	}
	st := s.opts.Config.ConfigStatus()
	st.LoadedAt = st.LoadedAt.UTC().Truncate(time.Second)
	if st.LastError != nil {
		e := *st.LastError
		e.At = e.At.UTC().Truncate(time.Second)
		st.LastError = &e
	}
	s.writeAdmin(w, st)
}
