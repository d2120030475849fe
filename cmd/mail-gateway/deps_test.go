package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The gateway reads mail only through the plane: it must not link the
// store, the ledger or the broker, nor the other surfaces.
func TestDependencyFence(t *testing.T) {
	const mp = "github.com/websitebench/mailplane/"
	forbidden := []string{
		mp + "internal/ledger", mp + "internal/msgstore", mp + "internal/plane", mp + "internal/planecli",
		mp + "internal/peercred", mp + "internal/inbox", mp + "internal/writer", mp + "internal/smtpd",
		"modernc.org/", "database/sql",
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("mail-gateway links %s", d)
			}
		}
	}
}
