package main

import (
	"os"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/writerproc"
)

func main() { os.Exit(cliapp.Run(writerproc.App(), os.Args)) }
