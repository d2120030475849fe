package sqlledger

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// testBodies: the bodies the ledger keeps come back byte for byte, from
// their own namespace only, and from a ledger reopened on the same data
// (a restarted plane).
func testBodies(t *testing.T) {
	ctx := context.Background()
	where := target(t)
	l := openAt(t, where)
	trial(t, l, "a")
	trial(t, l, "b")
	all := make([]byte, 0, 4*256)
	for range 4 {
		for b := range 256 {
			all = append(all, byte(b))
		}
	}
	large := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range large {
		large[i] = "\r\n.\x00a\xff"[rng.IntN(6)]
	}
	cases := map[string][]byte{
		"crlf":      []byte("Subject: crlf\r\n\r\nHello\r\nWorld\r\n"),
		"bare cr":   []byte("Subject: cr\r\n\r\nends with two CRs\r\r"),
		"binary":    append([]byte("Subject: binary\r\n\r\n"), all...),
		"empty":     {},
		"1 MiB":     large,
		"dot lines": []byte("Subject: dots\r\n\r\n.\r\n..\r\n.leading dot\r\n"),
	}
	refs := map[string]string{}
	for name, raw := range cases {
		o := offer("a", len(raw), "", "", 0, 0)
		o.Ref, o.Body = "", raw
		e, _, err := l.Accept(ctx, o)
		if err != nil {
			t.Fatalf("%s: accept: %v", name, err)
		}
		if got, err := l.Body(ctx, "a", e.Ref); err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("%s: body: %v (equal: %v)", name, err, bytes.Equal(got, raw))
		}
		refs[name] = e.Ref
	}
	// b holds no message: none of a's refs opens anything there.
	for name, ref := range refs {
		if got, err := l.Body(ctx, "b", ref); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a's %s read as b's: %v, %d bytes; want ErrNotFound", name, err, len(got))
		}
	}
	for _, bad := range []string{"", "x", "999999", "-1", "1.0", " 1", "\x00"} {
		if _, err := l.Body(ctx, "a", bad); !errors.Is(err, ErrNotFound) {
			t.Fatalf("body %q: %v; want ErrNotFound", bad, err)
		}
	}
	// An offer with neither body nor ref stores nothing.
	o := offer("a", 1, "", "", 0, 0)
	o.Ref = ""
	if _, _, err := l.Accept(ctx, o); !errors.Is(err, errNoBody) {
		t.Fatalf("an offer without a body: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openAt(t, where)
	defer l.Close()
	for name, raw := range cases {
		if got, err := l.Body(ctx, "a", refs[name]); err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("%s after reopening: %v (equal: %v)", name, err, bytes.Equal(got, raw))
		}
	}
}

// testIndexes: a message's index is stored under its ref in the accept's
// transaction, for a body the ledger keeps and for one an external store
// keeps alike; it is read from its own namespace only, survives a
// reopened ledger, and goes with its trial. A message accepted without
// one (as older planes stored them) has none.
func testIndexes(t *testing.T) {
	ctx := context.Background()
	where := target(t)
	l := openAt(t, where)
	tr, _ := trial(t, l, "a")
	trial(t, l, "b")
	inLedger := offer("a", 4, "", "", 0, 0)
	inLedger.Ref, inLedger.Body, inLedger.Index = "", []byte("body"), []byte("index of the ledger's body")
	external := offer("a", 4, "", "", 0, 0)
	external.Ref, external.Index = "mailpit-id", []byte("index of Mailpit's body")
	older := offer("a", 4, "", "", 0, 0)
	older.Ref, older.Body = "", []byte("body")
	want := map[string][]byte{}
	for _, o := range []*Offer{inLedger, external, older} {
		e, _, err := l.Accept(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		want[e.Ref] = o.Index
	}
	check := func(l *DB) {
		t.Helper()
		for ref, index := range want {
			got, err := l.Index(ctx, "a", ref)
			if index == nil {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("ref %s, accepted with no index: %q, %v", ref, got, err)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, index) {
				t.Fatalf("ref %s: %q, %v; want %q", ref, got, err, index)
			}
			if got, err := l.Index(ctx, "b", ref); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a's ref %s read as b's: %q, %v", ref, got, err)
			}
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openAt(t, where)
	defer l.Close()
	check(l)
	if _, _, err := l.CloseTrial(ctx, tr.ID, "close", false); err != nil {
		t.Fatal(err)
	}
	for ref := range want {
		if got, err := l.Index(ctx, "a", ref); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ref %s after its trial closed: %q, %v", ref, got, err)
		}
	}
}
