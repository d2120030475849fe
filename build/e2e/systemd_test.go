//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/pgtest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Exposure ceilings of `systemd-analyze security` (0 best, 10 worst): the
// plane has no network and must stay at or below planeExposure; the
// surfaces at or below surfaceExposure.
const (
	planeExposure   = 1.5
	surfaceExposure = 2.5
)

// services maps each unit to the role its user holds a grant for.
var services = map[string]string{
	"mail-plane.service":   "admin",
	"mail-writer.service":  "writer",
	"mail-inbox.service":   "inbox",
	"mail-gateway.service": "gateway",
	"mail-console.service": "console",
}

// TestSystemdUnits checks build/systemd with systemd's own tools, offline:
// every unit verifies (against the real binaries, at the paths the units
// name), each service's exposure score is under its ceiling, the users
// sysusers.d creates are the ones the plane's allow lists and the container
// images name, tmpfiles.d makes the socket directory the plane expects, and
// every binary exits 2 on a configuration error, which the units'
// RestartPreventExitStatus=2 relies on.
func TestSystemdUnits(t *testing.T) {
	for _, tool := range []string{"systemd-analyze", "systemd-sysusers", "systemd-tmpfiles"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the systemd checks need systemd's tools (make e2e installs them)", tool)
		}
	}
	_, self, _, _ := runtime.Caller(0)
	unitDir := filepath.Join(filepath.Dir(self), "..", "systemd")
	bin := binDir(t)
	units, _ := filepath.Glob(filepath.Join(unitDir, "mail-*.service"))
	sockets, _ := filepath.Glob(filepath.Join(unitDir, "mail-*.socket"))
	units = append(units, sockets...)
	if len(units) != 10 {
		t.Fatalf("build/systemd has %d units, want 5 services and 5 sockets: %v", len(units), units)
	}

	// systemd-analyze verify resolves everything a unit names under --root:
	// the host's unit library (sysinit.target and the like), our units, and
	// our binaries at /usr/local/bin, where ExecStart= expects them.
	root := t.TempDir()
	lib := "/usr/lib/systemd/system"
	if _, err := os.Stat(lib); err != nil {
		lib = "/lib/systemd/system"
	}
	copyTree(t, lib, filepath.Join(root, "usr/lib/systemd/system"))
	for name := range services {
		b := strings.TrimSuffix(name, ".service")
		copyFile(t, filepath.Join(bin, b), filepath.Join(root, "usr/local/bin", b), 0o755)
	}
	for _, u := range units {
		copyFile(t, u, filepath.Join(root, "etc/systemd/system", filepath.Base(u)), 0o644)
	}

	t.Run("verify", func(t *testing.T) {
		for _, u := range units {
			out, err := exec.Command("systemd-analyze", "verify", "--man=no", "--root="+root,
				filepath.Join(root, "etc/systemd/system", filepath.Base(u))).CombinedOutput()
			// verify exits 0 on unknown keys and other warnings; any word
			// from it is a finding.
			if err != nil || len(strings.TrimSpace(string(out))) != 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s", filepath.Base(u), err, out)
			}
		}
	})

	t.Run("security", func(t *testing.T) {
		overall := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)
		for name := range services {
			// The copy under root: next to build/systemd/mail-plane.service,
			// systemd would read the PostgreSQL drop-in too.
			out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager",
				filepath.Join(root, "etc/systemd/system", name)).CombinedOutput()
			m := overall.FindSubmatch(out)
			if err != nil || m == nil {
				t.Errorf("systemd-analyze security %s: %v\n%s", name, err, out)
				continue
			}
			score, _ := strconv.ParseFloat(string(m[1]), 64)
			limit := surfaceExposure
			if name == "mail-plane.service" {
				limit = planeExposure
			}
			t.Logf("%-22s exposure %.1f (ceiling %.1f)", name, score, limit)
			if score > limit {
				t.Errorf("%s: exposure %.1f is above %.1f\n%s", name, score, limit, out)
			}
		}
	})

	t.Run("postgres drop-in", func(t *testing.T) {
		// mail-plane.service with mail-plane.service.d/postgres.conf: it
		// verifies, and its exposure, network and all, stays under the
		// plane's ceiling.
		dropIn := filepath.Join(unitDir, "mail-plane.service.d", "postgres.conf")
		copyFile(t, dropIn, filepath.Join(root, "etc/systemd/system/mail-plane.service.d/postgres.conf"), 0o644)
		out, err := exec.Command("systemd-analyze", "verify", "--man=no", "--root="+root,
			filepath.Join(root, "etc/systemd/system/mail-plane.service")).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) != 0 {
			t.Errorf("systemd-analyze verify mail-plane.service with postgres.conf: %v\n%s", err, out)
		}
		out, err = exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", "--root="+root,
			"mail-plane.service").CombinedOutput()
		m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
		// The drop-in must have been read: it gives the plane the network.
		if err != nil || m == nil || !strings.Contains(string(out), "Service has access to the host's network") {
			t.Fatalf("systemd-analyze security mail-plane.service with postgres.conf: %v\n%s", err, out)
		}
		score, _ := strconv.ParseFloat(string(m[1]), 64)
		t.Logf("mail-plane.service with postgres.conf: exposure %.1f (ceiling %.1f)", score, planeExposure)
		if score > planeExposure {
			t.Errorf("mail-plane.service with postgres.conf: exposure %.1f is above %.1f", score, planeExposure)
		}

		// Its ExecStart= is the unit's own with the store flags after
		// "serve", so that the two cannot drift apart; the DSN is a
		// credential; only the database's addresses are let through.
		d := readUnit(t, dropIn)
		var execs []string
		for _, l := range d {
			if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
				execs = append(execs, v)
			}
		}
		base := strings.Fields(readUnit(t, filepath.Join(unitDir, "mail-plane.service")).value("ExecStart"))
		i := slices.Index(base, "serve")
		want := slices.Concat(base[:i+1], []string{"--store", "postgres", "--dsn-file", "%d/dsn"}, base[i+1:])
		if len(execs) != 2 || execs[0] != "" || !slices.Equal(strings.Fields(execs[1]), want) {
			t.Errorf("postgres.conf ExecStart= %q; want a reset, then %q", execs, strings.Join(want, " "))
		}
		if !d.has("LoadCredential=dsn:/etc/credstore/mailplane/dsn") || d.hasPrefix("IPAddressDeny=") || !d.hasPrefix("IPAddressAllow=") {
			t.Errorf("postgres.conf: want the DSN from LoadCredential=, IPAddressDeny=any kept and IPAddressAllow= set:\n%s", strings.Join(d, "\n"))
		}
	})

	t.Run("units", func(t *testing.T) {
		for name := range services {
			u := readUnit(t, filepath.Join(unitDir, name))
			for _, want := range []string{"RestartPreventExitStatus=2", "NoNewPrivileges=yes", "CapabilityBoundingSet=",
				"PrivateNetwork=yes", "RestrictAddressFamilies=AF_UNIX", "ProtectSystem=strict"} {
				if !u.has(want) {
					t.Errorf("%s: no %s", name, want)
				}
			}
			if name != "mail-plane.service" && !u.hasPrefix("LoadCredential=grant:") {
				t.Errorf("%s: the grant does not come from LoadCredential=", name)
			}
		}
	})

	t.Run("users", func(t *testing.T) {
		// The users sysusers.d makes, in an empty root.
		r := emptyRoot(t)
		conf, _ := filepath.Abs(filepath.Join(unitDir, "sysusers.d", "mailplane.conf"))
		if out, err := exec.Command("systemd-sysusers", "--root="+r, conf).CombinedOutput(); err != nil {
			t.Fatalf("systemd-sysusers: %v\n%s", err, out)
		}
		users, groups := passwd(t, filepath.Join(r, "etc/passwd")), passwd(t, filepath.Join(r, "etc/group"))
		allow := readUnit(t, filepath.Join(unitDir, "mail-plane.service")).allowLists()
		want := map[string]int{"admin": planeUID}
		for _, z := range zones {
			want[z.service] = z.uid
		}
		seen := map[int]string{}
		for name, role := range services {
			user := readUnit(t, filepath.Join(unitDir, name)).value("User")
			uid, ok := users[user]
			if !ok {
				t.Errorf("%s runs as %q, which sysusers.d does not create", name, user)
				continue
			}
			if other, dup := seen[uid]; dup {
				t.Errorf("%s and %s share uid %d", name, other, uid)
			}
			seen[uid] = name
			// The container images run the same numbers.
			if uid != want[role] {
				t.Errorf("%s: user %s is uid %d; the images and compose use %d", name, user, uid, want[role])
			}
			if !slices.Contains(strings.Split(allow["uid "+role], ","), strconv.Itoa(uid)) {
				t.Errorf("mail-plane.service allows uids %q for %s grants; %s's user is %d", allow["uid "+role], role, name, uid)
			}
			if role != "admin" && allow["gid "+role] != strconv.Itoa(uid) {
				t.Errorf("mail-plane.service allows gids %q for %s grants; %s's group is %d", allow["gid "+role], role, name, uid)
			}
		}
		if groups["mailplane"] != socketGroup {
			t.Errorf("socket group mailplane is gid %d, want %d", groups["mailplane"], socketGroup)
		}
	})

	t.Run("tmpfiles", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("systemd-tmpfiles can set owners only as root")
		}
		r := emptyRoot(t)
		sysusers, _ := filepath.Abs(filepath.Join(unitDir, "sysusers.d", "mailplane.conf"))
		tmpfiles, _ := filepath.Abs(filepath.Join(unitDir, "tmpfiles.d", "mailplane.conf"))
		for _, cmd := range [][]string{{"systemd-sysusers", "--root=" + r, sysusers}, {"systemd-tmpfiles", "--root=" + r, "--create", tmpfiles}} {
			if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cmd[0], err, out)
			}
		}
		for path, want := range map[string]string{
			"run/mailplane":           fmt.Sprintf("%d:%d %#o", planeUID, socketGroup, os.ModeSetgid|0o750),
			"etc/credstore/mailplane": fmt.Sprintf("0:0 %#o", 0o700),
		} {
			fi, err := os.Stat(filepath.Join(r, path))
			if err != nil {
				t.Error(err)
				continue
			}
			st := fi.Sys().(*syscall.Stat_t)
			got := fmt.Sprintf("%d:%d %#o", st.Uid, st.Gid, fi.Mode()&(os.ModePerm|os.ModeSetgid))
			if got != want {
				t.Errorf("/%s: %s, want %s", path, got, want)
			}
		}
	})

	t.Run("command lines run", func(t *testing.T) {
		// Each surface's ExecStart=, as written, under systemd's own socket
		// activation (systemd-socket-activate passes the .socket units'
		// sockets with their FileDescriptorName=), against a real plane; only
		// paths are moved into a temporary directory and ports to free ones.
		plane := itest.StartPlane(t)
		id := plane.Trial(t, rpc.ProfileCandidate)
		creds := map[string]map[string]string{
			"mail-writer.service":  {"grant": id.WriterGrant},
			"mail-inbox.service":   {"grant": id.InboxGrant, "token": id.InboxToken},
			"mail-gateway.service": {"grant": plane.GatewayGrant(t)},
			"mail-console.service": {"grant": plane.Grant(t, rpc.RoleConsole)},
		}
		sockets := socketUnits(t, unitDir)
		for name, files := range creds {
			dir := t.TempDir()
			for f, v := range files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			args := execStart(t, readUnit(t, filepath.Join(unitDir, name)), bin, map[string]string{
				"/run/mailplane/plane.sock": plane.Socket, "%d": dir})
			activate := []string{"--fdname=" + strings.Join(sockets[name].names, ":")}
			var ports []int
			for range sockets[name].names {
				ports = append(ports, itest.FreePort(t))
				activate = append(activate, fmt.Sprintf("--listen=127.0.0.1:%d", ports[len(ports)-1]))
			}
			p := itest.StartCmd(t, exec.Command("systemd-socket-activate", append(append(activate, "--"), args...)...), name)
			// The first connection starts the service; health needs the plane.
			itest.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), http.StatusOK, p)
			if name == "mail-writer.service" {
				c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[1]), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if line := itest.ReadLine(t, c, 5*time.Second); !strings.HasPrefix(line, "220 ") {
					t.Errorf("mail-writer on its SMTP socket: %q, want a 220 greeting", line)
				}
				c.Close()
			}
			if code := p.Stop(t); code != 0 {
				t.Errorf("%s exited %d on SIGTERM, want 0\n%s", name, code, p.Output())
			}
		}

		// The plane's own ExecStart=, allow lists included: the operator as
		// root may use the admin grant; root presenting a writer grant is
		// refused, because only the writer's uid may.
		if os.Geteuid() != 0 {
			t.Log("not root: the plane's allow lists are not exercised here")
			return
		}
		runPlane(t, readUnit(t, filepath.Join(unitDir, "mail-plane.service")), bin, nil)

		// The same with postgres.conf's ExecStart=, against a real
		// PostgreSQL, the DSN in a file where LoadCredential= puts it.
		pg := pgtest.Start(t)
		credDir := t.TempDir()
		dsn := pg.DSN()
		if err := os.WriteFile(filepath.Join(credDir, "dsn"), []byte(dsn+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out := runPlane(t, readUnit(t, filepath.Join(unitDir, "mail-plane.service.d", "postgres.conf")), bin,
			map[string]string{"%d": credDir})
		if !strings.Contains(out, `"store":"postgres"`) || strings.Contains(out, dsn) {
			t.Errorf("mail-plane with postgres.conf: want the postgres store, and the DSN nowhere in its log:\n%s", out)
		}
	})

	t.Run("configuration errors exit 2", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "missing")
		for _, args := range [][]string{
			{"mail-plane", "serve", "--socket-mode", "bogus"},
			{"mail-writer", "--plane-socket", missing, "--grant-file", missing, "--http-listen", "127.0.0.1:0", "--smtp-listen", "127.0.0.1:0", "--smtp-mode", "fixed"},
			{"mail-inbox", "--plane-socket", missing, "--grant-file", missing, "--token-file", missing, "--listen", "127.0.0.1:0"},
			{"mail-gateway", "--plane-socket", missing, "--grant-file", missing, "--listen", "127.0.0.1:0"},
			{"mail-console", "--plane-socket", missing, "--grant-file", missing, "--listen", "127.0.0.1:0"},
		} {
			err := exec.Command(filepath.Join(bin, args[0]), args[1:]...).Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Errorf("%s: %v, want exit status 2", strings.Join(args, " "), err)
			}
		}
	})
}

// runPlane runs a plane unit's ExecStart= (paths moved into a temporary
// directory, and by moves) as root, and checks its allow lists: root may
// use the admin grant, and is refused with a writer grant. It returns the
// plane's output.
func runPlane(t *testing.T, u unit, bin string, moves map[string]string) string {
	t.Helper()
	dir := itest.ShortTempDir(t)
	sock, data := filepath.Join(dir, "run", "plane.sock"), filepath.Join(dir, "data")
	m := map[string]string{"/run/mailplane/plane.sock": sock, "/var/lib/mailplane": data}
	maps.Copy(m, moves)
	args := execStart(t, u, bin, m)
	p := itest.StartCmd(t, exec.Command(args[0], args[1:]...), "mail-plane.service")
	var admin *rpc.Client
	for deadline := time.Now().Add(15 * time.Second); admin == nil; time.Sleep(50 * time.Millisecond) {
		if g, err := rpc.ReadSecretFile(filepath.Join(data, "admin.grant")); err == nil {
			admin = rpc.NewClient(sock, g)
		} else if time.Now().After(deadline) || exited(p) {
			t.Fatalf("the plane wrote no admin grant:\n%s", p.Output())
		}
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var trial rpc.Identity
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if trial, err = admin.TrialCreate(ctx, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate}); err == nil {
			break
		} else if time.Now().After(deadline) || exited(p) {
			t.Fatalf("admin as root: %v\n%s", err, p.Output())
		}
	}
	w := rpc.NewClient(sock, trial.WriterGrant)
	defer w.Close()
	if _, err := w.Health(ctx); rpc.CodeOf(err) != rpc.CodeUnauthenticated {
		t.Errorf("a writer grant used by root: %v, want %s", err, rpc.CodeUnauthenticated)
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("mail-plane exited %d on SIGTERM, want 0\n%s", code, p.Output())
	}
	return p.Output()
}

func exited(p *itest.Proc) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// socketSet is what a service's .socket units hand it: descriptor names,
// in order.
type socketSet struct{ names []string }

// socketUnits reads build/systemd/*.socket: for each service, the names
// of the sockets it is handed.
func socketUnits(t *testing.T, dir string) map[string]socketSet {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.socket"))
	out := map[string]socketSet{}
	for _, p := range paths {
		u := readUnit(t, p)
		svc, name := u.value("Service"), u.value("FileDescriptorName")
		if svc == "" || name == "" || u.value("ListenStream") == "" {
			t.Fatalf("%s: want ListenStream=, FileDescriptorName= and Service=", filepath.Base(p))
		}
		set := out[svc]
		// The HTTP socket first: the test asks its /healthz.
		if name == "http" {
			set.names = append([]string{name}, set.names...)
		} else {
			set.names = append(set.names, name)
		}
		out[svc] = set
	}
	return out
}

// execStart is a unit's ExecStart= as arguments, with its binary taken
// from bin and each path in moves replaced (a key ending in no slash also
// moves "KEY/..." paths, as %d does).
func execStart(t *testing.T, u unit, bin string, moves map[string]string) []string {
	t.Helper()
	args := strings.Fields(u.value("ExecStart"))
	if len(args) == 0 {
		t.Fatal("no ExecStart=")
	}
	args[0] = filepath.Join(bin, filepath.Base(args[0]))
	for i, a := range args[1:] {
		for from, to := range moves {
			if a == from {
				args[i+1] = to
			} else if rest, ok := strings.CutPrefix(a, from+"/"); ok {
				args[i+1] = filepath.Join(to, rest)
			}
		}
	}
	return args
}

// emptyRoot is a root directory with an empty /etc, for sysusers and
// tmpfiles to work on instead of the host's.
func emptyRoot(t *testing.T) string {
	t.Helper()
	r := t.TempDir()
	if err := os.Mkdir(filepath.Join(r, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

// binDir is where `make build` put the binaries.
func binDir(t *testing.T) string {
	dir := os.Getenv("MAILPLANE_BIN")
	if dir == "" {
		_, self, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(self), "..", "..", "bin")
	}
	for name := range services {
		if _, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(name, ".service"))); err != nil {
			t.Fatalf("%v: `make build` writes the binaries", err)
		}
	}
	return dir
}

// unit is a unit file's lines, continuations joined, comments dropped.
type unit []string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var u unit
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if cur == "" && (strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		u = append(u, cur+line)
		cur = ""
	}
	return u
}

// has reports whether the unit has exactly this line.
func (u unit) has(line string) bool { return slices.Contains(u, line) }

// hasPrefix reports whether a line of the unit starts with prefix.
func (u unit) hasPrefix(prefix string) bool {
	return slices.ContainsFunc(u, func(l string) bool { return strings.HasPrefix(l, prefix) })
}

// value is a key's last value, the one that holds (a drop-in resets
// ExecStart= with an empty one first).
func (u unit) value(key string) string {
	v := ""
	for _, l := range u {
		if w, ok := strings.CutPrefix(l, key+"="); ok {
			v = w
		}
	}
	return v
}

// allowLists are the plane's --allow-uid/--allow-gid flags in ExecStart=,
// keyed "uid ROLE" and "gid ROLE".
func (u unit) allowLists() map[string]string {
	out := map[string]string{}
	re := regexp.MustCompile(`--allow-(uid|gid)[ =](\w+)=([0-9,]+)`)
	for _, m := range re.FindAllStringSubmatch(u.value("ExecStart"), -1) {
		k := m[1] + " " + m[2]
		if out[k] != "" {
			out[k] += ","
		}
		out[k] += m[3]
	}
	return out
}

// passwd maps names to ids in an /etc/passwd or /etc/group file.
func passwd(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 3 {
			id, _ := strconv.Atoi(f[2])
			out[f[0]] = id
		}
	}
	return out
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies a directory of unit files; symlinks (aliases, .wants)
// are copied as links, as systemd reads them.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
