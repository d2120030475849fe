package planecli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run runs mail-plane with args and returns what it printed.
func run(t *testing.T, args ...string) string {
	t.Helper()
	app := App()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	if err := app.Run(append([]string{"mail-plane"}, args...)); err != nil {
		t.Fatalf("mail-plane %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// Markers of the table in docs/rpc.md.
const (
	docBegin = "<!-- policy:begin (mail-plane policy) -->\n"
	docEnd   = "<!-- policy:end -->"
)

// TestPolicyDoc: docs/rpc.md's table is exactly what `mail-plane policy`
// prints.
func TestPolicyDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "rpc.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), docBegin)
	table, _, ok2 := strings.Cut(rest, docEnd)
	if !ok || !ok2 {
		t.Fatalf("docs/rpc.md has no %q … %q block", docBegin, docEnd)
	}
	if got := run(t, "policy"); got != table {
		t.Fatalf("docs/rpc.md's table differs from `mail-plane policy`; paste its output between the markers:\n%s", got)
	}
}

// TestPolicyJSON: `mail-plane policy --json` prints the table the golden
// file pins (internal/plane/testdata/policy.json), which the isolation
// matrix reads.
func TestPolicyJSON(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("..", "plane", "testdata", "policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, "policy", "--json"); got != string(golden) {
		t.Fatalf("`mail-plane policy --json` differs from the golden file:\n%s", got)
	}
}
