package candidates

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestReadRoutesFileCap: the routes file is read up to MaxRoutesFileBytes;
// one byte more, or a device without end such as /dev/zero, is
// ErrRoutesFileTooLarge after reading no more than the cap and a byte.
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
		{"at the cap", write("cap.yaml", MaxRoutesFileBytes), MaxRoutesFileBytes, nil},
		{"one byte over", write("over.yaml", MaxRoutesFileBytes+1), 0, ErrRoutesFileTooLarge},
		{"/dev/zero", "/dev/zero", 0, ErrRoutesFileTooLarge},
		{"missing", filepath.Join(dir, "missing.yaml"), 0, fs.ErrNotExist},
	} {
		b, err := ReadRoutesFile(tt.path)
		if !errors.Is(err, tt.wantErr) || len(b) != tt.wantLen {
			t.Errorf("%s: %d bytes, err %v; want %d bytes, err %v", tt.name, len(b), err, tt.wantLen, tt.wantErr)
		}
	}
	if _, err := LoadRoutes("/dev/zero"); !errors.Is(err, ErrRoutesFileTooLarge) {
		t.Errorf("LoadRoutes(/dev/zero) = %v", err)
	}
}
