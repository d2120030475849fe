package evidence

import (
	"os"
	"testing"

	"github.com/websitebench/mailplane/internal/redact"
)

// TestExampleTrail: the README's example, exported from a run of
// TestEvidenceScriptedTrial (internal/supervisor), verifies, and passes the
// redaction point unchanged.
func TestExampleTrail(t *testing.T) {
	b, err := os.ReadFile("testdata/example-trail.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open("testdata/example-trail.jsonl")
	defer f.Close()
	if n, err := Verify(f); err != nil || n != 19 {
		t.Fatalf("Verify = %d, %v", n, err)
	}
	if redact.Text(string(b)) != string(b) {
		t.Fatal("redaction changes the example")
	}
}
