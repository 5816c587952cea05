// Package upstream speaks to providers: the OpenAI-compatible request and
// response wire format, the tuned HTTP transport and its connection pools,
// SSE event reading, header hygiene between client and provider, and the
// classification of failures into typed errors (ConnectError, StatusError,
// ProtocolError) that the attempt loop branches on.
//
// It does not decide failover order or talk to the admission scheduler; the
// candidates package does that with the errors defined here.
package upstream
