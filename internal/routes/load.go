package routes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// MaxFileBytes caps the routes file. A real one is a few KiB; the cap
// keeps a mistake (GATEWAY_CONFIG=/dev/zero, a log file, a symlink swapped
// to something huge under a running gateway) from growing the process
// without bound when it is read at start or on a reload.
const MaxFileBytes = 16 << 20

// ErrFileTooLarge is returned, wrapped, for a routes file over
// MaxFileBytes.
var ErrFileTooLarge = errors.New("larger than the 16 MiB a routes file may have")

// ReadFile reads the routes file at path, at most MaxFileBytes
// of it. It reads through a limit rather than trusting the file's size, so
// a file that grows while it is read, or a device such as /dev/zero that
// has no size, ends the read too. Errors are prefixed "routes file".
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("routes file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("routes file: %w", err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("routes file %s: %w", path, ErrFileTooLarge)
	}
	return b, nil
}

// Load reads and validates the routes file at path.
func Load(path string) (*Routes, error) {
	b, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := Parse(b, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("routes file %s: %w", path, err)
	}
	return r, nil
}

// Parse decodes and validates a routes file. lookup resolves ${VAR}
// references; it is a parameter so tests need not touch the process env.
// Every error it returns matches ErrInvalid and, except for a YAML
// syntax error without a line, is a *FieldError naming the YAML path.
func Parse(b []byte, lookup func(string) (string, bool)) (*Routes, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, syntaxError(b, err)
	}
	var r Routes
	check := shapeChecker{lines: lineIndex{}}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root := doc.Content[0]
		if err := check.check(root, reflect.TypeFor[Routes](), ""); err != nil {
			return nil, err
		}
		if err := root.Decode(&r); err != nil {
			var te *yaml.TypeError
			if errors.As(err, &te) {
				// Not expected after a clean walk, and yaml's text can
				// echo a value (a key), so it is not passed on.
				return nil, &FieldError{Msg: "the file does not fit the routes format"}
			}
			return nil, syntaxError(nil, err) // alias loops and excessive aliasing
		}
	}
	v := validator{lines: check.lines, exp: r.expand(lookup)}
	v.collectKeys(&r)
	if err := v.validate(&r); err != nil {
		return nil, err
	}
	return &r, nil
}
