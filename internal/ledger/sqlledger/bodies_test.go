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

// testOlderRows: a message stored before bodies and indexes were columns
// of its row (its body in bodies, its index in parsed) reads as it did,
// beside one stored now, until its trial closes.
func testOlderRows(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	tr, _ := trial(t, l, "a")
	for _, q := range []struct {
		query string
		args  []any
	}{
		{`INSERT INTO messages (namespace, seq, uuid, envelope_from, recipients, size, ref, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{"a", 1, "u", "a@example.com", `["b@example.com"]`, 9, "1", 0}},
		{`INSERT INTO bodies (namespace, seq, raw) VALUES (?, ?, ?)`, []any{"a", 1, []byte("old body")}},
		{`INSERT INTO parsed (namespace, ref, data) VALUES (?, ?, ?)`, []any{"a", "1", []byte("old index")}},
		{`UPDATE namespaces SET next_seq = 2, message_count = 1 WHERE name = ?`, []any{"a"}},
	} {
		if _, err := l.write.ExecContext(ctx, l.d.text(q.query), q.args...); err != nil {
			t.Fatal(err)
		}
	}
	o := offer("a", 8, "", "", 0, 0)
	o.Ref, o.Body, o.Index = "", []byte("new body"), []byte("new index")
	e, _, err := l.Accept(ctx, o)
	if err != nil || e.Ref != "2" {
		t.Fatalf("accept: %+v %v", e, err)
	}
	for ref, want := range map[string][2]string{"1": {"old body", "old index"}, "2": {"new body", "new index"}} {
		if got, err := l.Body(ctx, "a", ref); err != nil || string(got) != want[0] {
			t.Fatalf("body %s: %q %v, want %q", ref, got, err, want[0])
		}
		if got, err := l.Index(ctx, "a", ref); err != nil || string(got) != want[1] {
			t.Fatalf("index %s: %q %v, want %q", ref, got, err, want[1])
		}
	}
	if _, _, err := l.CloseTrial(ctx, tr.ID, "close", false); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"1", "2"} {
		if got, err := l.Body(ctx, "a", ref); !errors.Is(err, ErrNotFound) {
			t.Fatalf("body %s after its trial closed: %q %v", ref, got, err)
		}
		if got, err := l.Index(ctx, "a", ref); !errors.Is(err, ErrNotFound) {
			t.Fatalf("index %s after its trial closed: %q %v", ref, got, err)
		}
	}
}

// TestMigrateMessageColumns: a database whose messages table predates the
// body and index columns opens, gains them, and reads the mail it held.
func TestMigrateMessageColumns(t *testing.T) {
	l := openOld(t,
		`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
		`INSERT INTO meta VALUES ('schema', '3')`,
		`CREATE TABLE messages (namespace TEXT NOT NULL, seq INTEGER NOT NULL, uuid TEXT NOT NULL, envelope_from TEXT NOT NULL,
			recipients TEXT NOT NULL, size INTEGER NOT NULL, ref TEXT NOT NULL, received_at INTEGER NOT NULL, fault TEXT, PRIMARY KEY (namespace, seq))`,
		`CREATE TABLE bodies (namespace TEXT NOT NULL, seq INTEGER NOT NULL, raw BLOB NOT NULL, PRIMARY KEY (namespace, seq)) WITHOUT ROWID`,
		`CREATE TABLE parsed (namespace TEXT NOT NULL, ref TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (namespace, ref)) WITHOUT ROWID`,
		`INSERT INTO messages VALUES ('a', 1, 'u', 'a@example.com', '["b@example.com"]', 8, '1', 0, NULL)`,
		`INSERT INTO bodies VALUES ('a', 1, x'6f6c6420626f6479')`,
		`INSERT INTO parsed VALUES ('a', '1', x'6f6c6420696e646578')`,
	)
	if got, err := l.Body(context.Background(), "a", "1"); err != nil || string(got) != "old body" {
		t.Fatalf("body after migration: %q %v", got, err)
	}
	if got, err := l.Index(context.Background(), "a", "1"); err != nil || string(got) != "old index" {
		t.Fatalf("index after migration: %q %v", got, err)
	}
	es, err := l.Entries(context.Background(), "a", 0)
	if err != nil || len(es) != 1 || es[0].Ref != "1" {
		t.Fatalf("entries after migration: %+v %v", es, err)
	}
}
