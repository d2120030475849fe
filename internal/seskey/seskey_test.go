package seskey

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnsure: the SES key is minted once, 0600, and read back the same;
// a key file others may read, or that holds no key, is refused.
func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, File)
	key, err := Ensure(path)
	if err != nil || len(key) != Size {
		t.Fatalf("mint: %d bytes, %v", len(key), err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s is %v; want 0600", File, fi.Mode().Perm())
	}
	again, err := Ensure(path)
	if err != nil || !bytes.Equal(again, key) {
		t.Fatalf("read back: %v (same: %v)", err, bytes.Equal(again, key))
	}
	other, err := Ensure(filepath.Join(t.TempDir(), File))
	if err != nil || bytes.Equal(other, key) {
		t.Fatalf("a second directory's key: %v (same as the first: %v)", err, bytes.Equal(other, key))
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(path); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Fatalf("a group-readable key: %v", err)
	}
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(bad); err == nil {
		t.Fatal("a file holding 5 bytes was taken as a key")
	}
}
