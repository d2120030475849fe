package main

import (
	"os"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/gateway"
)

func main() { os.Exit(cliapp.Run(gateway.App(), os.Args)) }
