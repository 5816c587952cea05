// Package routes owns the routes file (DESIGN section 3): the part of the
// configuration that changes with the deployment, its providers, model
// routes and client keys, and the prices, teams and budgets of DESIGN 11.1
// (cost.go; computing costs and enforcing budgets belong elsewhere).
//
// It holds the file's Go model (Routes and its ProviderConfig, ModelConfig,
// ClientConfig, ... blocks, Duration), reading it with a size cap (ReadFile,
// Load), and Parse: YAML decoding, ${VAR} and ${VAR:-default} expansion of
// values after parsing (so the environment cannot inject structure), the
// defaults a block leaves out, and validation. Every mistake is a
// *FieldError (matching ErrInvalid) that names the YAML path and line, says
// which variable an empty value came from, suggests the field or provider a
// near miss meant, and never shows a key: a shape checker walks the parsed
// document against the model's types before decoding, because yaml's own
// errors name Go types and echo values. RedactURL shows a URL of the file
// with anything that may be a credential replaced; check-config uses it too.
//
// What the routes mean at run time (planning, targets, failover) belongs to
// internal/candidates, which resolves validated Routes into a Planner.
package routes
