package serve_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/serve"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestServeListensOnlyOnItsSocket: the socket's directory is 0750, the
// socket 0660, and the process holds no TCP or UDP socket at all.
func TestServeListensOnlyOnItsSocket(t *testing.T) {
	p := itest.StartPlane(t)
	dir, err := os.Stat(filepath.Dir(p.Socket))
	if err != nil || dir.Mode().Perm() != 0o750 {
		t.Fatalf("socket directory: %v %v", dir.Mode(), err)
	}
	sock, err := os.Stat(p.Socket)
	if err != nil || sock.Mode()&os.ModeSocket == 0 || sock.Mode().Perm() != 0o660 {
		t.Fatalf("socket: %v %v", sock.Mode(), err)
	}
	// Every file the plane made (the database, its write-ahead log and
	// shared memory, the grant files) is its own alone: umask 077.
	id := p.Trial(t, rpc.ProfileCandidate)
	if _, err := p.Client(t, id.WriterGrant).Send(context.Background(), &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender,
		To: []string{"u@example.com"}, Raw: []byte("Subject: x\r\n\r\nx")}); err != nil {
		t.Fatal(err)
	}
	files := 0
	filepath.WalkDir(p.Data, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeSocket != 0 {
			return err
		}
		files++
		if fi, err := d.Info(); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, fi.Mode())
		}
		return nil
	})
	if files < 5 { // the database, -wal, -shm, and at least two grants
		t.Fatalf("only %d files in the data directory: the check proves little", files)
	}
	inodes := map[string]bool{}
	fds, _ := os.ReadDir("/proc/" + itest.Itoa(p.Cmd.Process.Pid) + "/fd")
	for _, fd := range fds {
		link, err := os.Readlink("/proc/" + itest.Itoa(p.Cmd.Process.Pid) + "/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	if len(inodes) == 0 {
		t.Fatal("no sockets found: the check would prove nothing")
	}
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6", "raw", "raw6"} {
		b, err := os.ReadFile("/proc/net/" + table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 9 && inodes[f[9]] {
				t.Fatalf("the plane holds a %s socket: %s", table, line)
			}
		}
	}
}

// TestConfigurationErrorsExit2: a service manager must not restart-loop on
// a bad configuration.
func TestConfigurationErrorsExit2(t *testing.T) {
	dir := itest.ShortTempDir(t)
	for _, args := range [][]string{
		{"serve", "--socket-mode", "abc", "--data", dir, "--socket", dir + "/s.sock"},
		{"serve", "--allow-uid", "nobody=1", "--data", dir, "--socket", dir + "/s.sock"},
		{"serve", "--store", "floppy", "--data", dir, "--socket", dir + "/s.sock"},
		{"serve", "--socket", "@abstract", "--data", dir},
		{"serve", "--no-such-flag"},
		{"--log-level", "loud", "serve"},
		{"trial", "list", "--grant-file", dir + "/missing"},
		{"trial", "seal", "--grant-file", dir + "/missing"},
	} {
		cmd := exec.Command(itest.Bin(t, "mail-plane"), args...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: exit %v, want 2\n%s", args, err, out)
		}
		if len(strings.TrimSpace(string(out))) == 0 {
			t.Errorf("%v: no explanation on stderr", args)
		}
	}
}

// TestPostgresDSN: --store postgres takes its DSN only from a file or
// $MAILPLANE_DSN; without one it is a usage error naming both; a bad DSN,
// or a database that does not answer, is reported without the DSN's
// password.
func TestPostgresDSN(t *testing.T) {
	dir := itest.ShortTempDir(t)
	const password = "s3cret-pa55word"
	dsnFile := func(dsn string) string { return itest.WriteSecret(t, "dsn", dsn) }
	args := []string{"serve", "--store", "postgres", "--data", dir, "--socket", dir + "/s.sock"}
	for _, c := range []struct {
		args []string
		env  string
		code int
		want []string
	}{
		{args: args, code: 2, want: []string{"--dsn-file", serve.DSNEnv}},
		{args: append(args, "--dsn-file", dir+"/missing"), code: 2, want: []string{"--dsn-file"}},
		{args: append(args, "--dsn-file", dsnFile("postgres://u:"+password+"@[::1")), code: 2, want: []string{"DSN does not parse"}},
		{args: args, env: "postgres://u:" + password + "@%zz", code: 2, want: []string{"DSN does not parse"}},
		// Nothing listens on port 1.
		{args: append(args, "--dsn-file", dsnFile("postgres://u:"+password+"@127.0.0.1:1/db?connect_timeout=2")), code: 1},
	} {
		cmd := exec.Command(itest.Bin(t, "mail-plane"), c.args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		if c.env != "" {
			cmd.Env = append(cmd.Env, serve.DSNEnv+"="+c.env)
		}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != c.code {
			t.Errorf("%v: exit %v, want %d\n%s", c.args, err, c.code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%v: %q not in\n%s", c.args, w, out)
			}
		}
		if strings.Contains(string(out), password) {
			t.Errorf("%v: the DSN's password is in the output:\n%s", c.args, out)
		}
	}
}

// TestTrialCreateWritesOneFilePerParty: each secret in its own 0600 file.
func TestTrialCreateWritesOneFilePerParty(t *testing.T) {
	p := itest.StartPlane(t)
	out := filepath.Join(itest.ShortTempDir(t), "trial")
	cmd := exec.Command(itest.Bin(t, "mail-plane"), "trial", "create", "--socket", p.Socket,
		"--grant-file", filepath.Join(p.Data, "admin.grant"), "--dir", out, "--profile", rpc.ProfileSidecar, "--json")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	files := map[string]string{}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", e.Name(), fi.Mode())
		}
		v, _ := os.ReadFile(filepath.Join(out, e.Name()))
		files[e.Name()] = strings.TrimSpace(string(v))
	}
	for name, field := range map[string]string{
		"writer.grant": `"writer_grant":"`, "inbox.grant": `"inbox_grant":"`, "inbox.token": `"inbox_token":"`,
		"evaluator.capability": `"read_capability":"`, "candidate.mail-api-token": `"mail_api_token":"`,
		"candidate.bootstrap-token": `"bootstrap_token":"`, "namespace": `"namespace":"`,
	} {
		if files[name] == "" || !strings.Contains(string(b), field+files[name]+`"`) {
			t.Errorf("%s = %q does not match the printed identity", name, files[name])
		}
	}
	list := exec.Command(itest.Bin(t, "mail-plane"), "trial", "list", "--socket", p.Socket, "--grant-file", filepath.Join(p.Data, "admin.grant"))
	lb, err := list.Output()
	if err != nil || !strings.Contains(string(lb), files["namespace"]) || strings.Contains(string(lb), files["evaluator.capability"]) {
		t.Fatalf("trial list: %v\n%s", err, lb)
	}
}

// TestTrialCreateAuthoring: an authoring trial prints the capture's 12
// variables (docs/reference.md §9.2) and keeps its grants only in files.
func TestTrialCreateAuthoring(t *testing.T) {
	p := itest.StartPlane(t)
	base := []string{"trial", "create", "--socket", p.Socket, "--grant-file", filepath.Join(p.Data, "admin.grant"), "--profile", rpc.ProfileAuthoring, "--json"}
	if err := exec.Command(itest.Bin(t, "mail-plane"), base...).Run(); err == nil {
		t.Fatal("authoring --json without --dir would lose the grants, and was accepted")
	}
	dir := filepath.Join(itest.ShortTempDir(t), "trial")
	out, err := exec.Command(itest.Bin(t, "mail-plane"), append(base, "--dir", dir, "--api-url", "http://127.0.0.1:9025", "--smtp-port", "2525")...).Output()
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal(out, &env); err != nil || len(env) != 12 {
		t.Fatalf("%v: %s", err, out)
	}
	capability, _ := rpc.ReadSecretFile(filepath.Join(dir, "evaluator.capability"))
	boot, _ := rpc.ReadSecretFile(filepath.Join(dir, "candidate.bootstrap-token"))
	if env["WEBSITEBENCH_MAILBOX_CREDENTIAL"] != capability || env["WEBSITEBENCH_MAIL_API_TOKEN"] != boot || env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"] != boot ||
		env["WEBSITEBENCH_MAIL_API_URL"] != "http://127.0.0.1:9025/emails" || env["WEBSITEBENCH_SMTP_PORT"] != "2525" {
		t.Fatalf("environment: %v", env)
	}
	if strings.Contains(string(out), "mpg_") {
		t.Fatal("a grant was printed")
	}
}
