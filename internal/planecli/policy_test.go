package planecli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update rewrites docs/rpc.md's table and the golden file from the live
// table (make policy), for a commit that changes a row on purpose.
var update = flag.Bool("update", false, "rewrite docs/rpc.md's policy table and internal/plane/testdata/policy.json")

// Where the table is shown and pinned.
var (
	docFile    = filepath.Join("..", "..", "docs", "rpc.md")
	goldenFile = filepath.Join("..", "plane", "testdata", "policy.json")
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
	doc, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(doc), docBegin)
	table, after, ok2 := strings.Cut(rest, docEnd)
	if !ok || !ok2 {
		t.Fatalf("docs/rpc.md has no %q … %q block", docBegin, docEnd)
	}
	got := run(t, "policy")
	if *update {
		if err := os.WriteFile(docFile, []byte(before+docBegin+got+docEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != table {
		t.Fatalf("docs/rpc.md's table differs from `mail-plane policy` (make policy rewrites it):\n%s", got)
	}
}

// TestPolicyJSON: `mail-plane policy --json` prints the table the golden
// file pins (internal/plane/testdata/policy.json), which the isolation
// matrix reads.
func TestPolicyJSON(t *testing.T) {
	got := run(t, "policy", "--json")
	if *update {
		if err := os.WriteFile(goldenFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	golden, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(golden) {
		t.Fatalf("`mail-plane policy --json` differs from the golden file (make policy rewrites it):\n%s", got)
	}
}
