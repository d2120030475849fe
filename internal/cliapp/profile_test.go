//go:build profile

package cliapp

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// A profile build's --cpu-profile writes the run's CPU profile (gzipped
// protobuf) when the command returns, a bad path is a usage error, and
// without the flag nothing changes.
func TestCPUProfileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	burn := func(*cli.Context) error {
		for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		}
		return nil
	}
	app := &cli.App{Name: "x", Commands: []*cli.Command{{Name: "serve", Action: burn}}}
	if code := Run(app, []string{"x", "--cpu-profile", path, "serve"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) || len(b) < 100 {
		t.Fatalf("not a profile: %d bytes %q…", len(b), b[:min(len(b), 8)])
	}
	app = &cli.App{Name: "x", Commands: []*cli.Command{{Name: "serve", Action: burn}}}
	if code := Run(app, []string{"x", "--cpu-profile", filepath.Join(t.TempDir(), "no", "such", "dir"), "serve"}); code != ExitUsage {
		t.Fatalf("a profile path that cannot be created: exit %d, want %d", code, ExitUsage)
	}
	app = &cli.App{Name: "x", Commands: []*cli.Command{{Name: "serve", Action: burn}}}
	if code := Run(app, []string{"x", "serve"}); code != 0 {
		t.Fatalf("without --cpu-profile: exit %d", code)
	}
}
