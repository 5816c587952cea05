package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of utime/stime in /proc/PID/stat (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// proc is one child process of the benchmark: a server under test or the mock.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error
}

// startProc starts bin with args and env, its output in logDir/name.log.
func startProc(name, logDir, bin string, args, env []string) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	// A benchmark killed hard must not leave servers behind. Pdeathsig follows the
	// thread that forked; the load driver unlocks every thread it locks, so Go keeps
	// that thread alive.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to drain (SIGTERM) and kills it after grace.
func (p *proc) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// logTail returns the last lines of the process's output, for error messages.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cpu is the user+system CPU time the process has used so far, all threads.
func (p *proc) cpu() (time.Duration, error) { return cpuOf(p.pid(), false) }

// cpuOf reads utime+stime of pid, plus the reaped children's time when withChildren.
func cpuOf(pid int, withChildren bool) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it start at state.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	last := 12 // f[11] utime, f[12] stime; f[13] cutime, f[14] cstime
	if withChildren {
		last = 14
	}
	var ticks int64
	for _, s := range f[11 : last+1] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * clockTick, nil
}

// memory returns the peak (VmHWM) and current (VmRSS) resident set size in bytes.
func (p *proc) memory() (peak, rss uint64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, err)
		}
		if k == "VmHWM" {
			peak = kb << 10
		} else {
			rss = kb << 10
		}
	}
	return peak, rss, sc.Err()
}

// childrenCPU sums the CPU of pid's live children and of pid itself with its reaped
// children: the whole cost of a Postgres cluster, whose backends are the
// postmaster's children.
func childrenCPU(pid int) (time.Duration, error) {
	total, err := cpuOf(pid, true)
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil || parentOf(child) != pid {
			continue
		}
		if c, err := cpuOf(child, false); err == nil {
			total += c
		}
	}
	return total, nil
}

func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return -1
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// The servers under test are started on 127.0.0.1:0 and report the address
// they bound in their log, so no port is picked here and handed over (a port
// freed for another process to take can be taken by anyone meanwhile).
var (
	// plainListening is the line of mockupstream and baselineproxy.
	plainListening = regexp.MustCompile(`listening on (\S+)`)
	// gatewayListening is the gateway's JSON "gateway listening" record.
	gatewayListening = regexp.MustCompile(`"msg":"gateway listening".*?"addr":"([^"]+)"`)
)

// loopbackAny is the listen address that lets the kernel pick the port.
const loopbackAny = "127.0.0.1:0"

// boundAddr waits until p's log has a line matching re, whose first group is
// the address p listens on, or until p exits or timeout passes.
func boundAddr(ctx context.Context, p *proc, re *regexp.Regexp, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(p.logPath); err == nil {
			if m := re.FindSubmatch(b); m != nil {
				return string(m[1]), nil
			}
		}
		select {
		case <-p.done:
			return "", fmt.Errorf("%s exited (%v) before logging its address; see %s", p.name, p.waitErr, p.logPath)
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not log its address within %v; see %s", p.name, timeout, p.logPath)
		case <-tick.C:
		}
	}
}

// waitReady polls url until it answers 200, the process exits, or timeout passes.
func waitReady(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &http.Client{Timeout: time.Second}
	defer c.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before it was ready:\n%s", p.name, p.waitErr, p.logTail(20))
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%s not ready at %s after %v", p.name, url, timeout), last,
				errors.New(p.logTail(20)))
		case <-tick.C:
		}
	}
}

// machineBusy is the CPU time all processors spent outside idle and iowait since
// boot (first line of /proc/stat, steal included: time the hypervisor gave to
// other guests is lost to us too).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 {
			continue // idle, iowait
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}
