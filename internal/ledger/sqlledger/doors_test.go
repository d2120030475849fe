package sqlledger

import (
	"context"
	"errors"
	"testing"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// testNetnsDoors: two trials' doors with the same port numbers (in
// different namespaces) are told apart by key; both are listed for a
// restart; closing one trial forgets its door and only its.
func testNetnsDoors(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	var trials []Trial
	for _, name := range []string{"a", "b"} {
		tr := &Trial{Profile: "candidate", MailAPIToken: digest("api " + name), BootstrapToken: digest("boot " + name), InboxToken: digest("inbox " + name),
			Door: &NetnsDoor{Key: "key-" + name, Netns: "/run/netns/" + name, HTTPPort: 8080, SMTPPort: 2525, SMTPTLSPort: 4650}}
		if err := l.CreateTrial(ctx, tr, &Namespace{Name: name, Tag: "t-" + name}, nil); err != nil {
			t.Fatal(err)
		}
		trials = append(trials, *tr)
	}
	for i, key := range []string{"key-a", "key-b"} {
		if got, err := l.TrialByDoor(ctx, key); err != nil || got.ID != trials[i].ID || got.SMTPPort != 0 {
			t.Fatalf("by door %s: %+v %v", key, got, err)
		}
	}
	if _, err := l.TrialByDoor(ctx, "key-c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown door: %v", err)
	}
	ds, err := l.NetnsDoors(ctx)
	if err != nil || len(ds) != 2 || ds[0].Namespace != "a" || ds[1].Netns != "/run/netns/b" || ds[1].SMTPTLSPort != 4650 || ds[0].TrialID != trials[0].ID {
		t.Fatalf("doors: %+v %v", ds, err)
	}
	if _, _, err := l.CloseTrial(ctx, trials[0].ID, "close", false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TrialByDoor(ctx, "key-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a closed trial's door: %v", err)
	}
	if ds, err := l.NetnsDoors(ctx); err != nil || len(ds) != 1 || ds[0].Key != "key-b" {
		t.Fatalf("doors after a close: %+v %v", ds, err)
	}
}
