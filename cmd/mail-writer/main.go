package main

import (
	"os"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/writer"
)

func main() { os.Exit(cliapp.Run(writer.App(), os.Args)) }
