package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// request is what one benchmark request sends. X-Mock-* headers shape the mock's
// answer; the gateway and the baseline both pass them on untouched.
type request struct {
	body   []byte
	header http.Header
	stream bool
}

// sample is the outcome of one request. Latencies run from the request's intended
// start (the schedule, in open loop), not from when it was sent.
type sample struct {
	total time.Duration // to the end of the body (the last chunk, for streams)
	first time.Duration // streams: to the first data event
	err   string        // empty on success
}

// newClient returns a client with its own large keep-alive pool, so targets do not
// share connections.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// do sends rq to url and reads the whole answer, timing from start.
func do(ctx context.Context, c *http.Client, url string, rq *request, start time.Time) sample {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(rq.body))
	if err != nil {
		return sample{err: err.Error()}
	}
	req.Header = rq.header.Clone()
	resp, err := c.Do(req)
	if err != nil {
		return sample{err: classify(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return sample{err: fmt.Sprintf("status %d", resp.StatusCode)}
	}
	if !rq.stream {
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return sample{err: classify(err)}
		}
		if n == 0 {
			return sample{err: "empty body"}
		}
		return sample{total: time.Since(start)}
	}
	var s sample
	br := bufio.NewReaderSize(resp.Body, 4096)
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("data: ")) {
			if s.first == 0 {
				s.first = time.Since(start)
			}
			if bytes.HasPrefix(line, []byte("data: [DONE]")) {
				done = true
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a long event: the rest of it follows
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return sample{err: classify(err)}
		}
	}
	if !done {
		return sample{err: "stream ended without [DONE]"}
	}
	s.total = time.Since(start)
	return s
}

// errCutShort labels requests that failed because their run's bound or the whole
// benchmark's time budget ended, not because the server failed them.
const errCutShort = "cut short (run bound or time budget)"

func cutShort(run context.Context, s sample) sample {
	if s.err != "" && run.Err() != nil {
		s.err = errCutShort
	}
	return s
}

// classify turns a transport error into a short, stable category for the error counts.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled (time budget)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected EOF"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other: " + err.Error()
}

// openLoopSpec is a fixed-rate run.
type openLoopSpec struct {
	rate        int           // requests per second
	duration    time.Duration // scheduled window; the run ends when the last answer is in
	maxInFlight int           // beyond this the driver waits (and those requests count late)
	timeout     time.Duration // per request
}

// runResult is one measured run against one target.
type runResult struct {
	samples []sample
	start   time.Time     // open loop: request i was due at start + i/rate
	elapsed time.Duration // from the first scheduled start to the last answer
	lag     []time.Duration
}

// openLoop sends spec.rate requests per second at fixed times, whether or not earlier
// ones have answered (open loop), so a slow server cannot slow the offered load.
// Latency counts from each request's scheduled time: a request the driver could only
// send late (in-flight bound reached, driver starved of CPU) carries that delay, which
// is what a coordinated-omission-free measurement needs. lag records how late each
// request was actually sent, to judge the driver itself.
func openLoop(ctx context.Context, c *http.Client, url string, rq *request, spec openLoopSpec) runResult {
	return openLoopWith(ctx, spec, func(rctx context.Context, at time.Time) sample { return do(rctx, c, url, rq, at) })
}

// openLoopWith is openLoop with the request sent by send, timed from at.
func openLoopWith(ctx context.Context, spec openLoopSpec, send func(ctx context.Context, at time.Time) sample) runResult {
	n := int(int64(spec.rate) * int64(spec.duration) / int64(time.Second))
	interval := time.Second / time.Duration(spec.rate)
	res := runResult{samples: make([]sample, n), lag: make([]time.Duration, n)}
	// The whole run is bounded: the schedule, then the slowest answer's timeout.
	ctx, cancel := context.WithTimeout(ctx, spec.duration+spec.timeout+time.Second)
	defer cancel()

	// Go's timers sleep in whole milliseconds when the process is idle; at 2,000 RPS
	// that would batch sends and blur sub-millisecond differences. The dispatcher owns
	// an OS thread and sleeps with nanosleep at a 1 µs timer slack instead (about 20 µs
	// late instead of about 1 ms, measured on the bench machine), without spinning.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const prSetTimerSlack = 29
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1000, 0)

	sem := make(chan struct{}, spec.maxInFlight)
	var wg sync.WaitGroup
	t0 := time.Now().Add(5 * time.Millisecond)
	i := 0
dispatch:
	for ; i < n; i++ {
		at := t0.Add(time.Duration(i) * interval)
		if !sleepUntil(ctx, at) {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break dispatch
		}
		res.lag[i] = time.Since(at)
		wg.Add(1)
		go func(i int, at time.Time) {
			defer wg.Done()
			rctx, rcancel := context.WithTimeout(ctx, spec.timeout)
			res.samples[i] = cutShort(ctx, send(rctx, at))
			rcancel()
			<-sem
		}(i, at)
	}
	res.lag = res.lag[:i]
	for ; i < n; i++ {
		res.samples[i] = sample{err: errCutShort}
	}
	wg.Wait()
	res.start, res.elapsed = t0, time.Since(t0)
	return res
}

// sleepUntil sleeps on the calling OS thread until t (see openLoop), in slices of
// at most 50 ms so that an ended ctx is noticed; it reports whether t was reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	for {
		if ctx.Err() != nil {
			return false
		}
		d := time.Until(t)
		if d <= 0 {
			return true
		}
		ts := syscall.NsecToTimespec(int64(min(d, 50*time.Millisecond)))
		_ = syscall.Nanosleep(&ts, nil)
	}
}

// closedLoop keeps conns requests in flight, each connection sending its next request
// when the previous answer is in, for duration: the throughput a server sustains.
func closedLoop(ctx context.Context, c *http.Client, url string, rq *request, conns int, duration, timeout time.Duration) runResult {
	ctx, cancel := context.WithTimeout(ctx, duration+timeout+time.Second)
	defer cancel()
	per := make([][]sample, conns)
	var wg sync.WaitGroup
	start := time.Now()
	stopAt := start.Add(duration)
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stopAt) && ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, timeout)
				per[w] = append(per[w], cutShort(ctx, do(rctx, c, url, rq, time.Now())))
				rcancel()
			}
		}()
	}
	wg.Wait()
	res := runResult{elapsed: time.Since(start)}
	for _, s := range per {
		res.samples = append(res.samples, s...)
	}
	return res
}

// holdSpec is the open-streams memory run.
type holdSpec struct {
	streams  int           // streams to hold open at once
	rampRate int           // streams opened per second
	hold     time.Duration // how long all of them stay open while memory is sampled
	timeout  time.Duration // bound of the whole run
}

// holdResult is what the memory run saw.
type holdResult struct {
	opened, peakOpen int
	errs             map[string]int
	peakRSS          uint64 // highest VmRSS sampled while streams were open
}

// holdStreams opens spec.streams slow streams (rq makes the mock send one chunk per
// second for long enough), waits until all are open, samples the proxy's resident
// memory for spec.hold (while whileOpen, when not nil, runs too), then lets the
// streams end on their own.
func holdStreams(ctx context.Context, url string, rq *request, spec holdSpec, proxy *proc, whileOpen func()) holdResult {
	ctx, cancel := context.WithTimeout(ctx, spec.timeout)
	defer cancel()
	c := newClient()
	defer c.CloseIdleConnections()
	var open, opened, failed atomic.Int64
	var mu sync.Mutex
	res := holdResult{errs: map[string]int{}}
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(spec.rampRate)
	start := time.Now()
	for i := range spec.streams {
		wait := time.Until(start.Add(time.Duration(i) * interval))
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			wasOpen := false
			err := holdOne(ctx, c, url, rq, func() { wasOpen = true; open.Add(1); opened.Add(1) })
			if wasOpen {
				open.Add(-1)
			}
			if err != "" && ctx.Err() != nil {
				err = errCutShort
			}
			if err != "" {
				failed.Add(1)
				mu.Lock()
				res.errs[err]++
				mu.Unlock()
			}
		}()
	}
	// Wait until every stream is open (or the bound passes), then sample.
	for opened.Load()+failed.Load() < int64(spec.streams) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	if whileOpen != nil {
		wg.Go(whileOpen)
	}
	sampleEnd := time.Now().Add(spec.hold)
	for time.Now().Before(sampleEnd) && ctx.Err() == nil {
		if _, rss, err := proxy.memory(); err == nil && rss > res.peakRSS {
			res.peakRSS = rss
		}
		if o := int(open.Load()); o > res.peakOpen {
			res.peakOpen = o
		}
		time.Sleep(250 * time.Millisecond)
	}
	wg.Wait()
	res.opened = int(opened.Load())
	return res
}

// holdOne runs one held stream; onOpen is called at its first data event. It returns
// an error category, or "".
func holdOne(ctx context.Context, c *http.Client, url string, rq *request, onOpen func()) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(rq.body))
	if err != nil {
		return err.Error()
	}
	req.Header = rq.header.Clone()
	resp, err := c.Do(req)
	if err != nil {
		return classify(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	seen, done := false, false
	for {
		line, err := br.ReadSlice('\n')
		if !seen && bytes.HasPrefix(line, []byte("data: ")) {
			seen = true
			onOpen()
		}
		if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			done = true
		}
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return classify(err)
		}
	}
	if !done {
		return "stream ended without [DONE]"
	}
	return ""
}
