package routes

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestReadRoutesFileCap: the routes file is read up to MaxFileBytes;
// one byte more, or a device without end such as /dev/zero, is
// ErrFileTooLarge after reading no more than the cap and a byte.
func TestReadRoutesFileCap(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte("#"), n), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name    string
		path    string
		wantLen int
		wantErr error
	}{
		{"at the cap", write("cap.yaml", MaxFileBytes), MaxFileBytes, nil},
		{"one byte over", write("over.yaml", MaxFileBytes+1), 0, ErrFileTooLarge},
		{"/dev/zero", "/dev/zero", 0, ErrFileTooLarge},
		{"missing", filepath.Join(dir, "missing.yaml"), 0, fs.ErrNotExist},
	} {
		b, err := ReadFile(tt.path)
		if !errors.Is(err, tt.wantErr) || len(b) != tt.wantLen {
			t.Errorf("%s: %d bytes, err %v; want %d bytes, err %v", tt.name, len(b), err, tt.wantLen, tt.wantErr)
		}
	}
	if _, err := Load("/dev/zero"); !errors.Is(err, ErrFileTooLarge) {
		t.Errorf("Load(/dev/zero) = %v", err)
	}
}
