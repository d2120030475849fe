package supervisor_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestSquattedPortMoves is the squatting attack on a restart with the
// opt-in to move: up --data D opens a trial, stops; another process takes
// the trial's SMTP port; up --data D --move-taken-ports starts again. No
// bundle (up --json, up.json, trial info,
// bootstrap) advertises the squatted port; the trial's next send to its
// new port lands in the trial; the trail records the move with both
// ports; the squatter is never connected to.
func TestSquattedPortMoves(t *testing.T) {
	data := itest.ShortTempDir(t)
	first := itest.StartUp(t, "--data", data, "--trials", "1")
	before := first.Bundle.Trials[0]
	old := before.SMTPPort
	if err := smtpTo(before, old, "before the restart"); err != nil {
		t.Fatal(err)
	}
	if code := first.Stop(t); code != 0 {
		t.Fatalf("up exited %d on SIGTERM", code)
	}

	squat, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(old))
	if err != nil {
		t.Fatalf("taking the trial's port %d: %v", old, err)
	}
	defer squat.Close()
	var reached atomic.Int64
	go func() {
		for {
			c, err := squat.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()

	again := itest.StartUp(t, "--data", data, "--move-taken-ports")
	after := again.Bundle.Trials[0]
	moved := after.SMTPPort
	if after.Namespace != before.Namespace || moved == 0 || moved == old {
		t.Fatalf("after the restart with port %d squatted, the trial's bundle: %s port %d", old, after.Namespace, moved)
	}
	advertised := func(where string, b rpc.Bundle) {
		t.Helper()
		if b.SMTPPort != moved || b.CandidateEnvironment["WEBSITEBENCH_SMTP_PORT"] != strconv.Itoa(moved) {
			t.Fatalf("%s advertises port %d, environment %s; want the new port %d", where, b.SMTPPort, b.CandidateEnvironment["WEBSITEBENCH_SMTP_PORT"], moved)
		}
	}
	advertised("up --json", *again.Bundle.Bundle)
	advertised("up --json's trials", after)
	var state struct{ Trials []rpc.Bundle }
	if b, err := os.ReadFile(filepath.Join(data, "up.json")); err != nil || json.Unmarshal(b, &state) != nil || len(state.Trials) != 1 {
		t.Fatalf("up.json: %v %+v", err, state)
	}
	advertised("up.json", state.Trials[0])

	out, err := exec.Command(itest.Bin(t, "mail-plane"), "trial", "info", "--socket", again.Bundle.PlaneSocket,
		"--grant-file", again.Bundle.AdminGrantFile, "--json", after.Namespace).Output()
	var info rpc.TrialInfo
	if err != nil || json.Unmarshal(out, &info) != nil || info.SMTPPort != moved || info.Namespace != after.Namespace ||
		info.Profile != rpc.ProfileCandidate || info.Plane == "" {
		t.Fatalf("trial info: %s %v; want port %d", out, err, moved)
	}
	for _, secret := range []string{after.ReadCapability, after.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"]} {
		if strings.Contains(string(out), secret) {
			t.Fatal("trial info shows a secret")
		}
	}
	env := after.CandidateEnvironment
	req, _ := http.NewRequest(http.MethodGet, env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL"], nil)
	req.Header.Set("Authorization", "Bearer "+env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"])
	if a := do(t, req); a.code != http.StatusOK || !strings.Contains(a.body, `"smtp_port":`+strconv.Itoa(moved)) {
		t.Fatalf("bootstrap: %d %s; want smtp_port %d", a.code, a.body, moved)
	}

	if err := smtpTo(after, moved, "after the move"); err != nil {
		t.Fatalf("SMTP to the trial's new port: %v", err)
	}
	code, subjects := episode{after}.subjects(t, after.ReadCapability)
	if code != http.StatusOK || strings.Join(subjects, "|") != "before the restart|after the move" {
		t.Fatalf("the trial's mail through the gateway: %d %q", code, subjects)
	}

	trail := export(t, again, after.Namespace)
	if _, err := evidence.Verify(bytes.NewReader(trail)); err != nil {
		t.Fatalf("the trail does not verify: %v", err)
	}
	var recorded bool
	sc := bufio.NewScanner(bytes.NewReader(trail))
	for sc.Scan() {
		var e evidence.Event
		json.Unmarshal(sc.Bytes(), &e)
		recorded = recorded || (e.Action == evidence.ActionPortMoved && e.OldPort == old && e.NewPort == moved)
	}
	if !recorded {
		t.Fatalf("the trail does not record the move from %d to %d:\n%s", old, moved, trail)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the squatter on port %d was connected to %d times", old, n)
	}
}

// TestSquattedPortSeals is the squatting attack on a restart without the
// opt-in: the trial whose SMTP port another process took is sealed
// (port_taken in up --json, trial info and its trail), so the token a
// squatter received writes nothing into it; the other trial is served.
func TestSquattedPortSeals(t *testing.T) {
	data := itest.ShortTempDir(t)
	first := itest.StartUp(t, "--data", data, "--trials", "2")
	victim, other := first.Bundle.Trials[0], first.Bundle.Trials[1]
	if code := first.Stop(t); code != 0 {
		t.Fatalf("up exited %d on SIGTERM", code)
	}
	squat, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(victim.SMTPPort))
	if err != nil {
		t.Fatalf("taking the trial's port %d: %v", victim.SMTPPort, err)
	}
	defer squat.Close()

	again := itest.StartUp(t, "--data", data)
	var got rpc.Bundle
	for _, b := range again.Bundle.Trials {
		if b.Namespace == victim.Namespace {
			got = b
		}
	}
	if got.SealedReason != rpc.SealPortTaken {
		t.Fatalf("up --json's bundle of the squatted trial: sealed_reason %q, want %q", got.SealedReason, rpc.SealPortTaken)
	}
	out, err := exec.Command(itest.Bin(t, "mail-plane"), "trial", "info", "--socket", again.Bundle.PlaneSocket,
		"--grant-file", again.Bundle.AdminGrantFile, "--json", victim.Namespace).Output()
	var info rpc.TrialInfo
	if err != nil || json.Unmarshal(out, &info) != nil || info.SealedReason != rpc.SealPortTaken || info.State != "sealed" {
		t.Fatalf("trial info: %s %v; want sealed, port_taken", out, err)
	}
	// What the squatter would do with the token it received.
	if code := (episode{victim}).post(t, "from the squatter"); code == http.StatusOK {
		t.Fatalf("POST /emails with the squatted trial's token: %d, want a refusal", code)
	}
	if code := (episode{other}).post(t, "the other trial"); code != http.StatusOK {
		t.Fatalf("the other trial's POST /emails: %d", code)
	}
	if err := smtpTo(other, other.SMTPPort, "other by smtp"); err != nil {
		t.Fatalf("the other trial's SMTP on its own port: %v", err)
	}
	if _, subjects := (episode{victim}).subjects(t, victim.ReadCapability); len(subjects) != 0 {
		t.Fatalf("the sealed trial holds %q", subjects)
	}
	var recorded bool
	sc := bufio.NewScanner(bytes.NewReader(export(t, again, victim.Namespace)))
	for sc.Scan() {
		var e evidence.Event
		json.Unmarshal(sc.Bytes(), &e)
		recorded = recorded || (e.Action == evidence.ActionSeal && e.Code == rpc.SealPortTaken)
	}
	if !recorded {
		t.Fatal("the trail does not record the seal with port_taken")
	}
	if !strings.Contains(again.Output(), "the trial is sealed") {
		t.Fatalf("the log does not say the trial is sealed:\n%s", again.Output())
	}
}
