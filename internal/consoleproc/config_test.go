package consoleproc_test

import (
	"testing"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/consoleproc"
	"github.com/websitebench/mailplane/internal/itest"
)

// TestConfigRoundTrip: a supervisor's console child reads exactly the
// configuration its command line was made from.
func TestConfigRoundTrip(t *testing.T) {
	all := consoleproc.Config{Listen: "127.0.0.1:0", Surface: cliapp.Surface{Log: cliapp.Log{Level: "warn", Format: "console"},
		PlaneSocket: "/run/p/plane.sock", GrantFile: "/d/console.grant", AllowHosts: []string{"console.test"}}}
	itest.FlagRoundTrip(t, consoleproc.Flags(), consoleproc.FromContext, consoleproc.Config.Args, consoleproc.Defaults(), all)
}
