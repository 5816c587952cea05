// Command mockupstream runs internal/mockupstream as a standalone upstream with
// injectable faults, for manual runs, scripts and benchmarks of the gateway. It serves
// OpenAI chat completions (/v1/chat/completions), Responses (/v1/responses) and
// embeddings (/v1/embeddings), and Anthropic messages (/v1/messages, which wants
// x-api-key and anthropic-version headers unless -keyless); the newer routes also answer
// without the /v1 prefix. GET /mock/stats[?path=|?model=] and GET
// /mock/last-request[?path=] report what it received. Flags set the default Behavior;
// X-Mock-* request headers override it per request (X-Mock-For-Model scopes them to
// named models); POST /mock/behavior?model=NAME with a JSON Behavior gives one model its
// own (DELETE clears it; without ?model= it sets the defaults), and POST /mock/reset
// forgets per-model behaviours and counts, so a test driving a gateway binary can fail a
// primary model while its fallback on the same mock answers. It logs "listening on <host:port>" once the socket is bound,
// so a script that passes -addr 127.0.0.1:0 can read the chosen port.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr, nil)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mockupstream:", err)
		os.Exit(2)
	}
}

// run serves until ctx ends, then shuts down gracefully. listening, when not nil, is
// told the bound address (tests use it instead of parsing the log).
func run(ctx context.Context, args []string, logw io.Writer, listening func(net.Addr)) error {
	fs := flag.NewFlagSet("mockupstream", flag.ContinueOnError)
	fs.SetOutput(logw)
	addr := fs.String("addr", "127.0.0.1:9001", "listen address; port 0 picks a free port")
	grace := fs.Duration("shutdown-grace", 5*time.Second,
		"on SIGINT/SIGTERM, how long in-flight answers may finish before connections are closed (stalled streams always use all of it)")

	var b mockupstream.Behavior
	fs.StringVar(&b.Identity, "identity", mockupstream.DefaultIdentity, "name in the completion text and the X-Mock-Identity header")
	fs.DurationVar(&b.Latency, "latency", 0, "delay before the answer (non-stream) or the headers (stream)")
	fs.DurationVar(&b.FirstByteDelay, "first-byte-delay", 0, "stream: delay after headers and comments, before the first data event")
	fs.BoolVar(&b.StallAfterHeaders, "stall-after-headers", false, "stream: send headers, then nothing until the client cancels")
	fs.IntVar(&b.Comments, "comments", 0, "stream: keep-alive comments before the first event")
	fs.DurationVar(&b.CommentInterval, "comment-interval", 0, "stream: pause after each comment")
	fs.IntVar(&b.Chunks, "chunks", mockupstream.DefaultChunks, "content chunks (stream) or numbered words (non-stream)")
	fs.DurationVar(&b.ChunkInterval, "chunk-interval", 0, "stream: pause before each content chunk")
	fs.IntVar(&b.StallAfterChunks, "stall-after-chunks", 0, "stream: stall after this many content chunks (0 = never)")
	fs.IntVar(&b.ResetAfterChunks, "reset-after-chunks", 0, "stream: abort the connection after this many content chunks (0 = never)")
	fs.IntVar(&b.ErrorAfterChunks, "error-after-chunks", 0, "stream: send the provider's error event after this many content chunks and end (0 = never)")
	fs.IntVar(&b.EndAfterChunks, "end-after-chunks", 0, "stream: end cleanly but without the closing events after this many content chunks (0 = never)")
	fs.IntVar(&b.MalformedAfterChunks, "malformed-after-chunks", 0, "stream: send a 'data: {not json' event after this many content chunks, then go on (0 = never)")
	fs.BoolVar(&b.OmitFinishReason, "omit-finish-reason", false, "chat stream: no finish_reason on the last content chunk")
	fs.IntVar(&b.CachedTokens, "cached-tokens", 0, "cache reads in every answer's usage, where each vendor reports them")
	fs.IntVar(&b.CacheWriteTokens, "cache-write-tokens", 0, "cache writes in every answer's usage (OpenAI: inside prompt_tokens only)")
	fs.IntVar(&b.ReasoningTokens, "reasoning-tokens", 0, "reasoning in every answer's usage (Anthropic: inside output_tokens)")
	fs.IntVar(&b.Status, "status", 0, "answer this error status (0 or 200 = succeed), subject to -fail-rate")
	fs.Float64Var(&b.FailRate, "fail-rate", 0, "share 0..1 of requests that fail with -status (500 if unset); 0 = all when -status is set")
	fs.Float64Var(&b.HangRate, "hang-rate", 0, "share 0..1 of the requests not failed by -fail-rate that hang until the client gives up (stream: after the headers)")
	fs.Float64Var(&b.SlowRate, "slow-rate", 0, "stream: share 0..1 of the streams neither failed nor hung whose first byte waits -slow-delay instead of -first-byte-delay")
	fs.DurationVar(&b.SlowDelay, "slow-delay", 0, "stream: first-byte delay of the -slow-rate share")
	fs.StringVar(&b.RetryAfter, "retry-after", "", "Retry-After header on error answers")
	fs.IntVar(&b.FailFirst, "fail-first", 0, "fail the first N requests of each model (with -status, 500 if unset), then succeed")
	fs.DurationVar(&b.DownFor, "down-for", 0, "fail every request (with -status, 503 if unset) for this long from the start, then succeed")
	fs.StringVar(&b.ErrorKind, "error-kind", "", "fail with a provider's real refusal: "+
		mockupstream.ErrorContextLength+", "+mockupstream.ErrorContentFilter+", "+mockupstream.ErrorRequestTooLarge+", "+mockupstream.ErrorRequestsExhausted)
	fs.BoolVar(&b.ResetBeforeHeaders, "reset-before-headers", false, "failing requests (all, unless -fail-rate/-fail-first/-down-for choose) get a TCP reset and no response")
	fs.BoolVar(&b.HangBeforeHeaders, "hang-before-headers", false, "failing requests (all, unless -fail-rate/-fail-first/-down-for choose) get no byte until the client leaves")
	// Default on, unlike Behavior.Usage: a standalone mock should act like OpenAI unless
	// asked to emulate a provider that ignores stream_options.
	fs.BoolVar(&b.Usage, "usage", true, "honour stream_options.include_usage with a final usage chunk")
	fs.StringVar(&b.ToolUse, "tool-use", "", "Anthropic messages: answer with a tool_use block calling this tool (* = the request's first tool)")
	fs.BoolVar(&b.Keyless, "keyless", false, "Anthropic messages: accept requests without an x-api-key header")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := b.Validate(); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	logger := log.New(logw, "mockupstream: ", log.LstdFlags|log.Lmsgprefix)
	mock := mockupstream.New(b)
	srv := &http.Server{
		Handler: mock,
		// No WriteTimeout: slow and stalled streams are the point of this server.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          logger,
	}
	logger.Printf("listening on %s (%+v)", ln.Addr(), b)
	if listening != nil {
		listening(ln.Addr())
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err // Serve failed before any shutdown was asked for
	case <-ctx.Done():
	}

	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Closing the connections cancels the handlers' contexts, which ends stalls.
		logger.Printf("shutdown grace of %v over, closing connections: %v", *grace, err)
		_ = srv.Close()
	}
	<-served // http.ErrServerClosed, the expected answer after Shutdown
	// Close does not wait for handlers; wait for them so that none outlives run.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := mock.WaitIdle(wctx); err != nil {
		return fmt.Errorf("handlers still running after close: %w", err)
	}
	logger.Printf("stopped (%+v)", mock.Stats())
	return nil
}
