package main

import (
	"os"
	"syscall"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/planecli"
)

func main() {
	// Everything the plane writes (its database, its write-ahead log, the
	// grant files) is its own alone unless it says otherwise.
	syscall.Umask(0o077)
	os.Exit(cliapp.Run(planecli.App(), os.Args))
}
