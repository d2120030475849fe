//go:build !profile

package cliapp

import "github.com/urfave/cli/v2"

// withProfile adds nothing to a release build (see profile.go).
func withProfile(*cli.App) (stop func()) { return func() {} }
