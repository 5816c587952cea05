// Package metrics owns the gateway's Prometheus collectors (DESIGN section 8):
// a dedicated registry (no global default, so tests build isolated
// gateways), the request-path observations of the attempt loop, and
// scrape-time collectors that read the admission scheduler and the report
// writer directly, so gauges never keep a second copy of their state.
//
// Label values come only from configuration (provider, model route) and fixed
// enums (gate, stage, status, error_type, hold mode); never request ids, keys,
// URLs or free text.
package metrics
