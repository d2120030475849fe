package console_test

import (
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
)

// The console's handlers know nothing of a command line: flags, their parsing
// are internal/consoleproc's, the process's life cmd/mail-console's.
func TestNoCommandLine(t *testing.T) {
	itest.ForbidDeps(t, "internal/console", []string{"github.com/urfave/cli", itest.Module + "internal/cliapp"}, nil)
}
