package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/llmgw/gateway/internal/report"
)

// LedgerReader is what the request list and the provider statistics read
// from the record store (*report.Writer). A ReportStore without it answers
// those two endpoints as records off.
type LedgerReader interface {
	ListRequests(ctx context.Context, f report.ListFilter) (report.RequestPage, error)
	ProviderStats(ctx context.Context, window time.Duration) (report.ProviderStats, error)
}

var _ LedgerReader = (*report.Writer)(nil)

// ledger is the store's LedgerReader, or nil with records off.
func (s *Server) ledger() LedgerReader {
	if s.opts.Reports == nil {
		return nil
	}
	l, _ := s.opts.Reports.(LedgerReader)
	return l
}

// maxFilterBytes bounds a filter value: the columns hold at most 1 KiB.
const maxFilterBytes = 1024

// adminRequests serves GET /admin/requests?limit=&before=&status=&model=&provider=&client=:
// requests newest first, filtered, paged with the next_before cursor.
// Records off answer 404 and an unreadable store 503, as GET
// /admin/requests/{id} does.
func (s *Server) adminRequests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := report.ListFilter{Limit: report.DefaultListLimit}
	if v, ok := single(w, r, q, "limit"); !ok {
		return
	} else if v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > report.MaxListLimit {
			badParam(w, r, "limit", "limit must be an integer from 1 to "+strconv.Itoa(report.MaxListLimit))
			return
		}
		f.Limit = n
	}
	if v, ok := single(w, r, q, "before"); !ok {
		return
	} else if v != "" {
		c, err := report.ParseCursor(v)
		if err != nil {
			badParam(w, r, "before", "before must be a next_before value from an earlier page")
			return
		}
		f.Before = c
	}
	if v, ok := single(w, r, q, "status"); !ok {
		return
	} else if v != "" {
		if !report.ValidRequestStatus(v) {
			badParam(w, r, "status", "status must be one of pending, success, failed, cancelled")
			return
		}
		f.Status = v
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"model", &f.Model}, {"provider", &f.Provider}, {"client", &f.Client}} {
		v, ok := single(w, r, q, p.name)
		if !ok {
			return
		}
		if len(v) > maxFilterBytes {
			badParam(w, r, p.name, p.name+" is longer than "+strconv.Itoa(maxFilterBytes)+" bytes")
			return
		}
		*p.dst = v
	}
	l := s.ledger()
	if l == nil {
		recordsOff(w, r)
		return
	}
	page, err := l.ListRequests(r.Context(), f)
	if err != nil {
		s.storeUnavailable(w, r, "admin request list failed", err)
		return
	}
	s.writeAdmin(w, page)
}

// adminProviderStats serves GET /admin/stats/providers?window=1h: attempts
// and failures per provider over the window, in report.StatsBuckets buckets.
func (s *Server) adminProviderStats(w http.ResponseWriter, r *http.Request) {
	window := report.DefaultStatsWindow
	if v, ok := single(w, r, r.URL.Query(), "window"); !ok {
		return
	} else if v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < report.MinStatsWindow || d > report.MaxStatsWindow {
			badParam(w, r, "window", "window must be a duration from "+report.MinStatsWindow.String()+
				" to "+report.MaxStatsWindow.String()+" (e.g. 1h, 15m)")
			return
		}
		window = d
	}
	l := s.ledger()
	if l == nil {
		recordsOff(w, r)
		return
	}
	stats, err := l.ProviderStats(r.Context(), window)
	if err != nil {
		s.storeUnavailable(w, r, "admin provider stats failed", err)
		return
	}
	s.writeAdmin(w, stats)
}

// single returns query parameter name ("" when absent); a parameter given
// twice is refused rather than silently taking one of the values.
func single(w http.ResponseWriter, r *http.Request, q map[string][]string, name string) (string, bool) {
	vs := q[name]
	switch len(vs) {
	case 0:
		return "", true
	case 1:
		return vs[0], true
	}
	badParam(w, r, name, name+" is given more than once")
	return "", false
}

func badParam(w http.ResponseWriter, r *http.Request, param, msg string) {
	writeError(w, r, http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, param, msg)
}

func recordsOff(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, http.StatusNotFound, typeInvalidRequest, codeNotFound, "", "records are disabled (no GATEWAY_DATABASE_URL)")
}

// storeUnavailable answers a failed read: the cause goes to the log (it may
// name the database), the client gets a 503 without it.
func (s *Server) storeUnavailable(w http.ResponseWriter, r *http.Request, what string, err error) {
	if !errors.Is(err, report.ErrUnavailable) && r.Context().Err() == nil {
		s.opts.Logger.Warn(what, "err", err)
	}
	writeError(w, r, http.StatusServiceUnavailable, typeServer, codeInternal, "", "the record store is unavailable")
}
