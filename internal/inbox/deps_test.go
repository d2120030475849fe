package inbox_test

import (
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
)

// The inbox's handlers know nothing of a command line: flags, their parsing
// and the process's life are internal/inboxproc's.
func TestNoCommandLine(t *testing.T) {
	itest.ForbidDeps(t, "internal/inbox", []string{"github.com/urfave/cli", itest.Module + "internal/cliapp"}, nil)
}
