package sqlledger

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
)

// portTrial stores a trial named ns that owns port.
func portTrial(l *DB, ns string, port int) (Trial, error) {
	tr := &Trial{Profile: "candidate", MailAPIToken: digest("api " + ns), BootstrapToken: digest("boot " + ns), InboxToken: digest("inbox " + ns), SMTPPort: port}
	n := &Namespace{Name: ns, ReadCapability: digest("read " + ns), WriteCapability: digest("write " + ns), Tag: "wb-" + ns}
	err := l.CreateTrial(context.Background(), tr, n, nil)
	return *tr, err
}

// testPorts: a port is unique among a plane's open trials (a second trial
// on it is refused and nothing of it stored; the database's index refuses
// it too); a move takes the trial to its new port, is refused onto a port
// another trial owns, and is recorded in the trail with both ports. On
// PostgreSQL, two planes use one port number each for their own trial:
// each finds, restores and moves only its own.
func testPorts(t *testing.T) {
	ctx := context.Background()
	dsn := target(t)
	a := openAt(t, dsn)
	t.Cleanup(func() { a.Close() })
	if err := a.SetPlane(ctx, "plane-a"); err != nil {
		t.Fatal(err)
	}
	first, err := portTrial(a, "first", 40001)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := portTrial(a, "second", 40001); !errors.Is(err, ErrPortTaken) {
		t.Fatalf("a second trial on an owned port: %v; want ErrPortTaken", err)
	}
	if _, err := a.Namespace(ctx, "second"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused trial's namespace: %v; want none stored", err)
	}
	_, err = a.write.ExecContext(ctx, `INSERT INTO trials (profile, namespace, mail_api_token, bootstrap_token, inbox_token, created_at, smtp_port, plane) VALUES ('candidate', 'raw', ?, ?, ?, 0, 40001, 'plane-a')`,
		digest("x"), digest("y"), digest("z"))
	if err == nil {
		t.Fatal("the database took a second open trial on one plane's port")
	}

	moved, err := a.MovePort(ctx, 40001, 40002)
	if err != nil || moved.ID != first.ID || moved.SMTPPort != 40002 {
		t.Fatalf("move: %+v %v", moved, err)
	}
	if got, err := a.TrialByPort(ctx, 40002); err != nil || got.ID != first.ID {
		t.Fatalf("the new port finds %+v %v", got, err)
	}
	if _, err := a.TrialByPort(ctx, 40001); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the old port still finds a trial: %v", err)
	}
	if _, err := portTrial(a, "third", 40003); err != nil {
		t.Fatal(err)
	}
	if _, err := a.MovePort(ctx, 40003, 40002); !errors.Is(err, ErrPortTaken) {
		t.Fatalf("a move onto an owned port: %v; want ErrPortTaken", err)
	}
	if _, err := a.MovePort(ctx, 49999, 40005); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a move of a port no trial owns: %v; want ErrNotFound", err)
	}
	lines, err := a.Events(ctx, "first", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range lines {
		e, err := evidence.Parse([]byte(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		found = found || (e.Action == evidence.ActionPortMoved && e.OldPort == 40001 && e.NewPort == 40002 && e.Outcome == evidence.Accepted)
	}
	if !found {
		t.Fatalf("the trail has no port_moved event from 40001 to 40002: %q", lines)
	}
	if ports, err := a.SMTPPorts(ctx); err != nil || !slices.Equal(ports, []int{40002, 40003}) {
		t.Fatalf("plane a's ports: %v %v", ports, err)
	}

	// A trial stored before planes had identities (plane NULL): on SQLite
	// the plane's own once it starts; on PostgreSQL no plane's, so it
	// owns no port at all (never advertised, never restored).
	var legacy int64
	if err := a.write.QueryRowContext(ctx, `INSERT INTO trials (profile, namespace, mail_api_token, bootstrap_token, inbox_token, created_at, smtp_port) VALUES ('candidate', 'legacy', ?, ?, ?, 0, 40077) RETURNING id`,
		digest("l1"), digest("l2"), digest("l3")).Scan(&legacy); err != nil {
		t.Fatal(err)
	}
	if err := a.SetPlane(ctx, "plane-a"); err != nil {
		t.Fatal(err)
	}
	want, wantPort := []int{40002, 40003, 40077}, 40077
	if pg != nil {
		want, wantPort = []int{40002, 40003}, 0
	}
	if ports, err := a.SMTPPorts(ctx); err != nil || !slices.Equal(ports, want) {
		t.Fatalf("plane a's ports with a legacy trial: %v %v; want %v", ports, err, want)
	}
	if got, err := a.Trial(ctx, legacy); err != nil || got.SMTPPort != wantPort {
		t.Fatalf("the legacy trial: %+v %v; want port %d", got, err, wantPort)
	}
	if pg == nil {
		return
	}

	b := openAt(t, dsn)
	t.Cleanup(func() { b.Close() })
	if err := b.SetPlane(ctx, "plane-b"); err != nil {
		t.Fatal(err)
	}
	other, err := portTrial(b, "other", 40002)
	if err != nil {
		t.Fatalf("plane b's trial on the port number plane a uses: %v", err)
	}
	if got, err := a.TrialByPort(ctx, 40002); err != nil || got.ID != first.ID {
		t.Fatalf("plane a's port 40002 finds %+v %v; want its own trial", got, err)
	}
	if got, err := b.TrialByPort(ctx, 40002); err != nil || got.ID != other.ID || got.Plane != "plane-b" {
		t.Fatalf("plane b's port 40002 finds %+v %v; want its own trial", got, err)
	}
	if _, err := b.TrialByPort(ctx, 40003); !errors.Is(err, ErrNotFound) {
		t.Fatalf("plane b finds plane a's trial by port: %v", err)
	}
	if _, err := b.MovePort(ctx, 40003, 40009); !errors.Is(err, ErrNotFound) {
		t.Fatalf("plane b moves plane a's trial: %v", err)
	}
	if ports, err := b.SMTPPorts(ctx); err != nil || !slices.Equal(ports, []int{40002}) {
		t.Fatalf("plane b restores %v %v; want only its own port", ports, err)
	}
	if ports, err := a.SMTPPorts(ctx); err != nil || !slices.Equal(ports, []int{40002, 40003}) {
		t.Fatalf("plane a restores %v %v; want only its own ports", ports, err)
	}
}

// testKeyCheck: the first check value given is kept; a later, different
// one is answered with the first.
func testKeyCheck(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	for _, c := range []struct{ give, want string }{{"ses_1", "ses_1"}, {"ses_2", "ses_1"}, {"ses_1", "ses_1"}} {
		if got, err := l.KeyCheck(ctx, "ses_key_check", c.give); err != nil || got != c.want {
			t.Fatalf("KeyCheck(%s) = %q, %v; want %q", c.give, got, err, c.want)
		}
	}
}
