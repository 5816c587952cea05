// Package migrations holds the SQL schema of the report store as goose migrations,
// embedded into the binary so that `gateway migrate up` and GATEWAY_AUTO_MIGRATE need no
// files on disk.
//
// A released migration is never edited: a schema change is a new, higher-numbered file.
package migrations

import "embed"

// FS holds every migration file; goose reads them from its root.
//
//go:embed *.sql
var FS embed.FS
