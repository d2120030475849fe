//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// zone is one surface's container: its compose service, numeric user, the
// network it sits on, its ports, and where its secrets are.
type zone struct {
	service, network string
	uid              int
	ports            []int
	grantFile        string
}

var zones = []zone{
	{service: "writer", network: "candidate", uid: 10002, ports: []int{8025, 1025}, grantFile: "/run/secrets/mailplane/writer.grant"},
	{service: "inbox", network: "agent", uid: 10003, ports: []int{8026}, grantFile: "/run/secrets/mailplane/inbox.grant"},
	{service: "gateway", network: "evaluator", uid: 10004, ports: []int{8027}, grantFile: "/run/secrets/mailplane/gateway.grant"},
	{service: "console", network: "operator", uid: 10006, ports: []int{8028}, grantFile: "/run/secrets/mailplane/console.grant"},
}

// The zones whose grants the operator mints into their volumes, and which
// a compromised surface of that zone could carry off.
var sharedZones = []string{"gateway", "console"}

const (
	planeUID    = 10001
	socketGroup = 10000
	socket      = "/run/mailplane/plane.sock"
)

// TestCompose runs build/docker-compose.yml with the images `make images`
// built and proves each zone's boundary from inside the deployment: every
// cell of the reachability matrix and every cross-zone grant is tried by a
// probe container, and the whole flow runs across containers.
func TestCompose(t *testing.T) {
	s := newStack(t, "docker-compose.yml")
	s.requireImages("mail-plane", "mail-writer", "mail-inbox", "mail-gateway", "mail-console", "e2e-probe")

	s.compose("up", "-d", "plane")
	s.waitHealthy("plane")
	plane := s.container("plane")

	t.Run("plane has no network", func(t *testing.T) {
		var insp []struct {
			HostConfig      struct{ NetworkMode string }
			NetworkSettings struct {
				Networks map[string]struct{ IPAddress string }
			}
		}
		s.inspect(plane, &insp)
		if got := insp[0].HostConfig.NetworkMode; got != "none" {
			t.Errorf("plane NetworkMode = %q, want none", got)
		}
		for name, n := range insp[0].NetworkSettings.Networks {
			if name != "none" || n.IPAddress != "" {
				t.Errorf("plane is on network %q with address %q", name, n.IPAddress)
			}
		}
		// A probe in the plane's own network namespace sees only loopback
		// and no listening socket: there is nothing to reach, from anywhere.
		var ns struct {
			Interfaces []string
			Listening  []string
		}
		s.probe(t, []string{"--network", "container:" + plane}, nil, &ns, "netns")
		if !slices.Equal(ns.Interfaces, []string{"lo"}) || len(ns.Listening) != 0 {
			t.Errorf("plane's network namespace: interfaces %v, listening %v; want only lo, nothing listening", ns.Interfaces, ns.Listening)
		}
	})

	// The operator's one-shot steps, each a container of the plane's image
	// as the plane's user, with no network: a gateway grant and a console
	// grant into those surfaces' volumes, and a trial whose writer and inbox
	// parts go into those surfaces' volumes. The whole identity comes back
	// on stdout, as it would to an operator.
	for _, role := range sharedZones {
		s.compose("run", "--rm", "-T", "admin", "grant", "create", "--role", role,
			"--out", "/secrets/"+role+"/"+role+".grant", "--group-readable")
	}
	var id rpc.Identity
	out := s.compose("run", "--rm", "-T", "admin", "trial", "create", "--json", "--group-readable",
		"--party-dir", "writer=/secrets/writer", "--party-dir", "inbox=/secrets/inbox")
	if err := json.Unmarshal([]byte(out), &id); err != nil || id.Namespace == "" || id.WriterGrant == "" {
		t.Fatalf("trial create --json: %v (%d bytes)", err, len(out))
	}

	s.compose("up", "-d", "writer", "inbox", "gateway", "console")
	addr := map[string]string{} // service → IP on its network
	for _, z := range zones {
		addr[z.service] = s.ip(s.container(z.service), z.network)
		url := fmt.Sprintf("http://%s:%d/healthz", z.service, z.ports[0])
		var ok map[string]int
		if !s.probe(t, []string{"--network", s.network(z.network)}, nil, &ok, "wait-http", url) {
			t.Fatalf("%s never became healthy", z.service)
		}
	}

	t.Run("hardening", func(t *testing.T) {
		for _, svc := range []string{"plane", "writer", "inbox", "gateway", "console"} {
			var insp []struct {
				Config     struct{ User string }
				HostConfig struct {
					ReadonlyRootfs bool
					Privileged     bool
					CapAdd, CapDrop,
					SecurityOpt, GroupAdd []string
				}
			}
			c := s.container(svc)
			s.inspect(c, &insp)
			h := insp[0].HostConfig
			if !h.ReadonlyRootfs || h.Privileged || len(h.CapAdd) != 0 || !slices.Equal(h.CapDrop, []string{"ALL"}) ||
				!slices.Contains(h.SecurityOpt, "no-new-privileges:true") {
				t.Errorf("%s: read-only %v, privileged %v, cap-add %v, cap-drop %v, security-opt %v", svc,
					h.ReadonlyRootfs, h.Privileged, h.CapAdd, h.CapDrop, h.SecurityOpt)
			}
			want := fmt.Sprintf("%d:%d", planeUID, planeUID)
			if z := zoneOf(svc); z != nil {
				want = fmt.Sprintf("%d:%d", z.uid, z.uid)
				if !slices.Equal(h.GroupAdd, []string{fmt.Sprint(socketGroup)}) {
					t.Errorf("%s: group_add %v, want only the socket group %d", svc, h.GroupAdd, socketGroup)
				}
			}
			if insp[0].Config.User != want {
				t.Errorf("%s runs as %q, want %q", svc, insp[0].Config.User, want)
			}
			// No shell to land in: the image is the binary and its directories.
			if out, err := s.try("docker", "exec", c, "/bin/sh", "-c", "true"); err == nil {
				t.Errorf("%s has a shell: %s", svc, out)
			}
		}
	})

	t.Run("secrets are readable by their zone only", func(t *testing.T) {
		for i, z := range zones {
			own := []string{z.grantFile}
			if z.service == "inbox" {
				own = append(own, "/run/secrets/mailplane/inbox.token")
			}
			var st map[string]struct {
				UID, GID int
				Mode     string
				Readable bool
			}
			s.probe(t, s.asZone(z, z.uid), nil, &st, append([]string{"stat"}, own...)...)
			for _, f := range own {
				if r := st[f]; !r.Readable || r.GID != z.uid || r.Mode != "0640" {
					t.Errorf("%s in its own zone: %+v; want readable, group %d, mode 0640", f, r, z.uid)
				}
			}
			// Another zone's user, even with this zone's volumes mounted.
			other := zones[(i+1)%len(zones)]
			s.probe(t, s.asZone(z, other.uid), nil, &st, append([]string{"stat"}, own...)...)
			for _, f := range own {
				if st[f].Readable {
					t.Errorf("%s is readable by uid %d (the %s zone)", f, other.uid, other.service)
				}
			}
		}
	})

	t.Run("reachability", func(t *testing.T) {
		// Every surface port by address, from every zone's network: only the
		// zone's own surface answers. The name of the zone's own surface
		// resolves and answers too (the others' names would not resolve,
		// which proves nothing about reachability; their addresses do).
		for _, from := range zones {
			var targets []string
			want := map[string]string{}
			for _, to := range zones {
				for _, p := range to.ports {
					a := fmt.Sprintf("%s:%d", addr[to.service], p)
					targets = append(targets, a)
					want[a] = "open"
					if to.service != from.service {
						want[a] = "closed"
					}
				}
			}
			own := fmt.Sprintf("%s:%d", from.service, from.ports[0])
			targets = append(targets, own)
			want[own] = "open"
			var got map[string]string
			s.probe(t, []string{"--network", s.network(from.network)}, nil, &got, append([]string{"dial"}, targets...)...)
			for _, a := range targets {
				if open := got[a] == "open"; open != (want[a] == "open") {
					t.Errorf("from the %s network, %s: %s, want %s", from.network, a, got[a], want[a])
				}
			}
			t.Logf("from the %s network: %v", from.network, got)
		}
	})

	const apiCode, smtpCode = "493817", "260451"
	t.Run("flow across containers", func(t *testing.T) {
		// The candidate website: the §9.1 environment, with the writer's
		// name on the candidate network instead of 127.0.0.1.
		env := map[string]string{
			"WEBSITEBENCH_MAIL_API_URL":            "http://writer:8025/emails",
			"WEBSITEBENCH_MAIL_API_TOKEN":          id.MailAPIToken,
			"WEBSITEBENCH_MAIL_FROM":               rpc.CandidateSender,
			"WEBSITEBENCH_SMTP_HOST":               "writer",
			"WEBSITEBENCH_SMTP_PORT":               "1025",
			"WEBSITEBENCH_SMTP_FROM":               rpc.CandidateSender,
			"WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL":   "http://writer:8025/internal/bootstrap",
			"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN": id.BootstrapToken,
		}
		in, _ := json.Marshal(map[string]any{"env": env, "to": "alice@example.com", "api_code": apiCode,
			"smtp_to": "bob@example.com", "smtp_code": smtpCode})
		var sent struct {
			Bootstrap struct {
				Namespace     string `json:"namespace"`
				SMTPHost      string `json:"smtp_host"`
				SMTPPort      int    `json:"smtp_port"`
				HasCapability bool   `json:"has_capability"`
			}
			ResendID string `json:"resend_id"`
			SMTP     string `json:"smtp"`
		}
		if !s.probe(t, []string{"--network", s.network("candidate")}, in, &sent, "candidate") {
			t.FailNow()
		}
		b := sent.Bootstrap
		if b.Namespace != id.Namespace || b.SMTPHost != "writer" || b.SMTPPort != 1025 || !b.HasCapability {
			t.Errorf("bootstrap = %+v; want namespace %s, smtp writer:1025, a capability", b, id.Namespace)
		}
		if sent.ResendID == "" || sent.SMTP != "sent" {
			t.Errorf("candidate: resend id %q, smtp %q", sent.ResendID, sent.SMTP)
		}

		// The agent's browser: no credential but the token URL it is handed
		// (GET / reveals nothing), which lists both messages and links them.
		type page struct {
			Status      int    `json:"status"`
			ContentType string `json:"content_type"`
			Path        string `json:"path"`
			HTML        string `json:"html"`
		}
		var seen struct {
			Inbox    page
			Messages []page
		}
		if !s.probe(t, []string{"--network", s.network("agent")}, nil, &seen, "agent", "http://inbox:8026/inbox/"+id.InboxToken, "2") {
			t.FailNow()
		}
		if seen.Inbox.Status != http.StatusOK || !strings.HasPrefix(seen.Inbox.ContentType, "text/html") ||
			!strings.Contains(seen.Inbox.HTML, "Confirm your account") || !strings.Contains(seen.Inbox.HTML, "Your sign-in code") {
			t.Errorf("inbox page: status %d, %s, path %s:\n%s", seen.Inbox.Status, seen.Inbox.ContentType, seen.Inbox.Path, seen.Inbox.HTML)
		}
		var bodies string
		for _, m := range seen.Messages {
			if m.Status != http.StatusOK || !strings.HasPrefix(m.ContentType, "text/html") {
				t.Errorf("message page %s: status %d, %s", m.Path, m.Status, m.ContentType)
			}
			bodies += m.HTML
		}
		if len(seen.Messages) != 2 || !strings.Contains(bodies, apiCode) || !strings.Contains(bodies, smtpCode) {
			t.Errorf("agent read %d message pages; want 2 holding %s and %s", len(seen.Messages), apiCode, smtpCode)
		}
		if strings.Contains(bodies+seen.Inbox.HTML, id.ReadCapability) || strings.Contains(bodies+seen.Inbox.HTML, `"otp"`) {
			t.Errorf("the inbox showed the read capability or JSON OTP fields")
		}

		// The evaluator: the gateway's JSON API with the read capability.
		in, _ = json.Marshal(map[string]any{"url": "http://gateway:8027", "namespace": id.Namespace,
			"capability": id.ReadCapability, "want": 2})
		type answer struct {
			Status int             `json:"status"`
			Body   json.RawMessage `json:"body"`
		}
		var read struct{ List, Latest, Wrong answer }
		if !s.probe(t, []string{"--network", s.network("evaluator")}, in, &read, "evaluator") {
			t.FailNow()
		}
		type message struct {
			ID         int64    `json:"id"`
			OTP        *string  `json:"otp"`
			Subject    string   `json:"subject"`
			Recipients []string `json:"recipients"`
		}
		var list struct{ Messages []message }
		if read.List.Status != http.StatusOK || json.Unmarshal(read.List.Body, &list) != nil || len(list.Messages) != 2 {
			t.Fatalf("gateway list: %d %s", read.List.Status, read.List.Body)
		}
		for i, want := range []string{apiCode, smtpCode} {
			if m := list.Messages[i]; m.OTP == nil || *m.OTP != want {
				t.Errorf("gateway message %d (%q): otp %v, want %s", m.ID, m.Subject, m.OTP, want)
			}
		}
		var latest message
		if read.Latest.Status != http.StatusOK || json.Unmarshal(read.Latest.Body, &latest) != nil ||
			latest.OTP == nil || *latest.OTP != smtpCode {
			t.Errorf("gateway latest: %d %s; want the SMTP message with otp %s", read.Latest.Status, read.Latest.Body, smtpCode)
		}
		if read.Wrong.Status != http.StatusForbidden {
			t.Errorf("gateway with a wrong capability: %d %s, want 403", read.Wrong.Status, read.Wrong.Body)
		}
	})

	t.Run("the operator's console", func(t *testing.T) {
		// The admin grant is in the plane's data volume, readable by the
		// plane's user alone; the operator copies it out as README says.
		file := filepath.Join(t.TempDir(), "admin.grant")
		if out, err := s.try("docker", "cp", plane+":/var/lib/mailplane/admin.grant", file); err != nil {
			t.Fatalf("docker cp the admin grant: %v %s", err, out)
		}
		grant, err := rpc.ReadSecretFile(file)
		if err != nil {
			t.Fatal(err)
		}
		in, _ := json.Marshal(map[string]string{"url": "http://console:8028", "grant": grant, "namespace": id.Namespace})
		type page struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		}
		var seen struct{ Anonymous, Trials, Trial, Metrics page }
		if !s.probe(t, []string{"--network", s.network("operator")}, in, &seen, "operator") {
			t.FailNow()
		}
		if seen.Anonymous.Status != http.StatusUnauthorized || strings.Contains(seen.Anonymous.Body, id.Namespace) {
			t.Errorf("console without the admin grant: %d, namespace shown %v; want 401 and nothing",
				seen.Anonymous.Status, strings.Contains(seen.Anonymous.Body, id.Namespace))
		}
		if seen.Trials.Status != http.StatusOK || !strings.Contains(seen.Trials.Body, id.Namespace) {
			t.Errorf("console's trials page with the admin grant: %d, want 200 listing %s:\n%s", seen.Trials.Status, id.Namespace, seen.Trials.Body)
		}
		if seen.Trial.Status != http.StatusOK || !strings.Contains(seen.Trial.Body, "Confirm your account") || !strings.Contains(seen.Trial.Body, apiCode) {
			t.Errorf("console's trial page: %d, want 200 with the candidate's mail and its code %s:\n%s", seen.Trial.Status, apiCode, seen.Trial.Body)
		}
		if seen.Metrics.Status != http.StatusOK || !strings.Contains(seen.Metrics.Body, `mailplane_sends_total{`) {
			t.Errorf("console's /metrics: %d, want 200 with mailplane_sends_total:\n%s", seen.Metrics.Status, seen.Metrics.Body)
		}
		for name, p := range map[string]page{"trials": seen.Trials, "trial": seen.Trial, "metrics": seen.Metrics} {
			if strings.Contains(p.Body, grant) || strings.Contains(p.Body, id.ReadCapability) {
				t.Errorf("console's %s page shows a grant or the read capability", name)
			}
		}
	})

	t.Run("grants stay in their zone", func(t *testing.T) {
		// The gateway's and the console's grants were written straight into
		// their volumes; carry them off the way a compromised surface would.
		grants := map[string]string{"writer": id.WriterGrant, "inbox": id.InboxGrant}
		for _, svc := range sharedZones {
			z := zoneOf(svc)
			var stolen struct{ Content string }
			s.probe(t, s.asZone(*z, z.uid), nil, &stolen, "cat", z.grantFile)
			grants[svc] = stolen.Content
		}
		in, _ := json.Marshal(grants)

		// Each zone's container (its network namespace, volumes and user)
		// presents every surface's grant: only its own is accepted; the
		// others are refused by the plane's uid/gid check (SO_PEERCRED),
		// although each grant is valid where it belongs.
		for _, z := range zones {
			var got map[string]struct{ Code, Message string }
			s.probe(t, s.asZone(z, z.uid), in, &got, "rpc", socket, rpc.MethodHealth)
			for role, r := range got {
				if role == z.service {
					if r.Code != "" {
						t.Errorf("%s zone with its own grant: %s %s", z.service, r.Code, r.Message)
					}
				} else if r.Code != rpc.CodeUnauthenticated || !strings.Contains(r.Message, "may not use") {
					t.Errorf("%s zone with the %s grant: %q %q; want refused by the peer check", z.service, role, r.Code, r.Message)
				}
			}
		}

		// Without the socket group, the writer's own user with its own grant
		// cannot even open the plane's socket.
		var bare map[string]struct{ Code, Message string }
		opts := s.asZone(zones[0], zones[0].uid)
		opts = opts[:len(opts)-2] // drop --group-add
		own, _ := json.Marshal(map[string]string{"writer": id.WriterGrant})
		s.probe(t, opts, own, &bare, "rpc", socket, rpc.MethodHealth)
		if r := bare["writer"]; r.Code != rpc.CodePlaneUnavailable || !strings.Contains(r.Message, "permission denied") {
			t.Errorf("writer's user without the socket group: %q %q; want the socket refused", r.Code, r.Message)
		}

		// The writer's container, with its own grant, cannot list mail.
		var got map[string]struct{ Code, Message string }
		s.probe(t, s.asZone(zones[0], zones[0].uid), own, &got, "rpc", socket, rpc.MethodList)
		if got["writer"].Code != rpc.CodePermissionDenied {
			t.Errorf("writer zone listing mail with its own grant: %+v, want %s", got["writer"], rpc.CodePermissionDenied)
		}
	})
}

func zoneOf(service string) *zone {
	for i := range zones {
		if zones[i].service == service {
			return &zones[i]
		}
	}
	return nil
}
