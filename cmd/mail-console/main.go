package main

import (
	"os"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/consoleproc"
)

func main() { os.Exit(cliapp.Run(consoleproc.App(), os.Args)) }
