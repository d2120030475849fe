package writerproc_test

import (
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/writerproc"
)

// TestConfigRoundTrip: a supervisor's writer child reads exactly the
// configuration its command line was made from, zero limits included
// (mail-plane up's shared writer runs with --max-connections 0).
func TestConfigRoundTrip(t *testing.T) {
	all := writerproc.Config{Surface: cliapp.Surface{Log: cliapp.Log{Level: "debug", Format: "console"}, PlaneSocket: "/run/p/plane.sock",
		GrantFile: "/d/writer.grant", AllowHosts: []string{"writer.test"}},
		HTTPListen: "fd:3", SMTPListen: "fd:4", SMTPMode: "select", SMTPAdvertiseHost: "smtp.test", PortControl: 7, SMTPPlainPorts: true,
		MaxMessageBytes: 1 << 20, MaxRecipients: 3, SMTPMaxCommands: 9, MaxConnections: 0, AuthFailureDelay: 0,
		IdleTimeout: 3 * time.Second, ConnectionLifetime: time.Minute, TLSCert: "/d/cert.pem", TLSKey: "/d/key.pem",
		SMTPTLSListen: "fd:5", HTTPSListen: "fd:6", SMTPPlainAuthNets: "none"}
	itest.FlagRoundTrip(t, writerproc.Flags(), writerproc.FromContext, writerproc.Config.Args, writerproc.Defaults(), all)
}
