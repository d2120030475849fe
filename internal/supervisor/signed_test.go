package supervisor_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// rehash is what an attacker with a kept trail runs to hide an edit from
// the hash chain: it renumbers the events, recomputes every hash and prev,
// and keeps the last line (the signed head) as it is, if asked to.
const rehash = `
import hashlib, json, sys
keep_head = sys.argv[1] == "keep-head"
lines = [l for l in sys.stdin.read().split("\n") if l]
head = lines.pop() if lines[-1].startswith('{"head":') else None
prev, out = "sha256_" + "0" * 64, []
for i, l in enumerate(lines):
    e = json.loads(l)
    e["seq"], e["prev"] = i + 1, prev
    e.pop("hash", None)
    body = json.dumps(e, separators=(",", ":"), ensure_ascii=False)
    prev = "sha256_" + hashlib.sha256(body.encode()).hexdigest()
    e["hash"] = prev
    out.append(json.dumps(e, separators=(",", ":"), ensure_ascii=False))
if keep_head and head:
    out.append(head)
sys.stdout.write("\n".join(out) + "\n")
`

// TestEvidenceSignedTrail: an export ends with a head the plane signed
// with the key its bundles name (kept 0600 in its data directory), and
// mail-plane evidence verify --key passes the untouched export and fails
// every cut, deletion (chain recomputed, as an attacker would), swap and
// rewrite, and a closed trial's export without its close. Without --key,
// verify says the chain is unanchored: the recomputed chain passes there.
func TestEvidenceSignedTrail(t *testing.T) {
	s := itest.StartUp(t, "--trials", "0")
	admin := s.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := s.Bundle.EvidencePublicKey
	if _, err := evidence.ParsePublicKey(key); err != nil {
		t.Fatalf("up --json's evidence_public_key %q: %v", key, err)
	}
	keyPath := filepath.Join(s.Bundle.DataDir, "plane", evidence.KeyFile)
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the plane's evidence key %s: %v %v; want mode 0600", keyPath, fi, err)
	}
	b, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if b.EvidencePublicKey != key {
		t.Fatalf("trial.open's evidence_public_key %q, up's %q", b.EvidencePublicKey, key)
	}
	e := episode{b}
	gw := mailclient.New(s.Bundle.APIURL, b.Namespace, b.ReadCapability)
	for i := range 3 {
		if code := e.post(t, "Hello"); code != 200 {
			t.Fatalf("send %d: %d", i, code)
		}
		if _, err := gw.List(ctx, mailclient.Query{}); err != nil {
			t.Fatal(err)
		}
	}
	keyFile := filepath.Join(t.TempDir(), "evidence.pub")
	os.WriteFile(keyFile, []byte(key+"\n"), 0o644)
	dir := t.TempDir()
	verify := func(content []byte, args ...string) (int, string) {
		f := filepath.Join(dir, "trail.jsonl")
		os.WriteFile(f, content, 0o600)
		return run(t, exec.Command(itest.Bin(t, "mail-plane"), append(append([]string{"evidence", "verify"}, args...), f)...))
	}
	want := func(what string, content []byte, code int, out string, args ...string) {
		t.Helper()
		got, msg := verify(content, args...)
		if got != code || !strings.Contains(msg, out) {
			t.Errorf("%s: verify %v exit %d %q; want exit %d saying %q", what, args, got, msg, code, out)
		}
	}

	open := export(t, s, b.Namespace)
	lines := splitLines(open)
	if !evidence.IsHead(lines[len(lines)-1]) || len(lines) < 8 {
		t.Fatalf("the export does not end with a head:\n%s", open)
	}
	want("untouched", open, 0, "head signed by the key", "--key", key)
	want("untouched, key in a file", open, 0, "head signed by the key", "--key", keyFile)
	want("untouched, no key", open, 0, "unanchored")
	want("last line cut (the head)", join(lines[:len(lines)-1]), 1, "no signed head", "--key", key)
	want("last two lines cut", join(lines[:len(lines)-2]), 1, "no signed head", "--key", key)
	events := lines[:len(lines)-1]
	head := lines[len(lines)-1]
	want("events cut, head kept", join(append(clone(events[:len(events)-2]), head)), 1, "cut short or rewritten", "--key", key)
	dropped := attack(t, join(append(append(clone(events[:3]), events[4:]...), head)), "keep-head")
	// Without a key, the same attack (dropping the head it cannot forge)
	// passes: that is what "unanchored" means.
	want("one event deleted, chain recomputed, head dropped, no key", attack(t, join(append(clone(events[:3]), events[4:]...)), "drop-head"), 0, "unanchored")
	want("one event deleted, chain recomputed", dropped, 1, "cut short or rewritten", "--key", key)
	want("one event deleted, chain recomputed, head dropped", attack(t, join(append(clone(events[:3]), events[4:]...)), "drop-head"), 1, "no signed head", "--key", key)
	swapped := append(clone(lines[:2]), lines[3], lines[2])
	swapped = append(swapped, lines[4:]...)
	want("two events swapped", join(swapped), 1, "line 3:", "--key", key)
	want("two events swapped, chain recomputed", attack(t, join(swapped), "keep-head"), 1, "cut short or rewritten", "--key", key)
	edited := bytes.Replace(open, []byte(`"outcome":"accepted"`), []byte(`"outcome":"refused"`), 1)
	want("an event rewritten, chain recomputed", attack(t, edited, "keep-head"), 1, "cut short or rewritten", "--key", key)
	otherPub, _, _ := ed25519.GenerateKey(nil)
	other := evidence.PublicKeyString(otherPub)
	want("another key", open, 1, "signature does not verify", "--key", other)
	want("an event after the head", join(append(clone(lines), lines[1])), 1, "after the signed head", "--key", key)

	// Bad keys are usage errors.
	junk := filepath.Join(t.TempDir(), "junk")
	os.WriteFile(junk, []byte("not a key\n"), 0o600)
	for _, k := range []string{"not-a-key", "AAAA", filepath.Join(t.TempDir(), "missing"), junk} {
		want("--key "+k, open, 2, "--key:", "--key", k)
	}

	// A closed trial: its export ends with the close, and the head says
	// closed; without the close (rehashed, head kept or dropped) it fails.
	if err := admin.TrialClose(ctx, b.Namespace); err != nil {
		t.Fatal(err)
	}
	closed := export(t, s, b.Namespace)
	lines = splitLines(closed)
	h, err := evidence.ParseHead(lines[len(lines)-1])
	if err != nil || !h.Closed {
		t.Fatalf("the closed trial's head %+v: %v", h, err)
	}
	want("closed, untouched", closed, 0, "(trial closed)", "--key", key)
	noClose := append(clone(lines[:len(lines)-2]), lines[len(lines)-1])
	want("closed, close event cut", join(noClose), 1, "cut short or rewritten", "--key", key)
	want("closed, close event cut, chain recomputed", attack(t, join(noClose), "keep-head"), 1, "cut short or rewritten", "--key", key)
	want("closed, close event and head cut", join(lines[:len(lines)-2]), 1, "no signed head", "--key", key)
}

// attack runs the rehash script over a trail, as an attacker would.
func attack(t *testing.T, trail []byte, how string) []byte {
	t.Helper()
	cmd := exec.Command("python3", "-c", rehash, how)
	cmd.Stdin = bytes.NewReader(trail)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rehash: %v", err)
	}
	return out
}

// run runs cmd and returns its exit code and combined output.
func run(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func splitLines(b []byte) [][]byte {
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

func join(ls [][]byte) []byte { return append(bytes.Join(ls, []byte("\n")), '\n') }

func clone(ls [][]byte) [][]byte { return append([][]byte{}, ls...) }
