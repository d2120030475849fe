package evidence

import (
	"bytes"
	"os"
	"testing"

	"github.com/websitebench/mailplane/internal/redact"
)

// TestExampleTrail: docs/evidence.md's example, exported from a run of
// TestEvidenceScriptedTrial (internal/supervisor), verifies with the key
// of the plane that signed it (example-trail.pub), and passes the
// redaction point unchanged.
func TestExampleTrail(t *testing.T) {
	b, err := os.ReadFile("testdata/example-trail.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile("testdata/example-trail.pub")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParsePublicKey(string(pub))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := Check(bytes.NewReader(b), key); err != nil || res.Events != 18 || !res.Head.Closed {
		t.Fatalf("Check = %+v, %v", res, err)
	}
	if redact.Text(string(b)) != string(b) {
		t.Fatal("redaction changes the example")
	}
}
