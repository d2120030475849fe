package main

import (
	"os"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/inboxproc"
)

func main() { os.Exit(cliapp.Run(inboxproc.App(), os.Args)) }
