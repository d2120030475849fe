package mailclient

import (
	"os/exec"
	"strings"
	"testing"
)

// Evaluators copy this package into their harnesses: it must keep needing
// nothing but the standard library.
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/websitebench/mailplane/pkg/mailclient" {
			t.Errorf("mailclient depends on %s; it may use the standard library only", p)
		}
	}
}
