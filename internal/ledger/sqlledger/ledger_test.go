package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/pgtest"
)

// TestEngines runs the ledger's tests on each engine: SQLite, and a real
// PostgreSQL (a new database for each ledger).
func TestEngines(t *testing.T) {
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Sentinels", testSentinels}, {"IdempotentReplay", testIdempotentReplay}, {"GroupCommit", testGroupCommit},
		{"CloseTrial", testCloseTrial}, {"Lookups", testLookups}, {"TrailWithTheSend", testTrailWithTheSend},
		{"TrailBudget", testTrailBudget}, {"AgentBudget", testAgentBudget}, {"KeyCheck", testKeyCheck}, {"Ports", testPorts}, {"NetnsDoors", testNetnsDoors},
		{"Faults", testFaults}, {"Console", testConsole}, {"Bodies", testBodies}, {"Indexes", testIndexes}, {"OlderRows", testOlderRows}, {"DeferredBatches", testDeferredBatches},
		{"Unavailable", testUnavailable}, {"Webhooks", testWebhooks}, {"WebhookShares", testWebhookShares}, {"ConcurrentTakes", testConcurrentTakes}, {"BouncesInBatches", testBouncesInBatches},
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			tests := tests
			if engine == "postgres" {
				pg = pgtest.Start(t)
				defer func() { pg = nil }()
				tests = append(tests, struct {
					name string
					fn   func(*testing.T)
				}{"Planes", testPlanes}, struct {
					name string
					fn   func(*testing.T)
				}{"FaultsPlanes", testFaultsPlanes}, struct {
					name string
					fn   func(*testing.T)
				}{"WebhookSharePlanes", testWebhookSharePlanes})
			}
			for _, tc := range tests {
				t.Run(tc.name, tc.fn)
			}
		})
	}
}

// pg is the PostgreSQL of TestEngines' postgres run; nil: SQLite.
var pg *pgtest.Server

// open opens a new, empty ledger on the engine under test.
func open(t *testing.T) *DB {
	t.Helper()
	l := openAt(t, target(t))
	t.Cleanup(func() { l.Close() })
	return l
}

// target is where a new ledger lives: a directory or a database's DSN.
func target(t *testing.T) string {
	if pg != nil {
		return pg.DSN()
	}
	return t.TempDir()
}

// openAt opens the ledger at target, which another ledger may share.
func openAt(t *testing.T, target string) *DB {
	t.Helper()
	open := Open
	if pg != nil {
		open = OpenPostgres
	}
	l, err := open(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func digest(s string) []byte {
	d := make([]byte, 32)
	copy(d, s)
	return d
}

// trial stores a trial named ns with one writer grant, and returns it.
func trial(t *testing.T, l *DB, ns string) (Trial, Namespace) {
	t.Helper()
	tr := &Trial{Profile: "candidate", MailAPIToken: digest("api " + ns), BootstrapToken: digest("boot " + ns), InboxToken: digest("inbox " + ns)}
	n := &Namespace{Name: ns, ReadCapability: digest("read " + ns), WriteCapability: digest("write " + ns), Tag: "wb-" + ns}
	if err := l.CreateTrial(context.Background(), tr, n, []Grant{{Digest: digest("grant " + ns), Role: "writer"}}); err != nil {
		t.Fatal(err)
	}
	return *tr, *n
}

func offer(ns string, size int, key, fp string, maxMsgs, maxBytes int64) *Offer {
	return &Offer{Namespace: ns, UUID: "u", From: "a@example.com", To: []string{"B@example.com"}, Size: size,
		IdempotencyKey: key, Fingerprint: fp, MaxMessages: maxMsgs, MaxBytes: maxBytes,
		Ref: "ref"}
}

// testSentinels: each refusal and each absence is its sentinel, so that the
// plane can tell policy from an outage with errors.Is.
func testSentinels(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	tr, _ := trial(t, l, "a")
	trial(t, l, "full")
	trial(t, l, "sealed")
	if err := l.Seal(ctx, "sealed"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Accept(ctx, offer("full", 10, "", "", 1, 0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Accept(ctx, offer("a", 10, "k", "fp1", 0, 0)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"unknown trial", func() error { _, err := l.Trial(ctx, 999); return err }(), ErrNotFound},
		{"unknown namespace", func() error { _, err := l.Namespace(ctx, "nope"); return err }(), ErrNotFound},
		{"unknown grant", func() error { _, err := l.Grant(ctx, digest("nope")); return err }(), ErrNotFound},
		{"unknown entry", func() error { _, err := l.Entry(ctx, "a", 99); return err }(), ErrNotFound},
		{"unknown credential", func() error { _, err := l.TrialBy(ctx, ByMailAPIToken, digest("nope")); return err }(), ErrNotFound},
		{"unowned port", func() error { _, err := l.TrialByPort(ctx, 4242); return err }(), ErrNotFound},
		{"namespace taken", l.CreateTrial(ctx, &Trial{Profile: "candidate", MailAPIToken: digest("x"), BootstrapToken: digest("y"), InboxToken: digest("z")},
			&Namespace{Name: "a", Tag: "t"}, nil), ErrExists},
		{"sealed", func() error { _, _, err := l.Accept(ctx, offer("sealed", 1, "", "", 0, 0)); return err }(), ErrNotActive},
		{"message quota", func() error { _, _, err := l.Accept(ctx, offer("full", 1, "", "", 1, 0)); return err }(), ErrCapacity},
		{"byte quota", func() error { _, _, err := l.Accept(ctx, offer("a", 100, "", "", 0, 50)); return err }(), ErrCapacity},
		{"key reused", func() error { _, _, err := l.Accept(ctx, offer("a", 10, "k", "fp2", 0, 0)); return err }(), ErrIdempotencyConflict},
		{"closed trial", func() error { _, _, err := l.CloseTrial(ctx, 999, "close", false); return err }(), ErrNotFound},
		{"accept into a closed namespace", func() error {
			if _, _, err := l.CloseTrial(ctx, tr.ID, "close", false); err != nil {
				return err
			}
			_, _, err := l.Accept(ctx, offer("a", 1, "", "", 0, 0))
			return err
		}(), ErrNotFound},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
}

// testIdempotentReplay: a repeated key with the same payload replays the
// first entry, even once the quota is full.
func testIdempotentReplay(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	trial(t, l, "a")
	first, replayed, err := l.Accept(ctx, offer("a", 10, "k", "fp", 1, 0))
	if err != nil || replayed {
		t.Fatalf("first: %v %v", replayed, err)
	}
	again, replayed, err := l.Accept(ctx, offer("a", 10, "k", "fp", 1, 0))
	if err != nil || !replayed || again.Seq != first.Seq {
		t.Fatalf("replay: %+v %v %v", again, replayed, err)
	}
}

// testGroupCommit: offers committed together stay independent. One that is
// refused, or whose caller gave up, undoes only its own writes; every
// accepted one is durable with its own seq.
func testGroupCommit(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	trial(t, l, "a")
	const n = 200
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := offer("a", 1, fmt.Sprint("key", i%150), fmt.Sprint("fp", i), 0, 0)
			c := ctx
			if i%20 == 0 {
				cancelled, cancel := context.WithCancel(ctx)
				cancel()
				c = cancelled
			}
			_, _, results[i] = l.Accept(c, o)
		}()
	}
	wg.Wait()
	accepted, conflicts, cancelled := 0, 0, 0
	for _, err := range results {
		switch {
		case err == nil:
			accepted++
		case errors.Is(err, ErrIdempotencyConflict):
			conflicts++
		case errors.Is(err, context.Canceled):
			cancelled++
		default:
			t.Fatalf("unexpected: %v", err)
		}
	}
	es, err := l.Entries(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled != n/20 || len(es) != accepted || accepted+conflicts+cancelled != n {
		t.Fatalf("accepted %d, conflicts %d, cancelled %d; %d entries", accepted, conflicts, cancelled, len(es))
	}
	for i, e := range es {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d: seqs must be 1, 2, 3… with no gap", i, e.Seq)
		}
	}
	ns, _ := l.Namespace(ctx, "a")
	if ns.MessageCount != int64(accepted) || ns.NextSeq != int64(accepted+1) {
		t.Fatalf("counters %d/%d after %d accepted", ns.MessageCount, ns.NextSeq, accepted)
	}
}

// testCloseTrial deletes a trial whole, its bodies with its index in the
// same transaction, and queues an external store's purge.
func testCloseTrial(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	tr, ns := trial(t, l, "a")
	trial(t, l, "b")
	kept := map[string]string{}
	for _, name := range []string{"a", "b"} {
		o := offer(name, 5, "k", "fp", 0, 0)
		o.Ref, o.Body = "", []byte("body of "+name)
		e, _, err := l.Accept(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err := l.Body(ctx, name, e.Ref); err != nil || string(raw) != "body of "+name {
			t.Fatalf("body of %s: %q %v", name, raw, err)
		}
		kept[name] = e.Ref
	}
	got, nss, err := l.CloseTrial(ctx, tr.ID, "close", true)
	if err != nil || got.ID != tr.ID || len(nss) != 1 {
		t.Fatalf("close: %+v %v %v", got, nss, err)
	}
	for what, err := range map[string]error{
		"trial":      func() error { _, err := l.Trial(ctx, tr.ID); return err }(),
		"namespace":  func() error { _, err := l.Namespace(ctx, "a"); return err }(),
		"grant":      func() error { _, err := l.Grant(ctx, digest("grant a")); return err }(),
		"entry":      func() error { _, err := l.Entry(ctx, "a", 1); return err }(),
		"body":       func() error { _, err := l.Body(ctx, "a", kept["a"]); return err }(),
		"credential": func() error { _, err := l.TrialBy(ctx, ByInboxToken, tr.InboxToken); return err }(),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s of a closed trial: %v", what, err)
		}
	}
	if _, err := l.Namespace(ctx, "b"); err != nil {
		t.Fatalf("the other trial: %v", err)
	}
	if raw, err := l.Body(ctx, "b", kept["b"]); err != nil || string(raw) != "body of b" {
		t.Fatalf("the other trial's body: %q %v", raw, err)
	}
	queued, err := l.Purges(ctx)
	if err != nil || len(queued) != 1 || queued[0].Tag != ns.Tag {
		t.Fatalf("purge queue: %+v %v", queued, err)
	}
	if err := l.Purged(ctx, ns.Tag); err != nil {
		t.Fatal(err)
	}
	if queued, _ := l.Purges(ctx); len(queued) != 0 {
		t.Fatalf("purged, still queued: %+v", queued)
	}
}

// testLookups: a trial is found by each credential's digest and by its
// port; expiry is listed.
func testLookups(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	tr := &Trial{Profile: "candidate", MailAPIToken: digest("api"), BootstrapToken: digest("boot"), InboxToken: digest("inbox"),
		Expires: time.Now().Add(-time.Second), SMTPPort: 4321}
	if err := l.CreateTrial(ctx, tr, &Namespace{Name: "a", WriteCapability: digest("write"), Tag: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	for kind, d := range map[Credential][]byte{ByMailAPIToken: digest("api"), ByBootstrapToken: digest("boot"), ByInboxToken: digest("inbox"), ByWriteCapability: digest("write")} {
		if got, err := l.TrialBy(ctx, kind, d); err != nil || got.ID != tr.ID {
			t.Errorf("by %d: %+v %v", kind, got, err)
		}
	}
	if got, err := l.TrialByPort(ctx, 4321); err != nil || got.ID != tr.ID || !got.Expired(time.Now()) {
		t.Fatalf("by port: %+v %v", got, err)
	}
	if ex, err := l.Expired(ctx, time.Now(), 10); err != nil || len(ex) != 1 {
		t.Fatalf("expired: %+v %v", ex, err)
	}
	if ports, err := l.SMTPPorts(ctx); err != nil || len(ports) != 1 || ports[0] != 4321 {
		t.Fatalf("ports: %v %v", ports, err)
	}
}

// openOld opens the ledger over a database that stmts made, as an older
// plane left it: what the migrations start from.
func openOld(t *testing.T, stmts ...string) *DB {
	t.Helper()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "mailplane.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	return openSQLite(t, dir)
}

// openSQLite opens the embedded ledger in dir, closed when the test ends.
func openSQLite(tb testing.TB, dir string) *DB {
	tb.Helper()
	l, err := Open(context.Background(), dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// TestMigrateFromSchema1: a database of schema 1 opens, gains the new
// columns, keeps its trials, and hides the trials schema 1 destroyed.
func TestMigrateFromSchema1(t *testing.T) {
	l := openOld(t,
		`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
		`INSERT INTO meta VALUES ('schema', '1')`,
		`CREATE TABLE trials (id INTEGER PRIMARY KEY, profile TEXT NOT NULL, namespace TEXT NOT NULL, mail_api_token BLOB NOT NULL,
			bootstrap_token BLOB NOT NULL, inbox_token BLOB NOT NULL, destroyed INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL)`,
		`INSERT INTO trials VALUES (1, 'candidate', 'kept', x'01', x'02', x'03', 0, 0), (2, 'candidate', 'gone', x'04', x'05', x'06', 1, 0)`,
	)
	ts, err := l.Trials(context.Background(), 0, 10)
	if err != nil || len(ts) != 1 || ts[0].Namespace != "kept" {
		t.Fatalf("trials after migration: %+v %v", ts, err)
	}
}
