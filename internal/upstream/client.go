package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/llmgw/gateway/internal/secret"
)

// maxErrorBody bounds how much of a non-2xx body is kept for relaying and
// records; providers' error bodies are small.
const maxErrorBody = 64 << 10

// ClientOptions tune the transport of one provider.
type ClientOptions struct {
	Provider       string
	ConnectTimeout time.Duration
	// MaxIdlePerHost should cover the provider's peak concurrency so that
	// bursts reuse warm connections instead of dialing.
	MaxIdlePerHost int
}

// Client sends requests to one provider over its own connection pool.
type Client struct {
	provider string
	rt       *http.Transport
}

// NewClient builds a provider client with a tuned transport: pooled
// keep-alive connections, a connect timeout, no proxy taken from the
// environment (a stray HTTPS_PROXY must not reroute LLM traffic) and no
// transparent compression (bytes reach the client as the provider sent them).
func NewClient(opts ClientOptions) *Client {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	if opts.MaxIdlePerHost < 64 {
		opts.MaxIdlePerHost = 64
	}
	d := &net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}
	c := &Client{provider: opts.Provider}
	c.rt = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &ConnectError{Provider: opts.Provider, Err: err, Dial: true}
			}
			return conn, nil
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   opts.MaxIdlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   opts.ConnectTimeout,
		ExpectContinueTimeout: 0,
		DisableCompression:    true,
		// A provider's header block is a few KiB; one of megabytes is a
		// fault (the answer fails over as a protocol error), not
		// something to hold per attempt and relay.
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		// Every open upstream connection keeps its buffers for its whole
		// life, so with 2,000 open streams each KiB here is 2 MiB of heap.
		// The read buffer holds the response headers and the stream's bytes
		// as they arrive (events are a few hundred bytes; a larger read
		// bypasses it): 2 KiB, not net/http's 4. The write buffer stays at
		// 4 KiB: a request that outgrows it (headers and body) has the rest
		// of its body copied through a fresh buffer of up to 32 KiB and sent
		// in a second write (a second TLS record), and request bodies of a
		// few KiB are common. 32 KiB buffers had cost 64 KiB a connection.
		ReadBufferSize: 2 << 10,
	}
	return c
}

// CloseIdle closes pooled connections (shutdown, tests).
func (c *Client) CloseIdle() { c.rt.CloseIdleConnections() }

// IdleCloser returns CloseIdle bound to the transport rather than to c, for
// a cleanup (runtime.AddCleanup) that runs once c itself is unreachable: a
// response body still being read holds the transport, not c, and its
// connection goes back to the pool after c is gone.
func (c *Client) IdleCloser() func() { return c.rt.CloseIdleConnections }

// Call is one request to a provider.
type Call struct {
	URL          string
	Key          secret.String
	Auth         Auth        // how Key travels; the zero value is a bearer token
	Extra        http.Header // provider headers from the routes file
	Defaults     http.Header // headers sent only when neither Extra nor the client set them
	ClientHeader http.Header // the client's headers, filtered here
	Forward      *Forwarding // which of ClientHeader reach the provider; nil: none
	Body         []byte
	Stream       bool
	// Clock reads the time a Retry-After date is measured from: the
	// caller's clock (the attempt loop's), so one request's times agree.
	// Nil is the process clock.
	Clock interface{ Now() time.Time }
	// Traceparent and Tracestate, when set, are the W3C trace context
	// sent to a provider whose routes entry sets propagate_trace.
	Traceparent, Tracestate string
	// gemini: the call goes to a gemini provider (set by Build), whose
	// error bodies say what a status alone does not (geminiStatus).
	gemini bool
	// bedrock: the call goes to a bedrock provider (set by Build): its
	// stream is eventstream frames, and its error types are in a header
	// (bedrockStatus).
	bedrock bool
}

func (c *Call) now() time.Time {
	if c.Clock != nil {
		return c.Clock.Now()
	}
	return time.Now()
}

// callRequest is a call's HTTP request, headers set and signed, with what
// Send needs after the answer: whether the client chose headers, and the
// credentials or token sent (for redacting and refusing them).
type callRequest struct {
	req      *http.Request
	chosen   bool
	awsCreds aws.Credentials
	token    string
}

// request builds the call's HTTP request: the forwarded and provider
// headers, the content types, and the credentials, signed last. A
// credentials failure is a *TokenError without its Provider, which Send
// sets.
func (call *Call) request(ctx context.Context) (callRequest, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, call.URL, bytes.NewReader(call.Body))
	if err != nil {
		return callRequest{}, &ProtocolError{Err: err}
	}
	h := req.Header
	chosen := ForwardRequestHeaders(h, call.ClientHeader, call.Forward)
	for k, vv := range call.Extra {
		h[k] = vv
	}
	for k, vv := range call.Defaults {
		if _, set := h[k]; !set {
			h[k] = vv
		}
	}
	if _, set := h["Idempotency-Key"]; !set {
		// Marks the request replayable without sending the header: a
		// connection from the pool that the provider closed before any
		// byte of an answer is retried once on a new one by the transport,
		// instead of failing the attempt over (net/http's documented rule).
		h["Idempotency-Key"] = nil
	}
	h.Set("Content-Type", "application/json")
	if call.Traceparent != "" {
		h.Set("Traceparent", call.Traceparent)
		if call.Tracestate != "" {
			h.Set("Tracestate", call.Tracestate)
		}
	}
	switch {
	case call.Stream && call.bedrock:
		h.Set("Accept", EventStreamContentType)
	case call.Stream:
		h.Set("Accept", "text/event-stream")
	default:
		h.Set("Accept", "application/json")
	}
	// The client's own credentials were filtered out above whatever the
	// style; with AuthNone the provider gets none at all.
	var token string             // the access token sent, for Refused
	var awsCreds aws.Credentials // the credentials signed with, for redactAWS
	switch call.Auth.Style {
	case AuthAWS:
		// Last, so every header above is signed.
		var err error
		if awsCreds, err = call.Auth.AWS.Sign(ctx, req, call.Body); err != nil {
			if ctx.Err() != nil {
				return callRequest{}, ctx.Err()
			}
			return callRequest{}, &TokenError{Err: err}
		}
	case AuthGoogle:
		tok, err := call.Auth.Tokens.Token(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return callRequest{}, ctx.Err()
			}
			return callRequest{}, &TokenError{Err: err}
		}
		token = tok
		h.Set("Authorization", "Bearer "+tok)
	default:
		call.Auth.set(h, call.Key.Reveal())
	}
	return callRequest{req: req, chosen: chosen, awsCreds: awsCreds, token: token}, nil
}

// Send performs the call. A 2xx response is returned with its body open for
// the caller to read and close. Any other status becomes *StatusError (body
// read, bounded, and closed); a failure before a response becomes
// *ConnectError. When ctx ends first, the returned error wraps ctx's error;
// callers look at context.Cause to tell a watchdog from a client that left.
func (c *Client) Send(ctx context.Context, call *Call) (*http.Response, error) {
	out, err := call.request(ctx)
	if err != nil {
		var te *TokenError
		if errors.As(err, &te) {
			te.Provider = c.provider
		}
		return nil, err
	}
	req, chosen, awsCreds, token := out.req, out.chosen, out.awsCreds, out.token
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ce *ConnectError
		if errors.As(err, &ce) {
			return nil, ce
		}
		// Connection-level failures after the dial (reset, closed before a
		// response, TLS) are the provider's trouble just like a refused dial.
		return nil, &ConnectError{Provider: c.provider, Err: err, Dial: dialFailure(err)}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if !call.Stream && !jsonContentType(resp.Header.Get("Content-Type")) {
			// The gateway answers JSON or SSE only: a provider page
			// (text/html from a proxy in front of it) is not relayed on
			// the gateway's origin, and another candidate may answer.
			resp.Body.Close()
			return nil, &ProtocolError{Err: fmt.Errorf("%w: %s", ErrNotJSON, strconv.Quote(clip(resp.Header.Get("Content-Type"), 64)))}
		}
		if call.Stream && call.bedrock {
			return bedrockStream(resp)
		}
		return resp, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	if call.Auth.Style == AuthAWS {
		body = redactAWS(body, awsCreds)
	}
	if token != "" && resp.StatusCode == http.StatusUnauthorized {
		// A token refused before its expiry (revoked, the key deleted):
		// the next attempt gets a new one instead of this one for the
		// rest of its hour.
		call.Auth.Tokens.Refused(token)
	}
	se := &StatusError{
		Code:       resp.StatusCode,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), call.now()),
		Header:     http.Header{},
		Body:       body,

		ClientChosen: chosen,
	}
	if call.gemini {
		geminiStatus(se)
	} else if call.bedrock {
		bedrockStatus(se, resp.Header)
	} else if se.Code == http.StatusTooManyRequests {
		se.KeyWide = keyWide(resp.Header, body)
	}
	CopyResponseHeaders(se.Header, resp.Header)
	return nil, se
}

// ErrNotJSON is the cause of a non-streaming 2xx answer whose Content-Type
// is not JSON.
var ErrNotJSON = errors.New("answer is not JSON")

// jsonContentType reports whether a Content-Type names JSON
// (application/json or a +json type). An absent one is taken for JSON: the
// gateway labels what it relays itself, and a body that is not JSON fails
// where it is read or translated.
func jsonContentType(ct string) bool {
	if ct == "" || strings.HasPrefix(ct, "application/json") && (len(ct) == 16 || ct[16] == ';' || ct[16] == ' ') {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// clip bounds provider text quoted in an error.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
