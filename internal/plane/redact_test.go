package plane

import (
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/redact"
)

// FuzzMayHoldSecret: whatever mayHoldSecret passes, redaction leaves as it
// is, so skipping it never lets a secret into a trail.
func FuzzMayHoldSecret(f *testing.F) {
	for _, s := range []string{"agent@example.com", strings.Repeat("a", 64) + "@example.com", "mpg_" + strings.Repeat("0", 64),
		"token=abc@example.com", "bearer x", strings.Repeat("A", 43), "password:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !mayHoldSecret(s) && redact.Text(s) != s {
			t.Fatalf("%q: redaction changes it, but it was judged safe", s)
		}
	})
}
