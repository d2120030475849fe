package evidence

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/redact"
)

// testKey is a fixed signing key for these tests.
var testKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

// signed is lines followed by their head, signed with testKey.
func signed(t testing.TB, lines [][]byte, closed bool) []byte {
	t.Helper()
	last, err := Parse(lines[len(lines)-1])
	if err != nil {
		t.Fatal(err)
	}
	head, err := SignHead(Head{Namespace: last.Namespace, Seq: last.Seq, Hash: last.Hash, Closed: closed, Time: Stamp(time.Now())}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return join(append(append([][]byte{}, lines...), head))
}

// rechain renumbers and re-hashes events as an attacker would.
func rechain(t testing.TB, events []Event) [][]byte {
	t.Helper()
	var out [][]byte
	prev := Genesis
	for i := range events {
		line, err := Chain(&events[i], int64(i), prev)
		if err != nil {
			t.Fatal(err)
		}
		prev = events[i].Hash
		out = append(out, line)
	}
	return out
}

func parseAll(t testing.TB, lines [][]byte) []Event {
	var es []Event
	for _, l := range lines {
		e, err := Parse(l)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

// TestSignedHead: with the key, only the untouched trail and its head
// verify; every cut, drop, swap and re-hashed rewrite breaks, as does a
// closed trial's trail that does not end with its close.
func TestSignedHead(t *testing.T) {
	pub := testKey.Public().(ed25519.PublicKey)
	lines := trail(t, 6)
	good := signed(t, lines, false)
	res, err := Check(bytes.NewReader(good), pub)
	if err != nil || res.Events != 6 || res.Head == nil || res.Head.Seq != 6 {
		t.Fatalf("Check = %+v, %v", res, err)
	}
	head := splitHead(good)
	es := parseAll(t, lines)
	dropped := rechain(t, append(append([]Event{}, es[:2]...), es[3:]...))
	edited := append([]Event{}, es...)
	edited[4].Outcome = Refused
	otherPub, _, _ := ed25519.GenerateKey(nil)
	closing := append(append([]Event{}, es...), Event{Namespace: es[0].Namespace, Door: DoorPlane, Action: ActionClose, Outcome: Accepted, Time: es[0].Time})
	closedTrail := rechain(t, closing)
	for _, c := range []struct {
		name  string
		trail []byte
		key   ed25519.PublicKey
		want  string
	}{
		{"head cut", join(lines), pub, "no signed head"},
		{"last event cut", join(append(append([][]byte{}, lines[:5]...), head)), pub, "cut short or rewritten"},
		{"dropped, re-hashed", join(append(dropped, head)), pub, "cut short or rewritten"},
		{"edited, re-hashed", join(append(rechain(t, edited), head)), pub, "cut short or rewritten"},
		{"swapped", join(append(append([][]byte{}, lines[0], lines[2], lines[1]), append(lines[3:], head)...)), pub, "line 2:"},
		{"another key", good, otherPub, "signature does not verify"},
		{"a line after the head", append(append([]byte{}, good...), append(lines[0], '\n')...), pub, "after the signed head"},
		{"closed without its close", signed(t, lines, true), pub, "does not end with its close"},
		{"closed without its close, no key", signed(t, lines, true), nil, "does not end with its close"},
	} {
		_, err := Check(bytes.NewReader(c.trail), c.key)
		var br *Break
		if !errors.As(err, &br) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a break saying %q", c.name, err, c.want)
		}
	}
	if _, err := Check(bytes.NewReader(signed(t, closedTrail, true)), pub); err != nil {
		t.Errorf("a closed trail ending with its close: %v", err)
	}
	// Without a key, the chain alone: a re-hashed trail without its head
	// passes, which is why verify calls it unanchored.
	if res, err := Check(bytes.NewReader(join(dropped)), nil); err != nil || res.Head != nil {
		t.Errorf("unanchored check of a re-hashed trail: %+v %v", res, err)
	}
}

func splitHead(trail []byte) []byte {
	lines := bytes.Split(bytes.TrimSuffix(trail, []byte("\n")), []byte("\n"))
	return lines[len(lines)-1]
}

// TestParsePublicKey: base64 of 32 bytes, nothing else.
func TestParsePublicKey(t *testing.T) {
	pub := testKey.Public().(ed25519.PublicKey)
	if k, err := ParsePublicKey(" " + PublicKeyString(pub) + "\n"); err != nil || !k.Equal(pub) {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"", "AAAA", PublicKeyString(pub)[:40], PublicKeyString(append(pub, 0)), "not base64 at all!"} {
		if _, err := ParsePublicKey(bad); !errors.Is(err, ErrKeySyntax) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestHeadPassesRedaction: a signed head never looks like a secret to the
// redaction point, whatever its signature, so a redacted export still
// verifies.
func TestHeadPassesRedaction(t *testing.T) {
	for range 500 {
		_, key, _ := ed25519.GenerateKey(nil)
		head, err := SignHead(Head{Namespace: "trial-0123456789abcdef0123456789abcdef", Seq: 1, Hash: Genesis, Time: Stamp(time.Now())}, key)
		if err != nil {
			t.Fatal(err)
		}
		if redact.Text(string(head)) != string(head) {
			t.Fatalf("redaction changes %s", head)
		}
	}
}
