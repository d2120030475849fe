//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

const (
	postgresUID = 10005
	postgresDB  = "db"       // the compose network of PostgreSQL and the planes
	dockerDNS   = "0B00007F" // 127.0.0.11 as /proc/net lists it: Docker's resolver in every container on a user network
)

// TestComposePostgres runs build/docker-compose.postgres.yml: PostgreSQL
// in its own zone, two planes sharing it. It proves from probe containers
// that only the planes' network reaches the database and only the role
// "mailplane" gets in, by password, to its own database; that every
// surface of both planes starts, and a mail sent through one plane's writer
// is read through the other plane's gateway, both ways; and that neither
// the password nor the DSN shows in any container's `docker inspect` or
// log.
func TestComposePostgres(t *testing.T) {
	s := newStack(t, "docker-compose.postgres.yml")
	s.requireImages("postgres", "mail-plane", "mail-writer", "mail-inbox", "mail-gateway", "e2e-probe")
	password := s.postgresSecrets()
	dsn := func(user, pass, host, db string) string {
		return fmt.Sprintf("postgres://%s:%s@%s:5432/%s?sslmode=disable", user, pass, host, db)
	}
	t.Cleanup(func() { s.noSecret(password) }) // before the teardown: the containers still exist

	s.compose("up", "-d", "postgres")
	s.waitHealthy("postgres")
	pg := s.container("postgres")
	pgAddr := s.ip(pg, postgresDB) + ":5432"

	t.Run("postgres container", func(t *testing.T) {
		var insp []struct {
			Config     struct{ User string }
			HostConfig struct {
				ReadonlyRootfs, Privileged bool
				CapAdd, CapDrop            []string
				SecurityOpt                []string
			}
		}
		s.inspect(pg, &insp)
		h := insp[0].HostConfig
		if !h.ReadonlyRootfs || h.Privileged || len(h.CapAdd) != 0 || !slices.Equal(h.CapDrop, []string{"ALL"}) ||
			!slices.Contains(h.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("postgres: read-only %v, privileged %v, cap-add %v, cap-drop %v, security-opt %v",
				h.ReadonlyRootfs, h.Privileged, h.CapAdd, h.CapDrop, h.SecurityOpt)
		}
		if want := fmt.Sprintf("%d:%d", postgresUID, postgresUID); insp[0].Config.User != want {
			t.Errorf("postgres runs as %q, want %q", insp[0].Config.User, want)
		}
		if nets := s.networks(pg); !slices.Equal(nets, []string{s.network(postgresDB)}) {
			t.Errorf("postgres is on networks %v, want only %s", nets, s.network(postgresDB))
		}
		if out, err := s.try("docker", "exec", pg, "/bin/sh", "-c", "true"); err == nil {
			t.Errorf("postgres has a shell: %s", out)
		}
	})

	// From a container on the database's network, as a plane would be: the
	// role "mailplane" with its password gets into its database, and every
	// other door is shut, by pg_hba.conf or by the password.
	logins := func(t *testing.T) {
		in, _ := json.Marshal(map[string]string{
			"mailplane":      dsn("mailplane", password, "postgres", "mailplane"),
			"wrong password": dsn("mailplane", strings.Repeat("x", 32), "postgres", "mailplane"),
			"superuser":      dsn("postgres", password, "postgres", "postgres"),
			"other database": dsn("mailplane", password, "postgres", "postgres"),
		})
		var got map[string]struct{ User, Code, Error string }
		if !s.probe(t, []string{"--network", s.network(postgresDB)}, in, &got, "pg") {
			return
		}
		want := map[string]string{"wrong password": "28P01", "superuser": "28000", "other database": "28000"}
		if r := got["mailplane"]; r.User != "mailplane" {
			t.Errorf("the role mailplane with its password: %+v, want in", r)
		}
		for name, code := range want {
			if r := got[name]; r.Code != code {
				t.Errorf("%s: %+v, want refused with %s", name, r, code)
			}
		}
	}
	t.Run("only the role mailplane, by password, to its database", logins)
	// A restart keeps the cluster (no second initialisation) and sets the
	// password again from the secret.
	s.compose("restart", "postgres")
	s.waitHealthy("postgres")
	t.Run("after a restart", logins)
	if stdout, stderr, err := s.logs(pg); err != nil || strings.Count(stdout+stderr, "pg-entry: initialised") != 1 {
		t.Errorf("postgres initialised %d times over a restart, want once (%v)", strings.Count(stdout+stderr, "pg-entry: initialised"), err)
	}

	t.Run("the surfaces' networks do not reach PostgreSQL", func(t *testing.T) {
		// (The database's own network does: the logins above.)
		var wg sync.WaitGroup
		for _, n := range []string{"candidate", "agent", "evaluator"} {
			wg.Go(func() {
				var got map[string]string
				s.probe(t, []string{"--network", s.network(n)}, nil, &got, "dial", pgAddr)
				if got[pgAddr] != "timeout" && got[pgAddr] != "unreachable" {
					t.Errorf("from the %s network, PostgreSQL at %s: %q, want no route", n, pgAddr, got[pgAddr])
				}
			})
		}
		wg.Wait()
	})

	s.compose("up", "-d", "plane-a", "plane-b")
	s.waitHealthy("plane-a")
	s.waitHealthy("plane-b")

	t.Run("planes have the database's network only", func(t *testing.T) {
		// (That they reach PostgreSQL on it, the flow below proves.)
		for _, svc := range []string{"plane-a", "plane-b"} {
			c := s.container(svc)
			if nets := s.networks(c); !slices.Equal(nets, []string{s.network(postgresDB)}) {
				t.Errorf("%s is on networks %v, want only %s", svc, nets, s.network(postgresDB))
			}
			// In its network namespace: loopback and the database's network,
			// and nothing listening but Docker's own resolver (127.0.0.11).
			var ns struct {
				Interfaces []string
				Listening  []string
			}
			s.probe(t, []string{"--network", "container:" + c}, nil, &ns, "netns")
			listening := slices.DeleteFunc(ns.Listening, func(l string) bool {
				return strings.HasPrefix(l, "tcp "+dockerDNS+":") || strings.HasPrefix(l, "udp "+dockerDNS+":")
			})
			if len(ns.Interfaces) != 2 || !slices.Contains(ns.Interfaces, "lo") || len(listening) != 0 {
				t.Errorf("%s's network namespace: interfaces %v, listening %v; want lo and one more, nothing listening", svc, ns.Interfaces, listening)
			}
		}
	})

	// The operator, through each plane: a trial into that plane's writer
	// and inbox, a gateway grant into its gateway. Then every surface of
	// the file.
	crossings := []struct {
		from, to string // plane A's writer, plane B's gateway; and back
		id       rpc.Identity
	}{{from: "a", to: "b"}, {from: "b", to: "a"}}
	for i, c := range crossings {
		admin := "admin-" + c.from
		out := s.compose("run", "--rm", "-T", admin, "trial", "create", "--json", "--group-readable",
			"--party-dir", "writer=/secrets/writer", "--party-dir", "inbox=/secrets/inbox")
		if err := json.Unmarshal([]byte(out), &crossings[i].id); err != nil || crossings[i].id.Namespace == "" {
			t.Fatalf("trial create --json through %s: %v (%d bytes)", admin, err, len(out))
		}
		s.compose("run", "--rm", "-T", admin, "grant", "create", "--role", "gateway",
			"--out", "/secrets/gateway/gateway.grant", "--group-readable")
	}
	var surfaces []zone
	for _, p := range []string{"a", "b"} {
		surfaces = append(surfaces,
			zone{service: "writer-" + p, network: "candidate", ports: []int{8025, 1025}},
			zone{service: "inbox-" + p, network: "agent", ports: []int{8026}},
			zone{service: "gateway-" + p, network: "evaluator", ports: []int{8027}})
	}
	up := []string{"up", "-d"}
	for _, z := range surfaces {
		up = append(up, z.service)
	}
	s.compose(up...)
	var wg sync.WaitGroup
	for _, z := range surfaces {
		wg.Go(func() {
			var ok map[string]int
			url := fmt.Sprintf("http://%s:%d/healthz", z.service, z.ports[0])
			if !s.probe(t, []string{"--network", s.network(z.network)}, nil, &ok, "wait-http", url) {
				t.Errorf("%s never became healthy", z.service)
			}
		})
	}
	if wg.Wait(); t.Failed() {
		t.FailNow()
	}

	t.Run("surfaces have their zone's network only", func(t *testing.T) {
		// So they have the reachability that network was shown to have:
		// no PostgreSQL.
		for _, z := range surfaces {
			if nets := s.networks(s.container(z.service)); !slices.Equal(nets, []string{s.network(z.network)}) {
				t.Errorf("%s is on networks %v, want only %s", z.service, nets, s.network(z.network))
			}
		}
	})

	for i, c := range crossings {
		t.Run(fmt.Sprintf("sent through plane %s, read through plane %s", c.from, c.to), func(t *testing.T) {
			testCrossing(t, s, c.id, "writer-"+c.from, "gateway-"+c.to, fmt.Sprintf("73190%d", i), fmt.Sprintf("58271%d", i))
		})
	}
}

// testCrossing sends a mail through writer (its API, with the Resend SDK,
// and SMTP) into the trial id, and reads both with their codes through
// gateway, which belongs to another plane.
func testCrossing(t *testing.T, s *stack, id rpc.Identity, writer, gateway, apiCode, smtpCode string) {
	env := map[string]string{
		"WEBSITEBENCH_MAIL_API_URL":            "http://" + writer + ":8025/emails",
		"WEBSITEBENCH_MAIL_API_TOKEN":          id.MailAPIToken,
		"WEBSITEBENCH_MAIL_FROM":               rpc.CandidateSender,
		"WEBSITEBENCH_SMTP_HOST":               writer,
		"WEBSITEBENCH_SMTP_PORT":               "1025",
		"WEBSITEBENCH_SMTP_FROM":               rpc.CandidateSender,
		"WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL":   "http://" + writer + ":8025/internal/bootstrap",
		"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN": id.BootstrapToken,
	}
	in, _ := json.Marshal(map[string]any{"env": env, "to": "alice@example.com", "api_code": apiCode,
		"smtp_to": "bob@example.com", "smtp_code": smtpCode})
	var sent struct {
		ResendID string `json:"resend_id"`
		SMTP     string `json:"smtp"`
	}
	if !s.probe(t, []string{"--network", s.network("candidate")}, in, &sent, "candidate") {
		t.FailNow()
	}
	if sent.ResendID == "" || sent.SMTP != "sent" {
		t.Fatalf("through %s: resend id %q, smtp %q", writer, sent.ResendID, sent.SMTP)
	}
	in, _ = json.Marshal(map[string]any{"url": "http://" + gateway + ":8027", "namespace": id.Namespace,
		"capability": id.ReadCapability, "want": 2})
	type answer struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}
	var read struct{ List, Latest, Wrong answer }
	if !s.probe(t, []string{"--network", s.network("evaluator")}, in, &read, "evaluator") {
		t.FailNow()
	}
	var list struct {
		Messages []struct {
			OTP *string `json:"otp"`
		}
	}
	if read.List.Status != http.StatusOK || json.Unmarshal(read.List.Body, &list) != nil || len(list.Messages) != 2 {
		t.Fatalf("%s: %d %s; want the 2 messages sent through %s", gateway, read.List.Status, read.List.Body, writer)
	}
	for i, want := range []string{apiCode, smtpCode} {
		if m := list.Messages[i]; m.OTP == nil || *m.OTP != want {
			t.Errorf("%s, message %d: otp %v, want %s", gateway, i, m.OTP, want)
		}
	}
	if read.Wrong.Status != http.StatusForbidden {
		t.Errorf("%s with a wrong capability: %d, want 403", gateway, read.Wrong.Status)
	}
}

// postgresSecrets writes the stack's two secret files, as an operator
// would, into a directory of the test's, with the owners the containers
// run as, and returns the password.
func (s *stack) postgresSecrets() string {
	s.t.Helper()
	b := make([]byte, 24)
	rand.Read(b)
	password := hex.EncodeToString(b)
	dir := s.t.TempDir()
	for name, f := range map[string]struct {
		content string
		uid     int
	}{
		"postgres-password": {password + "\n", postgresUID},
		"dsn":               {"postgres://mailplane:" + password + "@postgres:5432/mailplane?sslmode=disable\n", planeUID},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(f.content), 0o400); err != nil {
			s.t.Fatal(err)
		}
		if err := os.Chown(p, f.uid, f.uid); err != nil {
			s.t.Fatalf("chown %s: %v (the e2e test runs as root, as `make e2e` does)", name, err)
		}
	}
	s.env = append(s.env, "MAILPLANE_SECRETS="+dir)
	return password
}

// noSecret fails the test if the secret appears in any of the project's
// containers' `docker inspect` (environment, arguments, labels, mounts) or
// logs.
func (s *stack) noSecret(secret string) {
	t := s.t
	out, err := s.try("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+s.project)
	if err != nil {
		t.Error(err)
		return
	}
	for _, c := range strings.Fields(out) {
		insp, err := s.try("docker", "inspect", c)
		if err != nil {
			t.Error(err)
			continue
		}
		stdout, stderr, err := s.logs(c)
		if err != nil {
			t.Error(err)
			continue
		}
		if strings.Contains(insp, secret) {
			t.Errorf("container %.12s: the password is in docker inspect", c)
		}
		if strings.Contains(stdout+stderr, secret) {
			t.Errorf("container %.12s: the password is in its log", c)
		}
	}
}

// logs are a container's stdout and stderr.
func (s *stack) logs(c string) (stdout, stderr string, err error) {
	var o, e strings.Builder
	x := exec.Command("docker", "logs", c)
	x.Stdout, x.Stderr = &o, &e
	err = x.Run()
	return o.String(), e.String(), err
}

// networks are the Docker networks a container is on, sorted.
func (s *stack) networks(c string) []string {
	var insp []struct {
		NetworkSettings struct{ Networks map[string]any }
	}
	s.inspect(c, &insp)
	var nets []string
	for n := range insp[0].NetworkSettings.Networks {
		nets = append(nets, n)
	}
	slices.Sort(nets)
	return nets
}
