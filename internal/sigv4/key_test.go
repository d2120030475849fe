package sigv4

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnsureKey: the SES key is minted once, 0600, and read back the same;
// a key file others may read, or that holds no key, is refused.
func TestEnsureKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, KeyFile)
	key, err := EnsureKey(path)
	if err != nil || len(key) != KeySize {
		t.Fatalf("mint: %d bytes, %v", len(key), err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s is %v; want 0600", KeyFile, fi.Mode().Perm())
	}
	again, err := EnsureKey(path)
	if err != nil || !bytes.Equal(again, key) {
		t.Fatalf("read back: %v (same: %v)", err, bytes.Equal(again, key))
	}
	other, err := EnsureKey(filepath.Join(t.TempDir(), KeyFile))
	if err != nil || bytes.Equal(other, key) {
		t.Fatalf("a second directory's key: %v (same as the first: %v)", err, bytes.Equal(other, key))
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureKey(path); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Fatalf("a group-readable key: %v", err)
	}
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureKey(bad); err == nil {
		t.Fatal("a file holding 5 bytes was taken as a key")
	}
}

// TestSecretNeedsTheKey: what the ledger keeps of a trial (its token's
// digest, its namespace) makes a different secret under each plane's key,
// so the ledger alone makes none.
func TestSecretNeedsTheKey(t *testing.T) {
	digest, ns := bytes.Repeat([]byte{7}, 32), "trial-0123456789abcdef0123456789abcdef"
	a, b := Secret(bytes.Repeat([]byte{1}, KeySize), digest, ns), Secret(bytes.Repeat([]byte{2}, KeySize), digest, ns)
	if a == b {
		t.Fatalf("two keys make the same secret %q", a)
	}
	if Secret(bytes.Repeat([]byte{1}, KeySize), digest, ns) != a {
		t.Fatal("one key makes two secrets")
	}
}
