// Package upstream speaks to providers: the OpenAI-compatible request and
// response wire format, the tuned HTTP transport and its connection pools,
// SSE event reading, header hygiene between client and provider, and the
// classification of failures into typed errors (ConnectError, TokenError,
// StatusError, ProtocolError) that the attempt loop branches on. Where a
// provider's format is not the client's, the adapters here (exchange.go,
// reader.go; gemini_exchange.go and gemini_reader.go for formats gemini
// and vertex, vertex.go for Vertex's URL and OAuth2 tokens;
// bedrock_exchange.go, bedrock_reader.go, bedrock_frames.go (eventstream
// frames as events) and bedrock_sign.go (SigV4) for format bedrock) hand
// the bodies and streams to the pure translators in the subpackages
// (anthropic, anthropicclient, gemini, bedrock) and turn their errors
// into these.
//
// It does not decide failover order or talk to the admission scheduler; the
// candidates package does that with the errors defined here.
package upstream
