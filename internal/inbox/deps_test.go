package inbox_test

import (
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
)

// The inbox's handlers know nothing of a command line: flags, their parsing
// are internal/inboxproc's, the process's life cmd/mail-inbox's.
func TestNoCommandLine(t *testing.T) {
	itest.ForbidDeps(t, "internal/inbox", []string{"github.com/urfave/cli", itest.Module + "internal/cliapp"}, nil)
}
