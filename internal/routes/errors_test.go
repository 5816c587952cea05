package routes

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// errorsBase is a valid routes file; the line numbers in the expected
// messages below refer to it.
const errorsBase = `providers:
  - name: primary
    base_url: http://127.0.0.1:9001/v1
    api_keys: ["${K1}", "${K2}"]
    max_concurrency: 8
    queue_budget: 100ms
    timeouts: { connect: 1s, first_byte: 2s, idle: 3s, total: 4s }
    headers: { OpenAI-Organization: "${ORG}" }
    query: { api-version: "2024-10-21" }
  - name: backup
    format: openai
    base_url: http://127.0.0.1:9002/v1/
    api_keys: ["sk-backup-literal-333"]
    max_concurrency: 4
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, model: up-mini }
      - { provider: backup, priority: 1 }
clients:
  - { name: app-1, key_sha256: "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855" }
`

// errorKeys are every key the base file configures (with errorsEnv); none
// may appear in any error message.
var errorKeys = []string{"sk-secret-one-111", "sk-secret-two-222", "sk-backup-literal-333"}

func errorsEnv() map[string]string {
	return map[string]string{"K1": "sk-secret-one-111", "K2": "sk-secret-two-222", "ORG": "org-1"}
}

// TestParseRoutesErrorMessages protects what an operator reads when the
// routes file is wrong: the YAML path and line of the mistake, the
// offending value where it is not a secret (with credentials redacted), the
// ${VAR} a bad value came from, a suggestion for a misspelt field, and
// never a key.
func TestParseRoutesErrorMessages(t *testing.T) {
	tests := []struct {
		name     string
		from, to string            // edit applied to errorsBase ("" from: replace the whole file)
		env      map[string]string // merged over errorsEnv
		unset    []string          // removed from errorsEnv
		path     string            // FieldError.Path
		want     string            // the exact message
	}{
		// The file's shape, found before decoding.
		{
			name: "resume attempts above 3", from: "  - name: gpt-4o-mini\n", to: "  - name: gpt-4o-mini\n    resume: { attempts: 4 }\n",
			path: "models[0].resume.attempts", want: `line 17: models[0].resume.attempts must be between 0 and 3, got 4`,
		},
		{
			name: "resume attempts negative", from: "  - name: gpt-4o-mini\n", to: "  - name: gpt-4o-mini\n    resume: { attempts: -1 }\n",
			path: "models[0].resume.attempts", want: `line 17: models[0].resume.attempts must be between 0 and 3, got -1`,
		},
		{
			name: "cache scope unknown", from: "  - name: gpt-4o-mini\n", to: "  - name: gpt-4o-mini\n    cache: { scope: teams }\n",
			path: "models[0].cache.scope", want: `line 17: models[0].cache.scope: "teams" is unknown (known: client, team, shared) (did you mean "team"?)`,
		},
		{
			name: "cache ttl below a second", from: "  - name: gpt-4o-mini\n", to: "  - name: gpt-4o-mini\n    cache: { ttl: 10ms }\n",
			path: "models[0].cache.ttl", want: `line 17: models[0].cache.ttl must be between 1s and 168h (7 days), got 10ms`,
		},
		{
			name: "cache entry size not a size", from: "  - name: gpt-4o-mini\n", to: "  - name: gpt-4o-mini\n    cache: { max_entry_bytes: 1MB }\n",
			path: "models[0].cache.max_entry_bytes", want: `line 17: models[0].cache.max_entry_bytes: "1MB" is not a byte count (write it like 1048576, 512KiB or 1MiB)`,
		},
		{
			name: "cache entry size above 16MiB", from: "  - name: gpt-4o-mini\n", to: "  - name: gpt-4o-mini\n    cache: { max_entry_bytes: 32MiB }\n",
			path: "models[0].cache.max_entry_bytes", want: `line 17: models[0].cache.max_entry_bytes must be between 1 and 16MiB, got 33554432`,
		},
		{
			name: "cache misspelt field", from: "  - name: gpt-4o-mini\n", to: "  - name: gpt-4o-mini\n    cache: { tll: 1m }\n",
			path: "models[0].cache", want: `line 17: models[0].cache: unknown field "tll" (did you mean "ttl"?)`,
		},
		{
			name: "prefill on an anthropic provider", from: "    format: openai\n", to: "    format: anthropic\n    prefill: true\n",
			path: "providers[1].prefill", want: `line 12: providers[1].prefill applies only to format openai (an anthropic provider takes a prefill natively)`,
		},
		{
			name: "misspelt field", from: `api_keys: ["sk-backup-literal-333"]`, to: `api_key: ["sk-backup-literal-333"]`,
			path: "providers[1]", want: `line 13: providers[1]: unknown field "api_key" (did you mean "api_keys"?)`,
		},
		{
			name: "field with dashes", from: "max_concurrency: 4", to: "max-concurrency: 4",
			path: "providers[1]", want: `line 14: providers[1]: unknown field "max-concurrency" (did you mean "max_concurrency"?)`,
		},
		{
			name: "field a part of the real name", from: "base_url: http://127.0.0.1:9002/v1/", to: "url: http://127.0.0.1:9002/v1/",
			path: "providers[1]", want: `line 12: providers[1]: unknown field "url" (did you mean "base_url"?)`,
		},
		{
			name: "unknown field without a near miss", from: "max_concurrency: 4", to: "max_concurrency: 4\n    colour: red",
			path: "providers[1]", want: `line 15: providers[1]: unknown field "colour"`,
		},
		{
			name: "unknown field in a flow mapping", from: "{ provider: backup, priority: 1 }", to: "{ provider: backup, prio: 1 }",
			path: "models[0].candidates[1]", want: `line 19: models[0].candidates[1]: unknown field "prio" (did you mean "priority"?)`,
		},
		{
			name: "unknown nested field", from: "first_byte: 2s", to: "firstbyte: 2s",
			path: "providers[0].timeouts", want: `line 7: providers[0].timeouts: unknown field "firstbyte" (did you mean "first_byte"?)`,
		},
		{
			name: "unknown top-level field", from: "models:", to: "model:",
			path: "", want: `line 15: top level: unknown field "model" (did you mean "models"?)`,
		},
		{
			name: "field set twice", from: "max_concurrency: 4", to: "max_concurrency: 4\n    max_concurrency: 5",
			path: "providers[1].max_concurrency", want: `line 15: providers[1].max_concurrency is set twice (first at line 14)`,
		},
		{
			name: "keys as a string, not a list", from: `api_keys: ["sk-backup-literal-333"]`, to: `api_keys: "sk-backup-literal-333"`,
			path: "providers[1].api_keys", want: `line 13: providers[1].api_keys: expected a list (- item lines or [ ... ]), got a string`,
		},
		{
			name: "a key as a mapping", from: `api_keys: ["sk-backup-literal-333"]`, to: `api_keys: [{sk-backup-literal-333: x}]`,
			path: "providers[1].api_keys[0]", want: `line 13: providers[1].api_keys[0]: expected a string, got a mapping`,
		},
		{
			name: "a key with a tag that does not fit", from: `api_keys: ["sk-backup-literal-333"]`, to: `api_keys: [!!int sk-backup-literal-333]`,
			path: "providers[1].api_keys[0]", want: `line 13: providers[1].api_keys[0]: the value tagged "!!int" is not a string`,
		},
		{
			name: "providers as a mapping", from: "", to: "providers: { name: primary }\n",
			path: "providers", want: `line 1: providers: expected a list (- item lines or [ ... ]), got a mapping`,
		},
		{
			name: "not a number", from: "max_concurrency: 4", to: "max_concurrency: four",
			path: "providers[1].max_concurrency", want: `line 14: providers[1].max_concurrency: "four" is not a whole number`,
		},
		{
			name: "quoted number", from: "max_concurrency: 4", to: `max_concurrency: "4"`,
			path: "providers[1].max_concurrency", want: `line 14: providers[1].max_concurrency: "4" is not a whole number (write it without quotes)`,
		},
		{
			name: "bad duration", from: "queue_budget: 100ms", to: "queue_budget: soon",
			path: "providers[0].queue_budget", want: `line 6: providers[0].queue_budget: "soon" is not a duration (write it like 250ms, 30s or 2m)`,
		},
		{
			name: "negative duration", from: "idle: 3s", to: "idle: -3s",
			path: "providers[0].timeouts.idle", want: `line 7: providers[0].timeouts.idle: "-3s" is negative`,
		},
		// YAML syntax: the line of the problem, not the one where yaml's
		// enclosing block starts (which yaml reports, counted from 0).
		{
			name: "YAML syntax", from: "  - name: backup\n", to: "  - name: backup\n    format: [openai\n",
			path: "", want: `line 11: not valid YAML: did not find expected ',' or ']'`,
		},
		{
			name: "indentation one space short", from: `    api_keys: ["${K1}"`, to: `   api_keys: ["${K1}"`,
			path: "", want: `line 4: not valid YAML: did not find expected '-' indicator`,
		},
		{
			name: "indentation of a mapping key", from: "    max_concurrency: 4\n", to: "     max_concurrency: 4\n",
			path: "", want: `line 14: not valid YAML: did not find expected key`,
		},
		{
			// The string runs on to the next quote, on line 13, where the
			// parser finds what follows it wrong.
			name: "an unclosed quote", from: `api-version: "2024-10-21" }`, to: `api-version: "2024-10-21 }`,
			path: "", want: `line 13: not valid YAML: did not find expected ',' or '}'`,
		},

		// base_url: the value is shown, redacted, with the variable it came from.
		{
			name: "base_url from an unset variable", from: "http://127.0.0.1:9001/v1", to: "${PRIMARY_URL}",
			path: "providers[0].base_url", want: `line 3: providers[0].base_url: "" is not an absolute http(s) URL (it comes from ${PRIMARY_URL}, which is not set)`,
		},
		{
			name: "base_url from an empty variable", from: "http://127.0.0.1:9001/v1", to: "${PRIMARY_URL}", env: map[string]string{"PRIMARY_URL": ""},
			path: "providers[0].base_url", want: `line 3: providers[0].base_url: "" is not an absolute http(s) URL (it comes from ${PRIMARY_URL}, which is empty)`,
		},
		{
			name: "base_url without a scheme from a variable", from: "http://127.0.0.1:9001/v1", to: "${PRIMARY_URL}", env: map[string]string{"PRIMARY_URL": "127.0.0.1:9001/v1"},
			path: "providers[0].base_url", want: `line 3: providers[0].base_url: "127.0.0.1:9001/v1" is not an absolute http(s) URL (it comes from ${PRIMARY_URL}); it needs a scheme, like https://`,
		},
		{
			name: "base_url from a bad default", from: "http://127.0.0.1:9001/v1", to: "${PRIMARY_URL:-localhost:9001}",
			path: "providers[0].base_url", want: `line 3: providers[0].base_url: "localhost:9001" is not an absolute http(s) URL (it comes from the default of ${PRIMARY_URL}, which is not set); it needs a scheme, like https://`,
		},
		{
			name: "base_url with one of two variables unset", from: "http://127.0.0.1:9001/v1", to: "http://${HOST}${PORT}/v1", env: map[string]string{"PORT": ":9001"},
			path: "providers[0].base_url", want: `line 3: providers[0].base_url: "http://:9001/v1" is not an absolute http(s) URL (it comes from ${HOST}, which is not set, and ${PORT})`,
		},
		{
			name: "base_url with another scheme", from: "http://127.0.0.1:9002/v1/", to: "ftp://127.0.0.1/v1",
			path: "providers[1].base_url", want: `line 12: providers[1].base_url: "ftp://127.0.0.1/v1" is not an absolute http(s) URL`,
		},
		{
			name: "base_url with a password", from: "http://127.0.0.1:9002/v1/", to: "https://user:hunter2@api.example.com/v1",
			path: "providers[1].base_url", want: `line 12: providers[1].base_url: "https://user:REDACTED@api.example.com/v1" has credentials in it; put keys in api_keys`,
		},
		{
			name: "base_url with a key in its query", from: "http://127.0.0.1:9002/v1/", to: "https://api.example.com/v1?api-version=2024-10-21&key=hunter2",
			path: "providers[1].base_url", want: `line 12: providers[1].base_url: "https://api.example.com/v1?api-version=2024-10-21&key=REDACTED" has a query; put parameters in query`,
		},
		{
			name: "base_url with a configured key in its path", from: "http://127.0.0.1:9002/v1/", to: "https://api.example.com/${K1}/v1#x",
			path: "providers[1].base_url", want: `line 12: providers[1].base_url: "https://api.example.com/REDACTED/v1#x" has a fragment (it comes from ${K1})`,
		},
		{
			name: "base_url with a configured key as host", from: "http://127.0.0.1:9002/v1/", to: "http://sk-backup-literal-333/v1?x=1",
			path: "providers[1].base_url", want: `line 12: providers[1].base_url: "http://REDACTED/v1?x=1" has a query; put parameters in query`,
		},
		{
			name: "base_url unparsable", from: "http://127.0.0.1:9002/v1/", to: `"http://[::1/v1"`,
			path: "providers[1].base_url", want: `line 12: providers[1].base_url: "http://[::1/v1" is not an absolute http(s) URL`,
		},

		// Keys: named by index, never by value.
		{
			name: "key from an unset variable", from: `"${K2}"`, to: `"${NOPE}"`,
			path: "providers[0].api_keys[1]", want: `line 4: providers[0].api_keys[1] is empty (it comes from ${NOPE}, which is not set)`,
		},
		{
			name: "key from an empty variable", from: `"${K2}"`, to: `"${K2}"`, env: map[string]string{"K2": ""},
			path: "providers[0].api_keys[1]", want: `line 4: providers[0].api_keys[1] is empty (it comes from ${K2}, which is empty)`,
		},
		{
			name: "empty literal key", from: `"sk-backup-literal-333"`, to: `" "`,
			path: "providers[1].api_keys[0]", want: `line 13: providers[1].api_keys[0] is empty`,
		},
		{
			name: "no keys", from: `api_keys: ["sk-backup-literal-333"]`, to: "api_keys: []",
			path: "providers[1].api_keys", want: `line 13: providers[1].api_keys must list at least one key (or set auth: none for a server without keys)`,
		},
		{
			name: "keys missing", from: `    api_keys: ["sk-backup-literal-333"]` + "\n", to: "",
			path: "providers[1].api_keys", want: `line 10: providers[1].api_keys must list at least one key (or set auth: none for a server without keys)`,
		},

		// Every other check names the path.
		{
			name: "no providers", from: "", to: "models: []\n",
			path: "providers", want: `providers: at least one provider is required`,
		},
		{
			name: "empty providers", from: "", to: "providers: []\n",
			path: "providers", want: `line 1: providers: at least one provider is required`,
		},
		{
			name: "provider without a name", from: "  - name: backup\n    format: openai\n", to: "  - format: openai\n",
			path: "providers[1].name", want: `line 10: providers[1].name is required`,
		},
		{
			name: "duplicate provider", from: "name: backup", to: "name: primary",
			path: "providers[1].name", want: `line 10: providers[1].name: "primary" is already used by providers[0]`,
		},
		{
			name: "unknown format", from: "format: openai", to: "format: cohere",
			path: "providers[1].format", want: `line 11: providers[1].format: "cohere" is unknown (known: openai, anthropic, gemini, vertex, bedrock)`,
		},
		// Wire formats and auth styles.
		{
			name: "unknown auth", from: "format: openai", to: "format: openai\n    auth: basic",
			path: "providers[1].auth", want: `line 12: providers[1].auth: "basic" is unknown (known: bearer, x-api-key, none, google_service_account, aws_sigv4, or {header: NAME})`,
		},
		{
			name: "misspelt auth", from: "format: openai", to: "format: openai\n    auth: x_api_key",
			path: "providers[1].auth", want: `line 12: providers[1].auth: "x_api_key" is unknown (known: bearer, x-api-key, none, google_service_account, aws_sigv4, or {header: NAME}) (did you mean "x-api-key"?)`,
		},
		{
			name: "auth header missing", from: "format: openai", to: "format: openai\n    auth: { header: \"\" }",
			path: "providers[1].auth.header", want: `line 12: providers[1].auth.header is required: the header that carries the key, like api-key`,
		},
		{
			name: "auth header invalid", from: "format: openai", to: "format: openai\n    auth: { header: \"api key\" }",
			path: "providers[1].auth.header", want: `line 12: providers[1].auth.header: "api key" is not a valid header name`,
		},
		{
			name: "auth mapping unknown field", from: "format: openai", to: "format: openai\n    auth: { name: api-key }",
			path: "providers[1].auth", want: `line 12: providers[1].auth: unknown field "name"`,
		},
		{
			name: "auth a list", from: "format: openai", to: "format: openai\n    auth: [bearer]",
			path: "providers[1].auth", want: `line 12: providers[1].auth: expected bearer, x-api-key, none or {header: NAME}, got a list`,
		},
		{
			name: "auth none with keys", from: "format: openai", to: "format: openai\n    auth: none",
			path: "providers[1].api_keys", want: `line 14: providers[1].api_keys: auth none sends no key; remove api_keys (the provider gets one target)`,
		},
		{
			name: "forward_headers invalid name", from: "format: openai", to: "format: openai\n    forward_headers: [\"OpenAI Organization\"]",
			path: "providers[1].forward_headers[0]", want: `line 12: providers[1].forward_headers[0]: "OpenAI Organization" is not a valid header name`,
		},
		{
			name: "forward_headers credentials", from: "format: openai", to: "format: openai\n    forward_headers: [OpenAI-Project, authorization]",
			path: "providers[1].forward_headers[1]", want: `line 12: providers[1].forward_headers[1]: "authorization" is never forwarded (credentials, hop-by-hop and the gateway's own headers)`,
		},
		{
			name: "forward_headers the auth header", from: "format: openai", to: "format: openai\n    auth: { header: x-key }\n    forward_headers: [X-Key]",
			path: "providers[1].forward_headers[0]", want: `line 13: providers[1].forward_headers[0]: "X-Key" is never forwarded (credentials, hop-by-hop and the gateway's own headers)`,
		},
		{
			name: "default_max_tokens on openai", from: "format: openai", to: "format: openai\n    default_max_tokens: 1024",
			path: "providers[1].default_max_tokens", want: `line 12: providers[1].default_max_tokens applies only to formats anthropic, gemini, vertex and bedrock (this provider is openai)`,
		},
		{
			name: "default_max_tokens zero", from: "format: openai", to: "format: anthropic\n    default_max_tokens: 0",
			path: "providers[1].default_max_tokens", want: `line 12: providers[1].default_max_tokens must be a positive whole number, got 0`,
		},
		{
			name: "default_max_tokens quoted", from: "format: openai", to: "format: anthropic\n    default_max_tokens: \"1024\"",
			path: "providers[1].default_max_tokens", want: `line 12: providers[1].default_max_tokens: "1024" is not a whole number (write it without quotes)`,
		},
		{
			name: "stream_usage on anthropic", from: "format: openai", to: "format: anthropic\n    stream_usage: false",
			path: "providers[1].stream_usage", want: `line 12: providers[1].stream_usage applies only to format openai (this provider is anthropic)`,
		},
		{
			name: "stream_usage not a boolean", from: "format: openai", to: "format: openai\n    stream_usage: \"no\"",
			path: "providers[1].stream_usage", want: `line 12: providers[1].stream_usage: "no" is not true or false`,
		},
		{
			name: "zero concurrency", from: "max_concurrency: 4", to: "max_concurrency: 0",
			path: "providers[1].max_concurrency", want: `line 14: providers[1].max_concurrency must be positive, got 0`,
		},
		{
			name: "concurrency missing", from: "    max_concurrency: 4\n", to: "",
			path: "providers[1].max_concurrency", want: `line 10: providers[1].max_concurrency is required: how many requests one key may run at once`,
		},
		{
			name: "bad header name", from: `OpenAI-Organization: "${ORG}"`, to: `"Bad Name": x`,
			path: `providers[0].headers["Bad Name"]`, want: `line 8: providers[0].headers["Bad Name"] is not a valid header name`,
		},
		{
			name: "header value with CRLF", from: `OpenAI-Organization: "${ORG}"`, to: `OpenAI-Organization: "a\r\nX-Evil: 1"`,
			path: "providers[0].headers.OpenAI-Organization", want: `line 8: providers[0].headers.OpenAI-Organization contains CR, LF or NUL`,
		},
		{
			name: "header value with CRLF from a variable", from: `OpenAI-Organization: "${ORG}"`, to: `OpenAI-Organization: "${ORG}"`, env: map[string]string{"ORG": "o\r\nX-Evil: 1"},
			path: "providers[0].headers.OpenAI-Organization", want: `line 8: providers[0].headers.OpenAI-Organization contains CR, LF or NUL`,
		},
		{
			name: "query with LF", from: `api-version: "2024-10-21"`, to: `api-version: "2024\n-10-21"`,
			path: "providers[0].query.api-version", want: `line 9: providers[0].query.api-version contains CR, LF or NUL`,
		},
		{
			name: "no models", from: "models:\n  - name: gpt-4o-mini\n    candidates:\n      - { provider: primary, model: up-mini }\n      - { provider: backup, priority: 1 }\n", to: "models: []\n",
			path: "models", want: `line 15: models: at least one model is required`,
		},
		{
			name: "model without a name", from: "  - name: gpt-4o-mini\n    candidates:\n", to: "  - candidates:\n",
			path: "models[0].name", want: `line 16: models[0].name is required`,
		},
		{
			name: "model without candidates", from: "    candidates:\n      - { provider: primary, model: up-mini }\n      - { provider: backup, priority: 1 }\n", to: "",
			path: "models[0].candidates", want: `line 16: models[0].candidates must list at least one entry`,
		},
		{
			name: "duplicate model", from: "      - { provider: backup, priority: 1 }\n", to: "      - { provider: backup, priority: 1 }\n  - name: gpt-4o-mini\n    candidates: [{ provider: backup }]\n",
			path: "models[1].name", want: `line 20: models[1].name: "gpt-4o-mini" is already used by models[0]`,
		},
		{
			name: "candidate without a provider", from: "{ provider: backup, priority: 1 }", to: "{ priority: 1 }",
			path: "models[0].candidates[1].provider", want: `line 19: models[0].candidates[1].provider is required`,
		},
		{
			name: "misspelt provider", from: "provider: backup, priority: 1", to: "provider: bakcup, priority: 1",
			path: "models[0].candidates[1].provider", want: `line 19: models[0].candidates[1].provider: "bakcup" is not a configured provider (did you mean "backup"?)`,
		},
		{
			name: "unknown provider", from: "provider: backup, priority: 1", to: "provider: azure, priority: 1",
			path: "models[0].candidates[1].provider", want: `line 19: models[0].candidates[1].provider: "azure" is not a configured provider (configured: primary, backup)`,
		},
		{
			name: "negative priority", from: "priority: 1", to: "priority: -1",
			path: "models[0].candidates[1].priority", want: `line 19: models[0].candidates[1].priority must not be negative, got -1`,
		},
		{
			name: "bad weight", from: "provider: backup, priority: 1", to: "provider: backup, priority: 1, weight: -2",
			path: "models[0].candidates[1].weight", want: `line 19: models[0].candidates[1].weight must be at least 1, got -2`,
		},
		{
			name: "client without a name", from: "{ name: app-1, key_sha256:", to: "{ key_sha256:",
			path: "clients[0].name", want: `line 21: clients[0].name is required`,
		},
		{
			name: "token pasted instead of its hash", from: `"E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"`, to: `"sk-client-token-444"`,
			path: "clients[0].key_sha256", want: `line 21: clients[0].key_sha256 must be 64 hex characters: the SHA-256 of the client's token, not the token`,
		},
		{
			name: "duplicate client", from: "clients:\n", to: "clients:\n  - { name: app-1, key_sha256: \"" + strings.Repeat("ab", 32) + "\" }\n",
			path: "clients[1].name", want: `line 22: clients[1].name: "app-1" is already used by clients[0]`,
		},
		{
			name: "same hash for two clients", from: "clients:\n", to: "clients:\n  - { name: app-0, key_sha256: \"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\" }\n",
			path: "clients[1].key_sha256", want: `line 22: clients[1].key_sha256 is the same as clients[0]'s`,
		},
		{
			name: "unknown client priority", from: `B855" }`, to: `B855", priority: high }`,
			path: "clients[0].priority", want: `line 21: clients[0].priority: unknown priority "high": allowed values are interactive, foreground, background, maintenance`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.to
			if tt.from != "" {
				src = strings.Replace(errorsBase, tt.from, tt.to, 1)
				if src == errorsBase && tt.from != tt.to {
					t.Fatalf("test edit %q did not apply", tt.from)
				}
			}
			e := errorsEnv()
			for k, v := range tt.env {
				e[k] = v
			}
			for _, k := range tt.unset {
				delete(e, k)
			}
			_, err := Parse([]byte(src), env(e))
			if err == nil {
				t.Fatalf("no error for:\n%s", src)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", got, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FieldError", err)
			}
			if fe.Path != tt.path {
				t.Errorf("Path = %q, want %q", fe.Path, tt.path)
			}
			for _, k := range append(errorKeys, "hunter2", "sk-client-token-444") {
				if strings.Contains(err.Error(), k) {
					t.Errorf("error shows the secret %q: %v", k, err)
				}
			}
		})
	}
}

// TestExpandDefaults: ${VAR:-default} takes the default when VAR is unset
// or empty, as in the shell and docker compose, so one file can run the
// demo as is and production with its own values.
func TestExpandDefaults(t *testing.T) {
	tests := []struct {
		in   string
		env  map[string]string
		want string
	}{
		{"${A:-x}", nil, "x"},
		{"${A:-x}", map[string]string{"A": ""}, "x"},
		{"${A:-x}", map[string]string{"A": "set"}, "set"},
		{"${A:-}", nil, ""},
		{"${A}", nil, ""},
		{"${A:-http://h:1/v1?a=b}", nil, "http://h:1/v1?a=b"},
		{"pre-${A:-x}-${B}-post", map[string]string{"B": "b"}, "pre-x-b-post"},
		{"${A-x}", map[string]string{"A": "a"}, "${A-x}"}, // only :- is a default; the rest stays literal
		{"$A ${ A} ${1A}", map[string]string{"A": "a"}, "$A ${ A} ${1A}"},
	}
	for _, tt := range tests {
		got, _ := expandString(tt.in, env(tt.env))
		if got != tt.want {
			t.Errorf("expandString(%q, %v) = %q, want %q", tt.in, tt.env, got, tt.want)
		}
	}
}

// TestRedactURL: the parts of a URL that may be credentials are hidden
// when the URL is shown in an error, and the parts that help find the
// mistake (scheme, host, deployment names, versions) stay.
func TestRedactURL(t *testing.T) {
	keys := []string{"configured-key-value"}
	tests := []struct{ in, want string }{
		{"https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"https://user:pw@h/v1", "https://user:REDACTED@h/v1"},
		{"https://sk-abcdefgh@h/v1", "https://REDACTED@h/v1"},
		{"https://h/v1?api_key=short&api-version=2024-10-21", "https://h/v1?api_key=REDACTED&api-version=2024-10-21"},
		{"https://h/v1?x=AIzaSyA1b2C3d4E5f6G7h8I9j0", "https://h/v1?x=REDACTED"},
		{"https://h/0123456789abcdef0123456789abcdef/send", "https://h/REDACTED/send"},
		{"https://res-eastus2.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18", "https://res-eastus2.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18"},
		{"https://h/v1#access_token=abc", "https://h/v1#REDACTED"},
		{"http://[::1/configured-key-value", "http://[::1/REDACTED"},
		{"configured-key-value", "REDACTED"},
		{"sk-proj-abcdef", "REDACTED"},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.in, keys); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestParseRoutesAliasBomb: merge keys that double at every step (a
// "billion laughs") are refused after a bounded walk instead of hanging
// the loader or a config reload.
func TestParseRoutesAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("providers:\n  - &p0 {name: a}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "  - &p%d {<<: [*p%d, *p%d]}\n", i, i-1, i-1)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Parse([]byte(b.String()), env(nil))
		done <- err
	}()
	select {
	case err := <-done:
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "too many aliases") {
			t.Fatalf("err = %v, want a FieldError about too many aliases", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Parse did not return within 20s")
	}
}
