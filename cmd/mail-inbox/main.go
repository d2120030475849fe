package main

import (
	"os"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/inbox"
)

func main() { os.Exit(cliapp.Run(inbox.App(), os.Args)) }
