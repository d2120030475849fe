package inboxproc_test

import (
	"testing"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/inboxproc"
	"github.com/websitebench/mailplane/internal/itest"
)

// TestConfigRoundTrip: a supervisor's inbox child reads exactly the
// configuration its command line was made from.
func TestConfigRoundTrip(t *testing.T) {
	all := inboxproc.Config{Listen: "fd:3", TokenFile: "/d/trial/inbox.token", RootRedirect: true,
		IMAPListen: "fd:4", IMAPSListen: "fd:5", TLSCert: "/d/inbox-tls/cert.pem", TLSKey: "/d/inbox-tls/key.pem", PortControl: 6,
		Surface: cliapp.Surface{Log: cliapp.Log{Level: "error", Format: "console"}, PlaneSocket: "/run/p/plane.sock",
			GrantFile: "/d/trial/inbox.grant", AllowHosts: []string{"*"}}}
	itest.FlagRoundTrip(t, inboxproc.Flags(), inboxproc.FromContext, inboxproc.Config.Args, inboxproc.Defaults(), all)
}
