package supervisor_test

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// candidateRun is what testdata/netns_candidate.py saw.
type candidateRun struct {
	UID       int               `json:"uid"`
	SMTP      string            `json:"smtp"`
	HTTP      any               `json:"http"`
	Bootstrap json.RawMessage   `json:"bootstrap"`
	Dial      map[string]string `json:"dial"`
	Socket    string            `json:"socket"`
	Held      int               `json:"held"`
	TLS       string            `json:"tls"`
	OverCap   string            `json:"over_cap"`
}

// runCandidate runs testdata/netns_candidate.py inside network namespace
// name, as uid and gid 65534 (nobody), with b's candidate environment:
// a candidate's process as a harness starts it.
func runCandidate(t *testing.T, name string, b rpc.Bundle, args map[string]any) candidateRun {
	t.Helper()
	script, err := os.ReadFile("testdata/netns_candidate.py") // passed as text: nobody may not read the worktree
	if err != nil {
		t.Fatal(err)
	}
	arg, _ := json.Marshal(args)
	cmd := exec.Command(itest.Require(t, "ip"), "netns", "exec", name, itest.Require(t, "setpriv"),
		"--reuid", "65534", "--regid", "65534", "--clear-groups", itest.Require(t, "/usr/bin/python3"), "-c", string(script), string(arg))
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	for k, v := range b.CandidateEnvironment {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	var run candidateRun
	if err != nil || json.Unmarshal(out, &run) != nil {
		t.Fatalf("the candidate in %s: %v\n%s", name, err, out)
	}
	if run.UID != 65534 {
		t.Fatalf("the candidate ran as uid %d", run.UID)
	}
	return run
}

// hostAddrs are the host's addresses other than loopback: from inside a
// namespace with only its own loopback, none is reachable.
func hostAddrs(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// TestNetnsDoors: two candidates, each in its own network namespace, on
// one `up` stack. Each, as an unprivileged process inside its namespace,
// sends by plain SMTP (no AUTH) and by POST /emails to the addresses its
// bundle names, and lands in its own trial, as the gateway shows; neither
// reaches the other's doors, the gateway, the shared writer or the
// plane's socket. STARTTLS and implicit TLS work there too, verified
// against the stack's CA; closing a trial closes its doors; a path that
// is no network namespace is refused and opens nothing.
func TestNetnsDoors(t *testing.T) {
	nsA, fileA := itest.Netns(t, "a")
	nsB, fileB := itest.Netns(t, "b")
	s := itest.StartUp(t, "--trials", "0")
	admin := s.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Netns: fileA})
	if err != nil {
		t.Fatalf("trial.open with netns: %v", err)
	}
	b, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Netns: fileB})
	if err != nil {
		t.Fatalf("trial.open with netns: %v", err)
	}
	for _, bu := range []rpc.Bundle{a, b} {
		env := bu.CandidateEnvironment
		if bu.Netns == "" || env["WEBSITEBENCH_SMTP_HOST"] != rpc.NetnsDoorHost || env["WEBSITEBENCH_SMTP_PORT"] != strconv.Itoa(bu.SMTPPort) ||
			env["WEBSITEBENCH_MAIL_API_URL"] != bu.WriterURL+"/emails" || bu.SMTPTLSPort == 0 || bu.WriterHTTPSURL != "" ||
			env["WEBSITEBENCH_SMTP_TLS_PORT"] != strconv.Itoa(bu.SMTPTLSPort) || env["WEBSITEBENCH_SMTP_CA_FILE"] != bu.CAFile || bu.CAFile == "" {
			t.Fatalf("a netns trial's bundle: %+v", bu)
		}
	}

	host := hostAddrs(t)
	for i, c := range []struct {
		ns      string
		me, the rpc.Bundle
	}{{nsA, a, b}, {nsB, b, a}} {
		var dial [][2]any
		for _, p := range itest.DoorPorts(t, c.the) {
			if !slices.Contains(itest.DoorPorts(t, c.me), p) { // the same number in its own namespace is its own door
				dial = append(dial, [2]any{rpc.NetnsDoorHost, p})
			}
		}
		stackPorts := []int{itest.URLPort(t, s.Bundle.APIURL), itest.URLPort(t, s.Bundle.WriterURL), s.Bundle.SharedSMTPPort, itest.URLPort(t, s.Bundle.InboxBaseURL)}
		for _, p := range stackPorts {
			if !slices.Contains(itest.DoorPorts(t, c.me), p) {
				dial = append(dial, [2]any{"127.0.0.1", p})
			}
			for _, h := range host {
				dial = append(dial, [2]any{h, p})
			}
		}
		args := map[string]any{"subject": c.me.Namespace, "dial": dial, "socket": s.Bundle.PlaneSocket}
		me := c.me
		if i == 1 {
			// B verifies its doors' TLS from its environment, with the
			// readable copy of the CA a candidate running as another
			// user is handed (docs/candidate.md).
			args["tls"] = true
			me.CandidateEnvironment = maps.Clone(me.CandidateEnvironment)
			me.CandidateEnvironment["WEBSITEBENCH_SMTP_CA_FILE"] = readableCopy(t, me.CandidateEnvironment["WEBSITEBENCH_SMTP_CA_FILE"])
		}
		run := runCandidate(t, c.ns, me, args)
		t.Logf("candidate %d in %s: smtp %s, http %v, plane socket %s, dialled %v", i, c.ns, run.SMTP, run.HTTP, run.Socket, run.Dial)
		if run.SMTP != "ok" || run.HTTP != float64(http.StatusOK) || (args["tls"] != nil && run.TLS != "ok") {
			t.Fatalf("candidate %d in its namespace: smtp %s, http %v, tls %s", i, run.SMTP, run.HTTP, run.TLS)
		}
		var boot struct {
			Namespace string `json:"namespace"`
			SMTPHost  string `json:"smtp_host"`
			SMTPPort  int    `json:"smtp_port"`
		}
		if json.Unmarshal(run.Bootstrap, &boot) != nil || boot.Namespace != c.me.Namespace || boot.SMTPHost != rpc.NetnsDoorHost || boot.SMTPPort != c.me.SMTPPort {
			t.Fatalf("candidate %d's bootstrap: %s", i, run.Bootstrap)
		}
		if len(run.Dial) != len(dial) {
			t.Fatalf("candidate %d dialled %d of %d", i, len(run.Dial), len(dial))
		}
		for addr, got := range run.Dial {
			if got != "ECONNREFUSED" && got != "ENETUNREACH" {
				t.Errorf("candidate %d, from its namespace, on %s: %s", i, addr, got)
			}
		}
		if run.Socket != "EACCES" {
			t.Errorf("candidate %d on the plane's socket: %s, want EACCES", i, run.Socket)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// TLS inside the namespace, as root (the CA file is in up's private
	// data directory): STARTTLS on the SMTP door, implicit TLS on its own.
	if swaks := itest.Optional(t, "swaks"); swaks != "" {
		for _, tc := range []struct {
			port int
			flag string
		}{{a.SMTPPort, "--tls"}, {a.SMTPTLSPort, "--tlsc"}} {
			out, err := exec.Command(itest.Require(t, "ip"), "netns", "exec", nsA, swaks, "--server", net.JoinHostPort(rpc.NetnsDoorHost, strconv.Itoa(tc.port)),
				tc.flag, "--tls-verify", "--tls-ca-path", a.CAFile, "--from", rpc.CandidateSender, "--to", "agent@example.com",
				"--header", "Subject: tls "+tc.flag).CombinedOutput()
			if err != nil {
				t.Fatalf("swaks %s in the namespace: %v\n%s", tc.flag, err, out)
			}
		}
	}

	// Each trial holds exactly its own mail.
	for _, c := range []struct {
		b    rpc.Bundle
		want string
	}{{a, "smtp " + a.Namespace + "|http " + a.Namespace + "|tls --tls|tls --tlsc"},
		{b, "smtp " + b.Namespace + "|http " + b.Namespace + "|tls starttls " + b.Namespace + "|tls implicit " + b.Namespace}} {
		if itest.Optional(t, "swaks") == "" {
			c.want = strings.TrimSuffix(c.want, "|tls --tls|tls --tlsc")
		}
		code, subjects := episode{c.b}.subjects(t, c.b.ReadCapability)
		if code != http.StatusOK || strings.Join(subjects, "|") != c.want {
			t.Fatalf("trial %s holds %d %q, want %q", c.b.Namespace, code, subjects, c.want)
		}
	}

	// The trail names the door's credential: the namespace, not a port.
	es, err := mailclient.New(b.APIURL, b.Namespace, b.ReadCapability).Events(ctx, 0, 0)
	if err != nil || !slices.ContainsFunc(es, func(e mailclient.Event) bool {
		return e.Door == "writer-smtp" && e.Action == "send" && e.Outcome == "accepted" && e.Credential == "netns"
	}) {
		t.Fatalf("B's trail has no accepted plain SMTP send by its netns door: %+v %v", es, err)
	}

	t.Run("sessions over the cap are in the trail", func(t *testing.T) {
		run := runCandidate(t, nsB, b, map[string]any{"hold": []int{b.SMTPPort, 16}}) // connlimit.DefaultMaxConns
		if run.Held != 16 || run.OverCap != "" {
			t.Fatalf("16 sessions held (%d greeted), the 17th answered %q: want it closed at once", run.Held, run.OverCap)
		}
		gw := mailclient.New(b.APIURL, b.Namespace, b.ReadCapability)
		deadline := time.Now().Add(20 * time.Second)
		for {
			es, err := gw.Events(ctx, 0, 0)
			if err == nil && slices.ContainsFunc(es, func(e mailclient.Event) bool {
				return e.Action == "connect" && e.Outcome == "refused" && e.Code == "connection_limit" && e.Credential == "netns"
			}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no connection_limit refusal by the netns door in B's trail: %+v %v", es, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("refused paths open nothing", func(t *testing.T) {
		regular := filepath.Join(t.TempDir(), "netns")
		os.WriteFile(regular, nil, 0o644)
		// /proc/1/ns/net: the host's own namespace, whose loopback every
		// local process reaches.
		for _, path := range []string{"/nonexistent/netns", "/proc/self/ns/uts", regular, "run/netns/" + nsA, "/run/netns/../netns/" + nsA,
			"/proc/" + strconv.Itoa(s.Cmd.Process.Pid) + "/ns/net"} {
			_, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Netns: path})
			if rpc.CodeOf(err) != rpc.CodeBadRequest {
				t.Errorf("netns %q: %v, want %s", path, err, rpc.CodeBadRequest)
			}
		}
		all, err := admin.AllTrials(ctx)
		if err != nil || len(all) != 2 {
			t.Fatalf("after refused opens, %d trials (%v), want 2", len(all), err)
		}
	})

	t.Run("close closes the doors", func(t *testing.T) {
		if err := admin.TrialClose(ctx, a.Namespace); err != nil {
			t.Fatal(err)
		}
		var dial [][2]any
		for _, p := range itest.DoorPorts(t, a) {
			dial = append(dial, [2]any{rpc.NetnsDoorHost, p})
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			run := runCandidate(t, nsA, a, map[string]any{"dial": dial})
			open := 0
			for _, got := range run.Dial {
				if got != "ECONNREFUSED" {
					open++
				}
			}
			if open == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a closed trial's doors still answer: %v", run.Dial)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// B's doors are untouched.
		if run := runCandidate(t, nsB, b, map[string]any{"subject": "after A closed"}); run.SMTP != "ok" || run.HTTP != float64(http.StatusOK) {
			t.Fatalf("B after A closed: smtp %s, http %v", run.SMTP, run.HTTP)
		}
	})
}

// TestNetnsDoorsRestart: `up --data` started again binds a still-open
// netns trial's doors again inside its namespace, at the ports its bundle
// names; once the namespace is gone, the trial is not served, the log
// says so, and nothing of it moves to the host.
func TestNetnsDoorsRestart(t *testing.T) {
	name, file := itest.Netns(t, "r")
	data := itest.ShortTempDir(t)
	first := itest.StartUp(t, "--trials", "0", "--data", data)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := first.Admin(t).TrialOpen(ctx, &rpc.TrialOpenRequest{Netns: file})
	if err != nil {
		t.Fatal(err)
	}
	if run := runCandidate(t, name, b, map[string]any{"subject": "before"}); run.SMTP != "ok" || run.HTTP != float64(http.StatusOK) {
		t.Fatalf("before the restart: smtp %s, http %v", run.SMTP, run.HTTP)
	}
	if code := first.Stop(t); code != 0 {
		t.Fatalf("up exited %d on SIGTERM", code)
	}

	again := itest.StartUp(t, "--trials", "0", "--data", data)
	if run := runCandidate(t, name, b, map[string]any{"subject": "after"}); run.SMTP != "ok" || run.HTTP != float64(http.StatusOK) {
		t.Fatalf("after the restart, at the bundle's addresses: smtp %s, http %v\n%s", run.SMTP, run.HTTP, again.Output())
	}
	code, subjects := episode{b}.subjects(t, b.ReadCapability)
	if want := "smtp before|http before|smtp after|http after"; code != http.StatusOK || strings.Join(subjects, "|") != want {
		t.Fatalf("after the restart the trial holds %d %q, want %q", code, subjects, want)
	}
	if code := again.Stop(t); code != 0 {
		t.Fatalf("up exited %d on SIGTERM", code)
	}

	if out, err := exec.Command(itest.Require(t, "ip"), "netns", "del", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v\n%s", err, out)
	}
	gone := itest.StartUp(t, "--trials", "0", "--data", data)
	if !gone.WaitOutput("doors in its network namespace; they are not served", itest.Bound) {
		t.Fatalf("no log line says the trial is not served:\n%s", gone.Output())
	}
	if !strings.Contains(gone.Output(), b.Namespace) {
		t.Fatalf("the log does not name the trial:\n%s", gone.Output())
	}
	all, err := gone.Admin(t).AllTrials(ctx)
	if err != nil || len(all) != 1 || all[0].SMTPPort != 0 {
		t.Fatalf("the trial after its namespace went: %+v %v", all, err)
	}
	// Not on the host either: this stack's writer listens on none of the
	// door's ports there. (Dialling them would reach other stacks that
	// tests run at the same time; and one of this writer's own host ports
	// may share a number with one door port by chance, never with all.)
	host := map[int]bool{}
	for _, p := range writerPorts(t, gone) {
		host[p] = true
	}
	fallback := true
	for _, p := range itest.DoorPorts(t, b) {
		fallback = fallback && host[p]
	}
	if fallback {
		t.Fatalf("the writer serves the door's ports %v on the host", itest.DoorPorts(t, b))
	}
}

// readableCopy copies the CA certificate at path where any user reads it,
// as a harness does for a candidate that runs as another user: up's data
// directory is 0700.
func readableCopy(t *testing.T, path string) string {
	t.Helper()
	pem, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "mpt-ca-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	copied := filepath.Join(dir, "ca.pem")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copied, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(copied, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return copied
}
