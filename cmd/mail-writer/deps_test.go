package main

import (
	"os/exec"
	"strings"
	"testing"
)

// forbidden are packages mail-writer must never link: the writer reads no
// mail and touches no storage, so nothing that opens a store may be in the
// binary (STYLE.md 7).
var forbidden = []string{
	"github.com/websitebench/mailplane/internal/ledger",
	"github.com/websitebench/mailplane/internal/msgstore",
	"github.com/websitebench/mailplane/internal/plane",
	"github.com/websitebench/mailplane/internal/planecli",
	"modernc.org/sqlite",
	"database/sql",
}

func TestDependencyFence(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps returned too little to be a dependency list: %q", deps)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("mail-writer links %s", d)
			}
		}
	}
}
