package main

import (
	"os"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/planecli"
)

func main() { os.Exit(cliapp.Run(planecli.App(), os.Args)) }
