package report

import (
	"time"

	"github.com/google/uuid"
)

// Request is the record of one client request, written to the requests table.
//
// Record types are plain values without pointers, so enqueueing one does not
// allocate. Zero values stand for SQL NULL where noted.
type Request struct {
	ID              uuid.UUID
	ClientRequestID string // "" -> NULL
	CreatedAt       time.Time
	Model           string
	// Route is the client route: chat, messages, embeddings or responses
	// ("" is stored as chat, the column's default).
	Route string
	// Replica is the gateway replica that served the request; the writer
	// stamps Options.Replica on records that leave it empty.
	Replica        string
	Stream         bool
	Client         string        // "" -> NULL
	Team           string        // "" -> NULL; the client's team
	Priority       string        // "" -> NULL
	Status         string        // one of the Request* constants
	StatusCode     int           // 0 -> NULL
	ErrorType      string        // "" -> NULL; one of the ErrorType* constants
	Latency        time.Duration // zero -> NULL
	FirstByte      time.Duration // zero -> NULL
	CandidateCount int

	// The token counts are stored only when HasUsage is set (the upstream reported
	// usage); otherwise they are NULL, which is not the same as zero tokens.
	HasUsage         bool
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
	CachedTokens     int64 // cache reads, inside PromptTokens
	CacheWriteTokens int64 // cache writes, inside PromptTokens
	ReasoningTokens  int64 // inside CompletionTokens
	// Cost is stored only when HasCost is set (NULL: unknown); the sum of
	// the request's candidates' (docs/cost.md). UsageEstimated: some of
	// it is an estimate (a stream cut before its usage).
	HasCost        bool
	CostUSD        float64
	UsageEstimated bool

	FinishedAt time.Time // zero -> NULL
	// TraceID is the request's OpenTelemetry trace, 32 hex digits; "" ->
	// NULL (tracing off).
	TraceID string
	// Cache is what the route's response cache did with the request (one
	// of the Cache* constants); "" -> NULL: the route has no cache.
	Cache string
	// SavedUSD is a cache hit's saving, the stored answer's cost; stored
	// only when HasSaved is set (NULL: not a hit, or the cost unknown).
	HasSaved bool
	SavedUSD float64
}

// Candidate is the record of one attempt of one candidate, written to the
// request_candidates table and keyed by (RequestID, Index, RetryIndex).
type Candidate struct {
	RequestID  uuid.UUID
	Index      int
	RetryIndex int

	Provider string
	Endpoint string // stored as the origin only (scheme://host[:port])
	KeyID    string // a non-secret label or fingerprint, never the key
	Model    string // the upstream model

	Status       string        // one of the Candidate* constants
	SkipReason   string        // "" -> NULL
	StatusCode   int           // 0 -> NULL
	ErrorType    string        // "" -> NULL
	ErrorMessage string        // "" -> NULL; truncated to 1 KiB and redacted
	Latency      time.Duration // zero -> NULL
	FirstByte    time.Duration // zero -> NULL
	StartedAt    time.Time     // zero -> NULL
	FinishedAt   time.Time     // zero -> NULL
	CreatedAt    time.Time     // zero -> the time the writer picks the record up
	// Resumed: this attempt continued the stream of candidate ResumedFrom
	// (its candidate_index), cut after its commit point; false -> NULL.
	Resumed     bool
	ResumedFrom int

	// The attempt's usage, stored only when HasUsage is set, and its
	// cost, only when HasCost is (docs/cost.md).
	HasUsage         bool
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64
	CacheWriteTokens int64
	ReasoningTokens  int64
	UsageEstimated   bool
	HasCost          bool
	CostUSD          float64
}

// Request statuses (requests.status).
const (
	RequestPending   = "pending"
	RequestSuccess   = "success"
	RequestFailed    = "failed"
	RequestCancelled = "cancelled"
)

// Cache results (requests.cache, and x-gateway-cache on the answer).
const (
	CacheHit    = "hit"    // served from the cache: no gate, no provider
	CacheMiss   = "miss"   // looked up, not found: the normal path
	CacheBypass = "bypass" // not looked up (no-cache, no-store, ...): the normal path
)

// Candidate statuses (request_candidates.status), see DESIGN section 7.
const (
	CandidateAvailable = "available" // planned, not yet tried
	CandidatePending   = "pending"   // admitted, upstream called
	CandidateStreaming = "streaming" // first byte forwarded to the client
	CandidateSuccess   = "success"
	CandidateFailed    = "failed"
	CandidateCancelled = "cancelled" // the client went away
	CandidateUnused    = "unused"    // never tried: an earlier candidate settled the request
	CandidateSkipped   = "skipped"   // not tried by policy; see SkipReason
)

// Skip reasons (skip_reason of a skipped candidate).
const (
	SkipProviderFailed = "provider_failed" // an earlier candidate of the same provider could not reach it (DNS, refused, TLS)
	SkipModelFailed    = "model_failed"    // an earlier candidate of the same provider and upstream model failed (5xx, timeout, context length, ...)
	SkipCoolingDown    = "cooling_down"    // the target is cooling down after failures (provider health)
	SkipRetryBudget    = "retry_budget"    // the retry budget refused an attempt beyond the request's first
)

// Error types (error_type on both tables), see DESIGN section 7.
const (
	ErrorTypeAdmissionTimeout   = "gateway_admission_timeout"
	ErrorTypeFirstByteTimeout   = "stream_first_byte_timeout"
	ErrorTypeUpstreamConnect    = "upstream_connect_error"
	ErrorTypeUpstreamTimeout    = "upstream_timeout"
	ErrorTypeUpstreamHTTP       = "upstream_http_error"
	ErrorTypeUpstreamProtocol   = "upstream_protocol_error"
	ErrorTypeStreamInterrupted  = "stream_interrupted"
	ErrorTypeClientCancelled    = "client_cancelled"
	ErrorTypeQueueFull          = "gateway_queue_full"
	ErrorTypeShutdown           = "gateway_shutdown"
	ErrorTypeInternal           = "gateway_internal_error"
	ErrorTypeClientWriteTimeout = "client_write_timeout"
	ErrorTypeDeadline           = "deadline_exceeded"     // the request's deadline passed
	ErrorTypeStreamError        = "upstream_stream_error" // an error object in a stream before its commit point
	ErrorTypeHedgeLost          = "hedge_lost"            // another attempt of the request committed first
	ErrorTypeCoolingDown        = "cooling_down"          // given up while waiting: its target turned cooling
	ErrorTypeClientLimit        = "client_limit_exceeded" // the client's max_concurrency stayed full for the queue budget
)

// candidateRank orders candidate statuses: a stored row is replaced only by a record
// of strictly greater rank, so every terminal status is final and a late
// non-terminal record never overwrites a later state. The same table is rendered
// into the upsert's WHERE clause (see rankCase), so Go and SQL cannot disagree.
var candidateRank = map[string]int{
	CandidateAvailable: 0,
	CandidatePending:   1,
	CandidateStreaming: 2,
	CandidateSuccess:   3,
	CandidateFailed:    3,
	CandidateCancelled: 3,
	CandidateUnused:    3,
	CandidateSkipped:   3,
}

// requestRank is candidateRank for requests: pending < any terminal status.
var requestRank = map[string]int{
	RequestPending:   0,
	RequestSuccess:   1,
	RequestFailed:    1,
	RequestCancelled: 1,
}

// recordKind tells which half of a record is set.
type recordKind uint8

const (
	kindRequest recordKind = iota + 1
	kindCandidate
)

// record is what travels through the queue and the spool: a tagged union kept as
// a plain value so that a channel send copies it without allocating.
type record struct {
	kind recordKind
	req  Request
	cand Candidate
}

// candidateKey identifies one request_candidates row.
type candidateKey struct {
	requestID  uuid.UUID
	index      int
	retryIndex int
}

func (c *Candidate) key() candidateKey {
	return candidateKey{requestID: c.RequestID, index: c.Index, retryIndex: c.RetryIndex}
}
