package supervisor

import (
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/consoleproc"
	"github.com/websitebench/mailplane/internal/gatewayproc"
	"github.com/websitebench/mailplane/internal/inboxproc"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/writerproc"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestServicesTable: every row of up's and the sidecar's table of
// services is read back by its binary's own flags as the configuration it
// was built from, holds its own grant (each surface a different one), and
// listens only on sockets it is handed: an fd:N it names is one of its
// sockets, and the writer's port control is the file after its listeners.
func TestServicesTable(t *testing.T) {
	var st *stack // the stack the rows are built for, below
	reads := map[string]func([]string) any{
		"mail-writer": func(a []string) any { return itest.ParseFlags(t, writerproc.Flags(), writerproc.FromContext, a) },
		"mail-inbox":  func(a []string) any { return itest.ParseFlags(t, inboxproc.Flags(), inboxproc.FromContext, a) },
		"mail-gateway": func(a []string) any {
			return itest.ParseFlags(t, gatewayproc.Flags(), gatewayproc.FromContext, a)
		},
		"mail-console": func(a []string) any {
			return itest.ParseFlags(t, consoleproc.Flags(), consoleproc.FromContext, a)
		},
		"mail-plane route": func(a []string) any {
			// mail-plane's logging flags, then the subcommand.
			at := slices.Index(a, "route")
			if at < 0 || !reflect.DeepEqual(a[:at], st.logs.Args()) {
				t.Errorf("mail-plane route's command line %q", a)
				return nil
			}
			return routeCommand{log: st.logs, route: itest.ParseFlags(t, routeFlags(), routeFromContext, a[at+1:])}
		},
	}
	listener := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	data := t.TempDir()
	st = &stack{data: data, socket: data + "/run/plane.sock", logs: cliapp.Log{Level: "debug", Format: "console"}, log: zerolog.Nop()}
	var shared [4]net.Listener
	for i := range shared {
		shared[i] = listener()
	}
	wtls := &writerTLS{lns: []net.Listener{listener(), listener(), listener(), listener()}, cert: data + "/cert.pem", key: data + "/key.pem",
		inboxCert: data + "/inbox-cert.pem", inboxKey: data + "/inbox-key.pem"}
	end, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()
	up := st.sharedServices(shared, listener(), wtls, end, end, func(w *writerproc.Config) { w.SMTPPlainPorts = true })
	lns := sidecarListeners{api: listener(), smtp: listener(), inbox: listener(), writerHTTP: listener(), gatewayHTTP: listener()}
	sidecar := st.sidecarServices(&lns, sidecarEnv{profile: rpc.ProfileSidecar, advertise: "smtp.test"})
	authoring := st.sidecarServices(&lns, sidecarEnv{profile: rpc.ProfileAuthoring, advertise: "smtp.test"})

	for _, table := range []struct {
		name string
		rows []*surface
		want []string
	}{
		{"up", up, []string{"mail-writer", "mail-inbox", "mail-gateway", "mail-console"}},
		{"sidecar", sidecar, []string{"mail-writer", "mail-gateway", "mail-plane route", "mail-inbox"}},
		{"authoring", authoring, []string{"mail-writer", "mail-gateway", "mail-plane route"}},
	} {
		grants := map[string]string{}
		var names []string
		for _, row := range table.rows {
			names = append(names, row.name)
			read := reads[row.name]
			if read == nil {
				t.Fatalf("%s: no flags known for %s", table.name, row.name)
			}
			args := row.cfg.Args()
			if got := read(args); !reflect.DeepEqual(got, row.cfg) {
				t.Errorf("%s: %s's command line %q reads back as\n%+v\nwant\n%+v", table.name, row.name, args, got, row.cfg)
			}
			if r, ok := row.cfg.(routeCommand); ok {
				// It serves the candidate's HTTP: no grant, no plane.
				if flagValue(args, "grant-file") != "" || flagValue(args, "plane-socket") != "" ||
					r.route.Writer != "http://"+lns.writerHTTP.Addr().String() || r.route.Gateway != "http://"+lns.gatewayHTTP.Addr().String() {
					t.Errorf("%s: the API router's command line %q", table.name, args)
				}
				continue
			}
			grant := flagValue(args, "grant-file")
			if other, taken := grants[grant]; grant == "" || taken {
				t.Errorf("%s: %s's grant %q (also %s's)", table.name, row.name, grant, other)
			}
			grants[grant] = row.name
			if flagValue(args, "plane-socket") != st.socket {
				t.Errorf("%s: %s does not reach the stack's plane: %q", table.name, row.name, args)
			}
			for i, a := range args {
				if n, ok := strings.CutPrefix(a, "fd:"); ok && strings.HasSuffix(args[i-1], "listen") {
					if fd, _ := strconv.Atoi(n); fd < 3 || fd >= 3+len(row.lns) {
						t.Errorf("%s: %s %s %s, but is handed %d listeners (fd 3 on)", table.name, row.name, args[i-1], a, len(row.lns))
					}
				}
			}
			if w, ok := row.cfg.(writerproc.Config); ok && w.PortControl != 0 && w.PortControl != 3+len(row.lns) {
				t.Errorf("%s: the writer's --port-control is %d; its control socket is fd %d", table.name, w.PortControl, 3+len(row.lns))
			}
		}
		if !reflect.DeepEqual(names, table.want) {
			t.Errorf("%s runs %v, want %v", table.name, names, table.want)
		}
	}
}

// flagValue is the value of --name in args, or "".
func flagValue(args []string, name string) string {
	for i, a := range args[:len(args)-1] {
		if a == "--"+name {
			return args[i+1]
		}
	}
	return ""
}

// TestRouteConfigRoundTrip: the API router child reads exactly the
// configuration its command line was made from.
func TestRouteConfigRoundTrip(t *testing.T) {
	all := RouteConfig{Listen: "fd:3", Writer: "http://127.0.0.1:1", Gateway: "http://127.0.0.1:2"}
	itest.FlagRoundTrip(t, routeFlags(), routeFromContext, RouteConfig.Args, RouteConfig{}, all)
}

// TestHooksConfigRoundTrip: the webhook deliverer child reads exactly the
// configuration its command line was made from.
func TestHooksConfigRoundTrip(t *testing.T) {
	all := HooksConfig{Listener: cliapp.Listener{Listen: "fd:3", Surface: cliapp.Surface{Log: cliapp.Log{Level: "warn", Format: "console"},
		PlaneSocket: "/run/p/plane.sock", GrantFile: "/d/hooks.grant", AllowHosts: []string{"hooks.test"}}}, DialControl: 4}
	defaults := HooksConfig{Listener: cliapp.DefaultListener("127.0.0.1:0")}
	itest.FlagRoundTrip(t, hooksFlags(), hooksFromContext, HooksConfig.Args, defaults, all)
}
