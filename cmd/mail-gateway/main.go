package main

import (
	"os"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/gatewayproc"
)

func main() { os.Exit(cliapp.Run(gatewayproc.App(), os.Args)) }
