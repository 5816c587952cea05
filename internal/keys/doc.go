// Package keys owns the client keys issued at run time through the admin
// API (DESIGN 11.2, docs/keys.md): their records in Postgres (api_keys,
// with every write in admin_audit), the secrets' generation and hashing,
// the parsing of the admin API's bodies, and the in-memory set the
// request path looks keys up in, kept current by LISTEN/NOTIFY with a
// periodic full reload as backstop and a snapshot file for starts while
// Postgres is down.
//
// A secret exists only in the answer that issued it: the store, the
// set, the snapshot, the audit and the logs hold its SHA-256 and a short
// hint. The HTTP side (authentication, allowlists, the admin routes) is
// internal/api's; this package knows nothing of requests.
package keys
