package main

import (
	"os"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/console"
)

func main() { os.Exit(cliapp.Run(console.App(), os.Args)) }
