//go:build e2e

// Package e2e proves mailplane's deployment artefacts with the artefacts
// themselves: the FROM-scratch images `make images` built, the compose file
// build/docker-compose.yml, and the systemd units in build/systemd. `make
// e2e` builds everything, runs it, and tears it down.
//
// Every check that crosses a boundary runs in a probe container
// (build/e2e/probe) placed on one zone's network, or given one zone's
// network namespace, volumes and user; all traffic stays on this machine.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// stack is one compose project: a name of its own, torn down when the test
// ends, whatever happened.
type stack struct {
	t          *testing.T
	project    string
	tag        string
	file       string
	dir        string   // build/
	composeCmd []string // docker-compose, or docker compose
	env        []string // for compose, besides MAILPLANE_TAG
}

// newStack is one run of a compose file in build/. The tests run one after
// the other under the same project name; down.sh knows every file.
func newStack(t *testing.T, file string) *stack {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "..")
	s := &stack{t: t, dir: dir, file: filepath.Join(dir, file),
		project: os.Getenv("MAILPLANE_E2E_PROJECT"), tag: os.Getenv("MAILPLANE_TAG")}
	if s.project == "" {
		s.project = fmt.Sprintf("mpe2e%d", os.Getpid())
	}
	if s.tag == "" {
		s.tag = "local"
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatal("docker not found: the e2e test needs a Docker engine")
	}
	// docker-compose (v1, as Debian ships it) or the compose plugin (v2).
	if _, err := exec.LookPath("docker-compose"); err == nil {
		s.composeCmd = []string{"docker-compose"}
	} else if exec.Command("docker", "compose", "version").Run() == nil {
		s.composeCmd = []string{"docker", "compose"}
	} else {
		t.Fatal("neither docker-compose nor docker compose found")
	}
	t.Cleanup(s.down)
	return s
}

// down dumps the stack's logs if the test failed, tears it down with
// build/e2e/down.sh, and fails the test if anything of it is left.
func (s *stack) down() {
	t := s.t
	if t.Failed() {
		if out, err := s.try(s.composeCmd[0], s.composeArgs("logs", "--no-color", "--tail", "100")...); err == nil {
			t.Logf("--- compose logs:\n%s", out)
		}
	}
	if out, err := s.try(filepath.Join(s.dir, "e2e", "down.sh"), s.project); err != nil {
		t.Errorf("down.sh: %v\n%s", err, out)
	}
	label := "label=com.docker.compose.project=" + s.project
	for _, what := range [][]string{
		{"ps", "-aq", "--filter", label},
		{"ps", "-aq", "--filter", "label=mailplane.e2e=" + s.project},
		{"network", "ls", "-q", "--filter", label},
		{"volume", "ls", "-q", "--filter", label},
		{"images", "-q", "--filter", "dangling=true", "--filter", "label=org.websitebench.mailplane.image"},
	} {
		if out, err := s.try("docker", what...); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("left behind after teardown (docker %s): %q %v", strings.Join(what, " "), out, err)
		}
	}
}

// composeArgs are the arguments after s.composeCmd[0] for a compose
// command on the project.
func (s *stack) composeArgs(args ...string) []string {
	return append(append(slices.Clone(s.composeCmd[1:]), "-p", s.project, "-f", s.file, "--profile", "admin"), args...)
}

// try runs a command and returns its stdout; the error carries stderr.
func (s *stack) try(name string, args ...string) (string, error) {
	return s.tryIn(nil, name, args...)
}

func (s *stack) tryIn(stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(append(os.Environ(), "MAILPLANE_TAG="+s.tag), s.env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// compose runs docker-compose on the project, failing the test on error.
func (s *stack) compose(args ...string) string {
	s.t.Helper()
	out, err := s.try(s.composeCmd[0], s.composeArgs(args...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s *stack) requireImages(names ...string) {
	s.t.Helper()
	for _, n := range names {
		if _, err := s.try("docker", "image", "inspect", "mailplane/"+n+":"+s.tag); err != nil {
			s.t.Fatalf("image mailplane/%s:%s missing: `make e2e` builds it (make images, and the probe)", n, s.tag)
		}
	}
}

// container is the id of a service's one container (not a one-off run),
// by compose's labels: docker answers this much faster than docker-compose.
func (s *stack) container(service string) string {
	s.t.Helper()
	out, err := s.try("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+s.project,
		"--filter", "label=com.docker.compose.service="+service, "--filter", "label=com.docker.compose.oneoff=False")
	if err != nil {
		s.t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	if id == "" || strings.Contains(id, "\n") {
		s.t.Fatalf("service %s: want one container, have %q", service, id)
	}
	return id
}

func (s *stack) inspect(container string, v any) {
	s.t.Helper()
	out, err := s.try("docker", "inspect", container)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		s.t.Fatalf("docker inspect %s: %v", container, err)
	}
}

// network is the Docker name of one of the project's networks.
func (s *stack) network(name string) string { return s.project + "_" + name }

// ip is a container's address on one of the project's networks.
func (s *stack) ip(container, network string) string {
	s.t.Helper()
	var insp []struct {
		NetworkSettings struct {
			Networks map[string]struct{ IPAddress string }
		}
	}
	s.inspect(container, &insp)
	ip := insp[0].NetworkSettings.Networks[s.network(network)].IPAddress
	if ip == "" {
		s.t.Fatalf("container %s has no address on %s", container, network)
	}
	return ip
}

// waitHealthy waits for a service's Docker health check to pass.
func (s *stack) waitHealthy(service string) {
	s.t.Helper()
	c := s.container(service)
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := s.try("docker", "inspect", "-f", "{{.State.Status}} {{.State.Health.Status}}", c)
		if err == nil && strings.TrimSpace(out) == "running healthy" {
			return
		}
		if time.Now().After(deadline) || strings.HasPrefix(out, "exited") {
			s.t.Fatalf("%s did not become healthy: %q %v", service, out, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// asZone are the docker run options that put a probe in a zone's container
// as uid: its network namespace, its volumes (read-only), its user, and
// last (--group-add, two elements) the socket group, as the zone has.
func (s *stack) asZone(z zone, uid int) []string {
	c := s.container(z.service)
	return []string{"--network", "container:" + c, "--volumes-from", c + ":ro",
		"--user", fmt.Sprintf("%d:%d", uid, uid), "--group-add", fmt.Sprint(socketGroup)}
}

// probe runs the probe image once with opts and args, stdin as its input,
// and decodes its JSON answer into v. A probe that fails is an error of the
// test (reported false), never a pass.
func (s *stack) probe(t *testing.T, opts []string, stdin []byte, v any, args ...string) bool {
	t.Helper()
	run := append([]string{"run", "--rm", "-i", "--label", "mailplane.e2e=" + s.project,
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true"}, opts...)
	run = append(append(run, "mailplane/e2e-probe:"+s.tag), args...)
	out, err := s.tryIn(stdin, "docker", run...)
	if err != nil {
		t.Errorf("probe %s: %v", args[0], err)
		return false
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		if args[0] == "cat" {
			out = "(a secret, not shown)"
		}
		t.Errorf("probe %s: %v in %q", args[0], err, out)
		return false
	}
	return true
}
