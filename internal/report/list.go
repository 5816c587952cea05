package report

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// List limits (GET /admin/requests).
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// ListFilter selects and pages the request list. Empty strings match
// everything.
type ListFilter struct {
	Limit    int    // 1..MaxListLimit; 0 means DefaultListLimit
	Before   Cursor // zero: start at the newest row
	Status   string // one of the Request* statuses (see ValidRequestStatus)
	Model    string
	Provider string // requests with any candidate row of this provider
	Client   string
}

// Cursor is a position in the list's order, (created_at, id) descending: a
// page holds the rows strictly before it. It is exact even when created_at
// values tie, because id breaks the tie.
type Cursor struct {
	CreatedAt time.Time // microsecond precision, as Postgres stores it
	ID        uuid.UUID
}

// IsZero reports whether c is the start of the list.
func (c Cursor) IsZero() bool { return c.CreatedAt.IsZero() && c.ID == uuid.Nil }

// String is the cursor as the API shows it: created_at in microseconds since
// the Unix epoch, an underscore, and the id (e.g.
// "1764518400123456_0193a7c4-..."). Clients should treat it as opaque.
func (c Cursor) String() string {
	return strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "_" + c.ID.String()
}

// ErrBadCursor is returned by ParseCursor for a string that is not a cursor.
var ErrBadCursor = errors.New("report: malformed cursor")

// ParseCursor reads Cursor.String's format.
func ParseCursor(s string) (Cursor, error) {
	us, id, ok := strings.Cut(s, "_")
	if !ok {
		return Cursor{}, ErrBadCursor
	}
	n, err := strconv.ParseInt(us, 10, 64)
	if err != nil || n <= 0 {
		return Cursor{}, ErrBadCursor
	}
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return Cursor{}, ErrBadCursor
	}
	return Cursor{CreatedAt: time.UnixMicro(n).UTC(), ID: u}, nil
}

// ValidRequestStatus reports whether s is one of the request statuses.
func ValidRequestStatus(s string) bool {
	_, ok := requestRank[s]
	return ok
}

// RequestPage is one page of the list, newest first.
type RequestPage struct {
	Requests []ListedRequest `json:"requests"`
	// NextBefore is the cursor of the next (older) page; nil on the last page.
	NextBefore *string `json:"next_before"`
}

// ListedRequest is a row of requests as the list shows it, plus the distinct
// providers its candidates attempted, in candidate order.
type ListedRequest struct {
	RequestSummary
	Providers []string `json:"providers"`
}

// attemptedStatuses are the candidate statuses of an attempt that was
// actually made (the provider was called, or admission was waited for):
// everything but available, unused and skipped. The list's providers and the
// provider statistics count these; the partial index of migration 00004 has
// the same predicate, so keep them in step.
const attemptedStatuses = `('pending', 'streaming', 'success', 'failed', 'cancelled')`

// listSQL renders the list query for the filters that are set, so that each
// combination gets its own plan (a catch-all "$1 IS NULL OR ..." would plan
// for none of them). The page is picked first, then each row's providers
// are looked up through the candidates' primary key.
func listSQL(f *ListFilter) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !f.Before.IsZero() {
		where = append(where, "(r.created_at, r.id) < ("+arg(f.Before.CreatedAt)+"::timestamptz, "+arg(f.Before.ID)+"::uuid)")
	}
	if f.Status != "" {
		// A literal, not a parameter: the partial index on the statuses other
		// than success applies only when the planner sees the value, which a
		// generic plan for a prepared statement would not. The value is one of
		// the known statuses (ListRequests checks), so it needs no quoting.
		where = append(where, "r.status = '"+f.Status+"'")
	}
	if f.Model != "" {
		where = append(where, "r.model = "+arg(f.Model))
	}
	if f.Client != "" {
		where = append(where, "r.client = "+arg(f.Client))
	}
	if f.Provider != "" {
		where = append(where, "EXISTS (SELECT 1 FROM request_candidates c WHERE c.request_id = r.id AND c.provider = "+arg(f.Provider)+")")
	}
	cond := ""
	if len(where) > 0 {
		cond = "\n    WHERE " + strings.Join(where, "\n      AND ")
	}
	limit := arg(f.Limit + 1) // one more tells whether there is a next page
	return `SELECT r.id, r.created_at, r.model, r.route, r.stream, r.client, r.priority, r.status,
    r.status_code, r.error_type, r.latency_ms, r.first_byte_ms, r.candidate_count, r.total_tokens,
    r.replica, r.team, r.cost_usd::float8 AS cost_usd, r.usage_estimated, r.cached_tokens, r.reasoning_tokens,
    r.cache, r.saved_usd::float8 AS saved_usd, COALESCE(p.providers, '{}') AS providers
FROM (
    SELECT * FROM requests r` + cond + `
    ORDER BY r.created_at DESC, r.id DESC
    LIMIT ` + limit + `
) r
LEFT JOIN LATERAL (
    SELECT array_agg(d.provider ORDER BY d.candidate_index, d.retry_index) AS providers
    FROM (
        SELECT DISTINCT ON (c.provider) c.provider, c.candidate_index, c.retry_index
        FROM request_candidates c
        WHERE c.request_id = r.id AND c.status IN ` + attemptedStatuses + `
        ORDER BY c.provider, c.candidate_index, c.retry_index
    ) d
) p ON true
ORDER BY r.created_at DESC, r.id DESC`, args
}

// ListRequests reads one page of requests, newest first, filtered by f. It
// returns ErrUnavailable before Postgres was ever reached. Records still
// queued or spooled are not visible.
func (w *Writer) ListRequests(ctx context.Context, f ListFilter) (RequestPage, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultListLimit
	}
	if f.Limit > MaxListLimit {
		return RequestPage{}, fmt.Errorf("report: list limit %d above %d", f.Limit, MaxListLimit)
	}
	if f.Status != "" && !ValidRequestStatus(f.Status) {
		return RequestPage{}, fmt.Errorf("report: unknown request status %q", f.Status)
	}
	pool, err := w.readPool()
	if err != nil {
		return RequestPage{}, err
	}
	sql, args := listSQL(&f)
	list, err := collectRows[ListedRequest](ctx, pool, sql, args...)
	if err != nil {
		return RequestPage{}, fmt.Errorf("report: list requests: %w", err)
	}
	page := RequestPage{Requests: list}
	if len(list) > f.Limit {
		page.Requests = list[:f.Limit]
		last := page.Requests[f.Limit-1]
		next := Cursor{CreatedAt: last.CreatedAt, ID: last.ID}.String()
		page.NextBefore = &next
	}
	return page, nil
}
