package serve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The evidence key is minted 0600 at first start, read back the same at
// the next, and refused when others may read it (whoever reads it can
// sign a rewritten trail) or when it is not a key.
func TestEvidenceKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evidence.key")
	key, err := ensureEvidenceKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("minted key file: %v, %v; want mode 0600", fi, err)
	}
	again, err := ensureEvidenceKey(path)
	if err != nil || !again.Equal(key) {
		t.Fatalf("second start: %v; the key changed: %v", err, !again.Equal(key))
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureEvidenceKey(path); err == nil || !strings.Contains(err.Error(), "lets others read") {
		t.Fatalf("a key others may read: %v, want refused", err)
	}
	if err := os.WriteFile(path, []byte("not base64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureEvidenceKey(path); err == nil || !strings.Contains(err.Error(), "not an evidence key") {
		t.Fatalf("a file that is not a key: %v, want refused", err)
	}
}
