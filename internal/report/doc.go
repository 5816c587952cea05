// Package report owns the request ledger: the Request and Candidate records,
// the asynchronous batched writer that upserts them into Postgres, the disk spool
// that holds them while Postgres is unreachable, the retention job, the reads
// behind the admin API (a request's timeline, the request list with its
// cursor, the provider statistics with their cache of settled buckets), and
// the migration command.
//
// It leaves to others: deciding what to record and when (the attempt loop),
// exposing counters (internal/metrics wraps Stats), HTTP (internal/api calls
// Timeline, ListRequests and ProviderStats), and configuration (internal/config fills Options).
//
// # Flow
//
// RecordRequest and RecordCandidate copy the record into a bounded channel and
// return; they never wait on Postgres. When the channel is full they append the
// record to the spool themselves; only when that fails too is it dropped, counted
// and logged (rate-limited). One batcher goroutine takes up to BatchSize records
// or whatever arrived within FlushInterval, sanitises them, and holds back for
// one more flush the records of rows that are still in flight (no terminal
// record yet, not held before), so that a request finishing by then is written
// once instead of inserted and then updated. It folds repeated keys
// (available, pending, success for one candidate) into one row and writes the
// batch with one statement, atomic on its own (no BEGIN or COMMIT): INSERT ...
// SELECT unnest($n) over one array parameter per column, for the candidates in
// a data-modifying CTE and for the requests around it. A batch whose rows all
// hold their initial record (pending, available) is presumed new and inserted
// plainly; otherwise, or when one of them exists after all, it is upserted with
// ON CONFLICT DO UPDATE. If Postgres does not answer within WriteTimeout
// the batch is appended to the spool (one write and one fsync per batch) and the
// connector goroutine starts probing with backoff. Once Postgres answers it runs
// the migrations (AutoMigrate), checks the schema and wakes the batcher, which
// replays the spool oldest segment first, then deletes it, before writing new
// batches. BENCHMARKS.md has what each of these costs Postgres.
//
// # Guarantees
//
//   - Status only moves forward, enforced by the upsert's WHERE clause: a row is
//     replaced only by a record of strictly higher rank (candidates: available <
//     pending < streaming < terminal; requests: pending < terminal). The first
//     terminal status is final, replays are idempotent, and records may arrive in
//     any order (there is no foreign key between the tables for that reason).
//   - Endpoints are stored as origins only; error messages are cut to 1 KiB on a
//     rune boundary and stripped of bearer tokens and API-key-shaped strings; NUL
//     bytes and invalid UTF-8 are replaced so no record can fail an insert.
//   - A SIGKILL loses at most what is in the in-memory queue and the current
//     partial batch, which includes the in-flight records held back from the
//     previous flush: a record reaches Postgres at most two flush intervals
//     after it was recorded (under light load; a full batch flushes sooner).
//     Close writes everything, held records included. A torn spool tail is
//     detected by its CRC and skipped with a log line.
//   - Every goroutine is started by Start and stopped and awaited by Close.
package report
