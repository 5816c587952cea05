//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package report

// lockDir is a no-op where flock is unavailable: run one process per spool
// directory there.
func lockDir(string) (unlock func() error, err error) {
	return func() error { return nil }, nil
}
