package keys

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/internal/secret"
)

// Channel is the Postgres NOTIFY channel a key change is announced on; the
// payload is the key's id.
const Channel = "gateway_keys"

// Errors of the store. A *FieldError is a refused input.
var (
	ErrNotFound = errors.New("keys: no such key")
	// ErrRevoked: the key is revoked, and a revoked key cannot change.
	ErrRevoked = errors.New("keys: the key is revoked")
	// ErrNameTaken: a live key already has the name.
	ErrNameTaken = errors.New("keys: a live key already has this name")
	// ErrUnavailable: Postgres could not be reached or did not answer;
	// nothing was changed.
	ErrUnavailable = errors.New("keys: the key store is unavailable")
)

// opTimeout bounds one admin operation: an operator waiting on a Postgres
// that does not answer gets 503 rather than a hung call.
const opTimeout = 5 * time.Second

// Store is the api_keys and admin_audit tables (migrations/00008).
type Store struct {
	pool *pgxpool.Pool
}

// Open returns a store on dsn. It does not connect: the pool dials on the
// first call, so a store opened while Postgres is down works once it is up.
func Open(dsn secret.String) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn.Reveal())
	if err != nil {
		return nil, fmt.Errorf("keys: parse database url: %w", err)
	}
	cfg.MaxConns = 4 // admin writes are rare
	cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Filter selects the keys List returns: newest first, at most Limit
// (DefaultListLimit when 0), older than the key Before when set (ids are
// UUID v7, so in creation order).
type Filter struct {
	Team    *string
	Revoked *bool
	Limit   int
	Before  string
}

// List page sizes.
const (
	DefaultListLimit = 500
	MaxListLimit     = 5000
)

// AuditEntry is one admin_audit row.
type AuditEntry struct {
	ID      int64          `json:"id"`
	At      time.Time      `json:"at"`
	Actor   string         `json:"actor"`
	Action  string         `json:"action"`
	KeyID   *string        `json:"key_id"`
	Changes map[string]any `json:"changes"`
}

// querier is what the loads need: the pool, a transaction, or the
// listener's own connection.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// setColumns are what a Set keeps of a key; keyColumns the whole record.
// A full reload reads setColumns only: 100,000 metadata objects decoded
// just to be dropped were most of its allocations.
const (
	setColumns = `id::text, name, team, key_sha256, models, priority, max_concurrency,
	requests_per_minute, tokens_per_minute, budget_usd::float8, budget_per, cost_in_usage, expires_at,
	revoked_at, previous_key_sha256, previous_expires_at`
	keyColumns = setColumns + `, hint, metadata, created_at, updated_at`
)

// scanKey scans a row of keyColumns (full) or setColumns.
func scanKey(row pgx.Row, full bool) (Key, error) {
	var k Key
	var digest string
	var prev *string
	var usd *float64
	var per *string
	dest := []any{&k.ID, &k.Name, &k.Team, &digest, &k.Models, &k.Priority, &k.MaxConcurrency,
		&k.RequestsPerMinute, &k.TokensPerMinute, &usd, &per, &k.CostInUsage, &k.ExpiresAt,
		&k.RevokedAt, &prev, &k.PreviousExpiresAt}
	if full {
		dest = append(dest, &k.Hint, &k.Metadata, &k.CreatedAt, &k.UpdatedAt)
	}
	err := row.Scan(dest...)
	if err != nil {
		return k, err
	}
	if _, err := hex.Decode(k.Digest[:], []byte(digest)); err != nil {
		return k, fmt.Errorf("keys: key %s: bad key_sha256: %w", k.ID, err)
	}
	if prev != nil {
		if _, err := hex.Decode(k.Previous[:], []byte(*prev)); err != nil {
			return k, fmt.Errorf("keys: key %s: bad previous_key_sha256: %w", k.ID, err)
		}
		k.HasPrevious = true
	}
	if usd != nil && per != nil {
		k.Budget = &Budget{USD: *usd, Per: *per}
	}
	if k.Models == nil {
		k.Models = []string{}
	}
	if k.Metadata == nil && full {
		k.Metadata = map[string]string{}
	}
	return k, nil
}

func queryKeys(ctx context.Context, q querier, where string, args ...any) ([]Key, error) {
	var out []Key
	err := eachKey(ctx, q, true, func(k *Key) { out = append(out, *k) }, where, args...)
	return out, err
}

// eachKey calls fn with each key the query selects, as it is scanned: fn
// must not keep k, which is reused.
func eachKey(ctx context.Context, q querier, full bool, fn func(k *Key), where string, args ...any) error {
	cols := setColumns
	if full {
		cols = keyColumns
	}
	rows, err := q.Query(ctx, "SELECT "+cols+" FROM api_keys "+where, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		k, err := scanKey(rows, full)
		if err != nil {
			return err
		}
		fn(&k)
	}
	return rows.Err()
}

// loadSet reads every key, revoked ones included (a revoked key's digest
// is how the request path says "revoked" rather than "invalid"), into a
// set as the rows arrive: the whole records are never all held at once,
// which at 100,000 keys would double what a load needs at its peak. n is
// the expected count (the set's first size).
func loadSet(ctx context.Context, q querier, n int, compile Compile) (*Set, error) {
	b := newSetBuilder(n, compile)
	if err := eachKey(ctx, q, false, b.add, ""); err != nil {
		return nil, err
	}
	return b.done(), nil
}

// tableMark is a cheap fingerprint of api_keys: the row count and the sum
// of the rows' xmin (the transaction that wrote each row version). Every
// insert, update (through the API or by hand, whatever it sets) and
// delete changes it, as each writes a row version with a newer xmin or
// removes one; freezing keeps xmin. It reads no column, so 100,000 rows
// cost Postgres tens of milliseconds, where a full reload costs it and
// the gateway far more (docs/keys.md, "Memory and load time").
func tableMark(ctx context.Context, q querier) (mark string, count int, err error) {
	rows, err := q.Query(ctx, "SELECT count(*), coalesce(sum(xmin::text::bigint), 0)::text FROM api_keys")
	if err != nil {
		return "", 0, err
	}
	defer rows.Close()
	var sum string
	for rows.Next() {
		if err := rows.Scan(&count, &sum); err != nil {
			return "", 0, err
		}
	}
	return strconv.Itoa(count) + ":" + sum, count, rows.Err()
}

// loadOne reads one key; ErrNotFound when it does not exist.
func loadOne(ctx context.Context, q querier, id string) (Key, error) {
	if _, err := uuid.Parse(id); err != nil {
		return Key{}, ErrNotFound
	}
	ks, err := queryKeys(ctx, q, "WHERE id = $1", id)
	if err != nil {
		return Key{}, err
	}
	if len(ks) == 0 {
		return Key{}, ErrNotFound
	}
	return ks[0], nil
}

// Get reads one key.
func (s *Store) Get(ctx context.Context, id string) (Key, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	k, err := loadOne(ctx, s.pool, id)
	return k, classify(err)
}

// List reads the keys f selects, newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Key, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	where, args := "WHERE true", []any{}
	if f.Team != nil {
		args = append(args, *f.Team)
		where += fmt.Sprintf(" AND team = $%d", len(args))
	}
	if f.Revoked != nil {
		if *f.Revoked {
			where += " AND revoked_at IS NOT NULL"
		} else {
			where += " AND revoked_at IS NULL"
		}
	}
	if f.Before != "" {
		if _, err := uuid.Parse(f.Before); err != nil {
			return nil, &FieldError{Field: "before", Message: "must be a key id (next_before of an earlier page)"}
		}
		args = append(args, f.Before)
		where += fmt.Sprintf(" AND id < $%d", len(args))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	args = append(args, min(limit, MaxListLimit))
	ks, err := queryKeys(ctx, s.pool, where+fmt.Sprintf(" ORDER BY id DESC LIMIT $%d", len(args)), args...)
	if ks == nil {
		ks = []Key{}
	}
	return ks, classify(err)
}

// Audit reads the newest limit audit rows, newest first.
func (s *Store) Audit(ctx context.Context, limit int) ([]AuditEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id, at, actor, action, key_id::text, changes FROM admin_audit
		ORDER BY at DESC, id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.KeyID, &e.Changes); err != nil {
			return nil, classify(err)
		}
		out = append(out, e)
	}
	return out, classify(rows.Err())
}

// Create issues a key: the record and its secret, which exists nowhere
// else from here on.
func (s *Store) Create(ctx context.Context, actor string, c Change) (Key, string, error) {
	sec, err := NewSecret()
	if err != nil {
		return Key{}, "", fmt.Errorf("keys: random: %w", err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Key{}, "", fmt.Errorf("keys: id: %w", err)
	}
	var k Key
	c.Apply(&k)
	fields := c.Fields()
	fields["hint"] = Hint(sec)
	k, err = s.write(ctx, actor, "create", id.String(), fields, func(ctx context.Context, tx pgx.Tx) error {
		usd, per := budgetColumns(k.Budget)
		_, err := tx.Exec(ctx, `INSERT INTO api_keys (id, name, team, key_sha256, hint, models, priority,
			max_concurrency, requests_per_minute, tokens_per_minute, budget_usd, budget_per, cost_in_usage,
			expires_at, metadata) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15)`,
			id, k.Name, k.Team, DigestHex(sec), Hint(sec), k.Models, k.Priority, k.MaxConcurrency,
			k.RequestsPerMinute, k.TokensPerMinute, usd, per, k.CostInUsage, k.ExpiresAt, k.Metadata)
		return err
	})
	if err != nil {
		return Key{}, "", err
	}
	return k, sec, nil
}

// Update applies c to the live key id.
func (s *Store) Update(ctx context.Context, actor, id string, c Change) (Key, error) {
	return s.write(ctx, actor, "update", id, c.Fields(), func(ctx context.Context, tx pgx.Tx) error {
		k, err := lockLive(ctx, tx, id)
		if err != nil {
			return err
		}
		c.Apply(&k)
		usd, per := budgetColumns(k.Budget)
		_, err = tx.Exec(ctx, `UPDATE api_keys SET name=$2, team=$3, models=$4, priority=$5, max_concurrency=$6,
			requests_per_minute=$7, tokens_per_minute=$8, budget_usd=$9, budget_per=$10, cost_in_usage=$11,
			expires_at=$12, metadata=$13, updated_at=now() WHERE id=$1`,
			id, k.Name, k.Team, k.Models, k.Priority, k.MaxConcurrency, k.RequestsPerMinute, k.TokensPerMinute,
			usd, per, k.CostInUsage, k.ExpiresAt, k.Metadata)
		return err
	})
}

// Rotate gives the live key id a new secret; the current one keeps
// working for grace (0: not at all). A secret still in an earlier
// rotation's grace ends now: a key has at most two working secrets.
func (s *Store) Rotate(ctx context.Context, actor, id string, grace time.Duration) (Key, string, error) {
	sec, err := NewSecret()
	if err != nil {
		return Key{}, "", fmt.Errorf("keys: random: %w", err)
	}
	fields := map[string]any{"grace": grace.String(), "hint": Hint(sec)}
	k, err := s.write(ctx, actor, "rotate", id, fields, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := lockLive(ctx, tx, id); err != nil {
			return err
		}
		if grace > 0 {
			_, err = tx.Exec(ctx, `UPDATE api_keys SET previous_key_sha256 = key_sha256,
				previous_expires_at = now() + $3 * interval '1 microsecond', key_sha256 = $2, hint = $4,
				updated_at = now() WHERE id = $1`, id, DigestHex(sec), grace.Microseconds(), Hint(sec))
		} else {
			_, err = tx.Exec(ctx, `UPDATE api_keys SET previous_key_sha256 = NULL, previous_expires_at = NULL,
				key_sha256 = $2, hint = $3, updated_at = now() WHERE id = $1`, id, DigestHex(sec), Hint(sec))
		}
		return err
	})
	if err != nil {
		return Key{}, "", err
	}
	return k, sec, nil
}

// Revoke ends the key id now, its secret in a rotation's grace too. A key
// already revoked is returned as it is, with no audit row: nothing changed.
func (s *Store) Revoke(ctx context.Context, actor, id string) (Key, error) {
	k, err := s.write(ctx, actor, "revoke", id, map[string]any{}, func(ctx context.Context, tx pgx.Tx) error {
		_, err := lockLive(ctx, tx, id)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE api_keys SET revoked_at = now(), previous_expires_at = NULL,
			updated_at = now() WHERE id = $1`, id)
		return err
	})
	if errors.Is(err, ErrRevoked) {
		return s.Get(ctx, id)
	}
	return k, err
}

// lockLive reads the key id FOR UPDATE, refusing a revoked one.
func lockLive(ctx context.Context, tx pgx.Tx, id string) (Key, error) {
	if _, err := uuid.Parse(id); err != nil {
		return Key{}, ErrNotFound
	}
	ks, err := queryKeys(ctx, tx, "WHERE id = $1 FOR UPDATE", id)
	if err != nil {
		return Key{}, err
	}
	if len(ks) == 0 {
		return Key{}, ErrNotFound
	}
	if ks[0].RevokedAt != nil {
		return ks[0], ErrRevoked
	}
	return ks[0], nil
}

// write runs one admin write in a transaction with its audit row and the
// NOTIFY that tells every replica (delivered at commit, so never before
// the change is visible). Either all of it happens or none. It returns
// the key as the transaction left it, so an answer never misses its
// write for a read that failed after the commit.
func (s *Store) write(ctx context.Context, actor, action, id string, fields map[string]any, do func(context.Context, pgx.Tx) error) (Key, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	changes, err := json.Marshal(fields)
	if err != nil {
		return Key{}, fmt.Errorf("keys: audit: %w", err)
	}
	var k Key
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := do(ctx, tx); err != nil {
			return err
		}
		if k, err = loadOne(ctx, tx, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO admin_audit (actor, action, key_id, changes) VALUES ($1, $2, $3, $4)`,
			actor, action, id, changes); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, id)
		return err
	})
	return k, classify(err)
}

func budgetColumns(b *Budget) (*float64, *string) {
	if b == nil {
		return nil, nil
	}
	return &b.USD, &b.Per
}

// classify maps a Postgres error to the store's: a refused write stays
// what it is, a name conflict is ErrNameTaken, and anything that is not
// an answer from Postgres (refused connection, timeout, lost connection)
// is ErrUnavailable.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrRevoked) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if pe.Code == "23505" && pe.ConstraintName == "api_keys_live_name_idx" {
			return ErrNameTaken
		}
		if pe.Code == "42P01" { // undefined_table: the migrations have not run yet
			return fmt.Errorf("%w: %s (are the migrations applied?)", ErrUnavailable, pe.Message)
		}
		return fmt.Errorf("keys: %w", err)
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}
