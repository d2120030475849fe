package sigv4

import (
	"bytes"
	"testing"
)

// TestSecretNeedsTheKey: what the ledger keeps of a trial (its token's
// digest, its namespace) makes a different secret under each plane's key,
// so the ledger alone makes none.
func TestSecretNeedsTheKey(t *testing.T) {
	digest, ns := bytes.Repeat([]byte{7}, 32), "trial-0123456789abcdef0123456789abcdef"
	a, b := Secret(bytes.Repeat([]byte{1}, 32), digest, ns), Secret(bytes.Repeat([]byte{2}, 32), digest, ns)
	if a == b {
		t.Fatalf("two keys make the same secret %q", a)
	}
	if Secret(bytes.Repeat([]byte{1}, 32), digest, ns) != a {
		t.Fatal("one key makes two secrets")
	}
}
