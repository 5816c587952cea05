//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive advisory lock on dir/LOCK so that two processes
// never append to and replay the same spool, which would interleave frames and
// replay records twice concurrently. The kernel drops the lock if the process
// dies, so a crash never leaves the directory locked.
func lockDir(dir string) (unlock func() error, err error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("spool directory in use by another process")
		}
		return nil, err
	}
	return f.Close, nil
}
