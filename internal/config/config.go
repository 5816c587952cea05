// Package config reads the process settings from environment variables into
// one struct (DESIGN section 3). It owns parsing, defaults and the fail-fast
// errors that name the offending variable; it does not read the routes file
// (internal/candidates owns that) and holds no runtime state.
package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/llmgw/gateway/internal/secret"
	"github.com/llmgw/gateway/internal/tracing"
	"github.com/llmgw/gateway/internal/watchdog"
)

// Config is every process setting. Each field carries its variable, its
// default and its meaning in one place.
type Config struct {
	// ListenAddr serves the client API, /metrics, /healthz and /readyz.
	ListenAddr string `env:"GATEWAY_LISTEN_ADDR" envDefault:":8080"`
	// RoutesFile is the YAML file with providers, models and client keys.
	RoutesFile string `env:"GATEWAY_CONFIG" envDefault:"gateway.yaml"`
	// DatabaseURL is the report store DSN; empty turns records off.
	// DATABASE_URL is read when GATEWAY_DATABASE_URL is unset.
	DatabaseURL secret.String `env:"GATEWAY_DATABASE_URL"`
	// AutoMigrate applies migrations at start (and when Postgres comes back).
	AutoMigrate Bool `env:"GATEWAY_AUTO_MIGRATE" envDefault:"true"`
	// SpoolDir holds records while Postgres is unreachable.
	SpoolDir string `env:"GATEWAY_SPOOL_DIR" envDefault:"./data/spool"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"GATEWAY_LOG_LEVEL" envDefault:"info"`
	// LogFormat is text (for people; coloured only on a terminal, and not with
	// NO_COLOR set) or json (for machines).
	LogFormat string `env:"GATEWAY_LOG_FORMAT" envDefault:"text"`
	// AccessLog writes one info line per API request (id, client, model,
	// route, status, error type, candidates tried, duration, first byte).
	AccessLog Bool `env:"GATEWAY_ACCESS_LOG" envDefault:"true"`
	// ExecutionGateLimit is the number of concurrent upstream attempts.
	ExecutionGateLimit int `env:"GATEWAY_UPSTREAM_EXECUTION_GATE_LIMIT" envDefault:"256"`
	// QueueBudget is the longest wait for admission when the provider sets none.
	QueueBudget time.Duration `env:"GATEWAY_UPSTREAM_EXECUTION_GATE_QUEUE_BUDGET" envDefault:"250ms"`
	// FirstByteTimeout is the default first-byte watchdog for streams.
	FirstByteTimeout time.Duration `env:"GATEWAY_STREAM_FIRST_BYTE_TIMEOUT" envDefault:"30s"`
	// AgingInterval promotes queued work one priority class per interval.
	AgingInterval time.Duration `env:"GATEWAY_ADMISSION_AGING_INTERVAL" envDefault:"30s"`
	// MaxPending bounds the admission queue; beyond it admission fails at once.
	MaxPending int `env:"GATEWAY_ADMISSION_MAX_PENDING" envDefault:"4096"`
	// MaxRequestBytes caps request bodies; larger ones get 413.
	MaxRequestBytes ByteSize `env:"GATEWAY_MAX_REQUEST_BYTES" envDefault:"8388608"`
	// GCMinHeap is the smallest heap goal the garbage collector gets: below
	// it, collections wait until the heap reaches it (internal/gcfloor).
	// 0 leaves GOGC alone.
	GCMinHeap ByteSize `env:"GATEWAY_GC_MIN_HEAP" envDefault:"32MiB"`
	// ShutdownGrace is how long in-flight requests may run after SIGTERM.
	ShutdownGrace time.Duration `env:"GATEWAY_SHUTDOWN_GRACE" envDefault:"30s"`
	// ShutdownDelay keeps serving with /readyz failing, for load balancers.
	ShutdownDelay time.Duration `env:"GATEWAY_SHUTDOWN_DELAY" envDefault:"0s"`
	// AdminToken guards /admin/* and /debug/pprof/*; empty turns them off.
	AdminToken secret.String `env:"GATEWAY_ADMIN_TOKEN"`
	// AdminReadToken may read /admin/* (and the console) but gets 403 on
	// every write; empty: none. Only with AdminToken.
	AdminReadToken secret.String `env:"GATEWAY_ADMIN_READ_TOKEN"`
	// KeysRefresh is the full reload of the API keys from Postgres, the
	// backstop behind LISTEN/NOTIFY (docs/keys.md).
	KeysRefresh time.Duration `env:"GATEWAY_KEYS_REFRESH" envDefault:"60s"`
	// MetricsAddr is an optional second listener for /metrics only.
	MetricsAddr string `env:"GATEWAY_METRICS_ADDR"`
	// NativeHistograms adds native-histogram buckets to the histograms, for
	// Prometheus servers that negotiate them; classic buckets are always
	// there.
	NativeHistograms Bool `env:"GATEWAY_METRICS_NATIVE_HISTOGRAMS" envDefault:"false"`
	// PProf exposes /debug/pprof/ behind the admin token.
	PProf Bool `env:"GATEWAY_PPROF" envDefault:"false"`
	// ReadHeaderTimeout cuts clients that send headers too slowly.
	ReadHeaderTimeout time.Duration `env:"GATEWAY_READ_HEADER_TIMEOUT" envDefault:"10s"`
	// ReadBodyTimeout bounds reading one request body (an extension of
	// DESIGN section 3: without it a client trickling its body pins a handler).
	ReadBodyTimeout time.Duration `env:"GATEWAY_READ_BODY_TIMEOUT" envDefault:"30s"`
	// IdleTimeout closes idle keep-alive client connections.
	IdleTimeout time.Duration `env:"GATEWAY_IDLE_TIMEOUT" envDefault:"120s"`
	// StreamWriteTimeout bounds one write to a client, of a stream or a
	// body; no write runs past the attempt's timeouts.total or the
	// request's deadline either.
	StreamWriteTimeout time.Duration `env:"GATEWAY_STREAM_WRITE_TIMEOUT" envDefault:"60s"`
	// RetryBudgetPercent: attempts beyond a request's first (failover) are
	// allowed while, over the last 10 s, they stay under this percentage of
	// first attempts plus RetryBudgetMinPerSecond per second.
	RetryBudgetPercent int `env:"GATEWAY_RETRY_BUDGET_PERCENT" envDefault:"20"`
	// RetryBudgetMinPerSecond is the retry budget's floor, so that a quiet
	// gateway can still fail over. 0 and 0: no attempt beyond the first.
	RetryBudgetMinPerSecond int `env:"GATEWAY_RETRY_BUDGET_MIN_PER_SECOND" envDefault:"10"`
	// HedgeMinDelay floors a route's hedge delay when it is a percentile of
	// the target's first-byte latency (hedge: {after: p95}).
	HedgeMinDelay time.Duration `env:"GATEWAY_HEDGE_MIN_DELAY" envDefault:"100ms"`
	// ReportRetention deletes ledger rows older than this; 0 keeps everything.
	ReportRetention time.Duration `env:"GATEWAY_REPORT_RETENTION" envDefault:"720h"`
	// RedisURL shares target and client limits, client rates and target
	// health across replicas (redis://host:port/db); empty keeps them local.
	RedisURL secret.String `env:"GATEWAY_REDIS_URL"`
	// RedisLeaseTTL is how long a shared slot outlives a replica that died
	// holding it; held slots are renewed at a third of it.
	RedisLeaseTTL time.Duration `env:"GATEWAY_REDIS_LEASE_TTL" envDefault:"30s"`
	// RedisWake bounds how long a slot freed on one replica takes to reach
	// a waiter on another.
	RedisWake time.Duration `env:"GATEWAY_REDIS_WAKE" envDefault:"50ms"`
	// CacheMaxBytes bounds the in-process response cache (docs/cache.md) by
	// the bytes of its entries; with GATEWAY_REDIS_URL the cache is in Redis
	// and this is not used.
	CacheMaxBytes ByteSize `env:"GATEWAY_CACHE_MAX_BYTES" envDefault:"64MiB"`
	// PricesFile replaces the built-in price table (vendor -> model ->
	// prices, docs/cost.md); empty keeps the built-in one.
	PricesFile string `env:"GATEWAY_PRICES_FILE"`
	// BudgetReservationTTL is how long a request's budget reservation
	// outlives a replica that died holding it.
	BudgetReservationTTL time.Duration `env:"GATEWAY_BUDGET_RESERVATION_TTL" envDefault:"10m"`
	// ReplicaID names this process on request rows and in /admin/*;
	// default: the host name.
	ReplicaID string `env:"GATEWAY_REPLICA_ID"`
	// TraceURL links the console's timeline to a trace viewer, with
	// {trace_id} replaced (http://127.0.0.1:16686/trace/{trace_id} for
	// Jaeger); empty: the trace id is shown without a link.
	TraceURL string `env:"GATEWAY_TRACE_URL"`
	// Trace is the standard OpenTelemetry variables (docs/tracing.md);
	// with no exporter endpoint tracing is off.
	Trace tracing.Config

	// HoldMode is resolved from the hold-mode variables by resolveHoldMode,
	// because it has two prefixes and a forcing boolean.
	HoldMode watchdog.HoldMode `env:"-"`
}

// Warning is a setting that was accepted with a fallback; main logs it.
type Warning struct {
	Variable string
	Message  string
}

// Load reads the settings from environ (os.Environ() in main, a map in tests).
// It fails on the first malformed variable, naming it.
func Load(environ map[string]string) (Config, []Warning, error) {
	if environ == nil {
		environ = env.ToMap(os.Environ())
	}
	if _, ok := environ["GATEWAY_DATABASE_URL"]; !ok {
		if v, ok := environ["DATABASE_URL"]; ok {
			environ["GATEWAY_DATABASE_URL"] = v
		}
	}
	var cfg Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: environ}); err != nil {
		return Config{}, nil, namedError(err)
	}
	var warns []Warning
	mode, warns, err := resolveHoldMode(environ)
	if err != nil {
		return Config{}, nil, err
	}
	cfg.HoldMode = mode
	if err := cfg.validate(); err != nil {
		return Config{}, nil, err
	}
	return cfg, warns, nil
}

// namedError rewrites env's parse errors, which name the Go field, to name
// the environment variable the operator actually wrote.
func namedError(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) || len(agg.Errors) == 0 {
		return fmt.Errorf("config: %w", err)
	}
	var pe env.ParseError
	if !errors.As(agg.Errors[0], &pe) {
		return fmt.Errorf("config: %w", agg.Errors[0])
	}
	name := pe.Name
	if f, ok := reflect.TypeOf(Config{}).FieldByName(pe.Name); ok {
		name = f.Tag.Get("env")
	}
	return fmt.Errorf("config: %s: %w", name, pe.Err)
}

func (c *Config) validate() error {
	positive := []struct {
		name string
		v    time.Duration
	}{
		{"GATEWAY_UPSTREAM_EXECUTION_GATE_QUEUE_BUDGET", c.QueueBudget},
		{"GATEWAY_ADMISSION_AGING_INTERVAL", c.AgingInterval},
		{"GATEWAY_READ_HEADER_TIMEOUT", c.ReadHeaderTimeout},
		{"GATEWAY_READ_BODY_TIMEOUT", c.ReadBodyTimeout},
		{"GATEWAY_STREAM_WRITE_TIMEOUT", c.StreamWriteTimeout},
		{"GATEWAY_HEDGE_MIN_DELAY", c.HedgeMinDelay},
		{"GATEWAY_REDIS_WAKE", c.RedisWake},
		{"GATEWAY_BUDGET_RESERVATION_TTL", c.BudgetReservationTTL},
		{"GATEWAY_KEYS_REFRESH", c.KeysRefresh},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("config: %s must be a positive duration, got %s", p.name, p.v)
		}
	}
	if c.RetryBudgetPercent < 0 {
		return fmt.Errorf("config: GATEWAY_RETRY_BUDGET_PERCENT must not be negative, got %d", c.RetryBudgetPercent)
	}
	if c.RetryBudgetMinPerSecond < 0 {
		return fmt.Errorf("config: GATEWAY_RETRY_BUDGET_MIN_PER_SECOND must not be negative, got %d", c.RetryBudgetMinPerSecond)
	}
	if c.FirstByteTimeout < time.Millisecond {
		return fmt.Errorf("config: GATEWAY_STREAM_FIRST_BYTE_TIMEOUT must be at least 1ms, got %s", c.FirstByteTimeout)
	}
	nonNegative := []struct {
		name string
		v    time.Duration
	}{
		{"GATEWAY_SHUTDOWN_GRACE", c.ShutdownGrace},
		{"GATEWAY_SHUTDOWN_DELAY", c.ShutdownDelay},
		{"GATEWAY_IDLE_TIMEOUT", c.IdleTimeout},
		{"GATEWAY_REPORT_RETENTION", c.ReportRetention},
	}
	for _, p := range nonNegative {
		if p.v < 0 {
			return fmt.Errorf("config: %s must not be negative, got %s", p.name, p.v)
		}
	}
	if !c.AdminReadToken.Empty() && c.AdminReadToken.Reveal() == c.AdminToken.Reveal() {
		// One token cannot be both: a write with it would be refused or
		// allowed depending on which check ran first.
		return errors.New("config: GATEWAY_ADMIN_READ_TOKEN must differ from GATEWAY_ADMIN_TOKEN")
	}
	if c.RedisLeaseTTL < 3*time.Second {
		// Renewal runs at a third of the TTL; below a few seconds one slow
		// Redis answer would expire slots that are still in use.
		return fmt.Errorf("config: GATEWAY_REDIS_LEASE_TTL must be at least 3s, got %s", c.RedisLeaseTTL)
	}
	if c.ReplicaID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "gateway"
		}
		c.ReplicaID = h
	}
	if len(c.ReplicaID) > 128 {
		return fmt.Errorf("config: GATEWAY_REPLICA_ID must be at most 128 bytes, got %d", len(c.ReplicaID))
	}
	if c.ExecutionGateLimit <= 0 {
		return fmt.Errorf("config: GATEWAY_UPSTREAM_EXECUTION_GATE_LIMIT must be positive, got %d", c.ExecutionGateLimit)
	}
	if c.MaxPending <= 0 {
		return fmt.Errorf("config: GATEWAY_ADMISSION_MAX_PENDING must be positive, got %d", c.MaxPending)
	}
	if c.MaxRequestBytes <= 0 {
		return fmt.Errorf("config: GATEWAY_MAX_REQUEST_BYTES must be positive, got %d", c.MaxRequestBytes)
	}
	if c.CacheMaxBytes <= 0 {
		return fmt.Errorf("config: GATEWAY_CACHE_MAX_BYTES must be positive, got %d", c.CacheMaxBytes)
	}
	if c.GCMinHeap < 0 {
		return fmt.Errorf("config: GATEWAY_GC_MIN_HEAP must not be negative, got %d", c.GCMinHeap)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("config: GATEWAY_LOG_FORMAT must be text or json, got %q", c.LogFormat)
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("config: GATEWAY_LOG_LEVEL must be debug, info, warn or error, got %q", c.LogLevel)
	}
	return nil
}

// The hold-mode variables, read under both prefixes.
const (
	holdModeSuffix     = "UPSTREAM_EXECUTION_GATE_STREAM_HOLD_MODE"
	holdResponseSuffix = "UPSTREAM_EXECUTION_GATE_HOLD_STREAM_RESPONSE"
)

var holdPrefixes = []string{"GATEWAY_", "AETHER_GATEWAY_"}

// lookupFirst returns the first prefix's spelling that is set: GATEWAY_ wins
// over AETHER_GATEWAY_, per variable.
func lookupFirst(environ map[string]string, suffix string) (name, value string, ok bool) {
	for _, p := range holdPrefixes {
		if v, ok := environ[p+suffix]; ok {
			return p + suffix, v, true
		}
	}
	return "", "", false
}

// resolveHoldMode applies DESIGN section 3: a true HOLD_STREAM_RESPONSE forces
// response; else the mode variable applies; an unknown mode falls back to
// first_body with a warning naming the variable and the value.
func resolveHoldMode(environ map[string]string) (watchdog.HoldMode, []Warning, error) {
	if name, v, ok := lookupFirst(environ, holdResponseSuffix); ok {
		var b Bool
		if err := b.UnmarshalText([]byte(v)); err != nil {
			return 0, nil, fmt.Errorf("config: %s: %w", name, err)
		}
		if b {
			return watchdog.HoldResponse, nil, nil
		}
	}
	name, v, ok := lookupFirst(environ, holdModeSuffix)
	if !ok {
		return watchdog.HoldFirstBody, nil, nil
	}
	mode, known := watchdog.ParseHoldMode(v)
	if !known {
		return mode, []Warning{{Variable: name, Message: fmt.Sprintf("unknown hold mode %q, using first_body", v)}}, nil
	}
	return mode, nil, nil
}

// Bool accepts 1/true/yes/on and 0/false/no/off (any case); strconv.ParseBool
// alone rejects yes and on, which operators write.
type Bool bool

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *Bool) UnmarshalText(text []byte) error {
	switch strings.ToLower(strings.TrimSpace(string(text))) {
	case "1", "true", "yes", "on":
		*b = true
	case "0", "false", "no", "off":
		*b = false
	default:
		return fmt.Errorf("invalid boolean %q (want one of 1, true, yes, on, 0, false, no, off)", string(text))
	}
	return nil
}

// ByteSize is a byte count, written plain or with a KiB/MiB/GiB suffix.
type ByteSize int64

var errByteSize = errors.New("want a byte count such as 8388608, 512KiB or 8MiB")

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *ByteSize) UnmarshalText(text []byte) error {
	t := strings.TrimSpace(string(text))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("invalid size %q: %w", string(text), errByteSize)
	}
	*s = ByteSize(n * mult)
	return nil
}
