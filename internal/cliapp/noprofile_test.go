//go:build !profile

package cliapp

import (
	"testing"

	"github.com/urfave/cli/v2"
)

// A release build has no --cpu-profile: it is a usage error, and the
// command does not run.
func TestNoCPUProfileFlag(t *testing.T) {
	ran := false
	app := &cli.App{Name: "x", Commands: []*cli.Command{{Name: "serve", Action: func(*cli.Context) error { ran = true; return nil }}}}
	if code := Run(app, []string{"x", "--cpu-profile", t.TempDir() + "/cpu.pprof", "serve"}); code != ExitUsage || ran {
		t.Fatalf("exit %d, ran %v; want %d and not run", code, ran, ExitUsage)
	}
}
