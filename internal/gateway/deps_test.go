package gateway_test

import (
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
)

// The gateway's handlers know nothing of a command line: flags, their parsing
// and the process's life are internal/gatewayproc's.
func TestNoCommandLine(t *testing.T) {
	itest.ForbidDeps(t, "internal/gateway", []string{"github.com/urfave/cli", itest.Module + "internal/cliapp"}, nil)
}
