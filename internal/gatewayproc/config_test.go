package gatewayproc_test

import (
	"testing"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/gatewayproc"
	"github.com/websitebench/mailplane/internal/itest"
)

// TestConfigRoundTrip: a supervisor's gateway child reads exactly the
// configuration its command line was made from.
func TestConfigRoundTrip(t *testing.T) {
	all := gatewayproc.Config{Listen: "fd:3", Surface: cliapp.Surface{Log: cliapp.Log{Level: "debug", Format: "console"},
		PlaneSocket: "/run/p/plane.sock", GrantFile: "/d/gateway.grant", AllowHosts: []string{"mail.test", "*"}}}
	itest.FlagRoundTrip(t, gatewayproc.Flags(), gatewayproc.FromContext, gatewayproc.Config.Args, gatewayproc.Defaults(), all)
}
