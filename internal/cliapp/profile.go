//go:build profile

package cliapp

import (
	"os"
	"runtime/pprof"
	"slices"

	"github.com/urfave/cli/v2"
)

// withProfile adds the hidden --cpu-profile FILE flag (before any
// command: mail-plane --cpu-profile FILE serve …) to a binary built with
// the profile tag, as make profile builds them: the whole run's CPU
// profile is written to FILE when the command returns (SIGTERM included).
// A release build (make build) has neither the flag nor runtime/pprof.
func withProfile(app *cli.App) (stop func()) {
	app.Flags = append(slices.Clip(app.Flags), &cli.StringFlag{Name: "cpu-profile", Hidden: true, Usage: "write a CPU profile of this run to `FILE`"})
	var stopProfile func() // set once the profile runs
	before := app.Before
	app.Before = func(c *cli.Context) error {
		if path := c.String("cpu-profile"); path != "" {
			f, err := os.Create(path)
			if err != nil {
				return Usagef("--cpu-profile: %v", err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return Usagef("--cpu-profile: %v", err)
			}
			stopProfile = func() {
				pprof.StopCPUProfile()
				f.Close()
			}
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
	return func() {
		if stopProfile != nil {
			stopProfile()
		}
	}
}
