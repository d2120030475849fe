package sqlledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// testPlanes: ledgers of several planes on one PostgreSQL database. They
// start at once on a new database (the migration lock); a trial made
// through one is used through all; the quota and an idempotency key hold
// across them; a commit through one is announced to another's Watch; two
// planes closing one trial at once close it once.
func testPlanes(t *testing.T) {
	ctx := context.Background()
	dsn := target(t)
	const planes = 4
	ls := make([]*DB, planes)
	errs := make([]error, planes)
	var wg sync.WaitGroup
	for i := range ls {
		wg.Go(func() { ls[i], errs[i] = OpenPostgres(ctx, dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("plane %d starting with the others: %v", i, err)
		}
		t.Cleanup(func() { ls[i].Close() })
	}
	tr, _ := trial(t, ls[0], "shared")

	changes := make(chan Change, 1000)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go ls[1].Watch(wctx, func(c Change) { changes <- c })
	heard := func(within time.Duration, match func(Change) bool) bool {
		deadline := time.After(within)
		for {
			select {
			case c := <-changes:
				if match(c) {
					return true
				}
			case <-deadline:
				return false
			}
		}
	}
	await := func(what string, match func(Change) bool) {
		t.Helper()
		if !heard(10*time.Second, match) {
			t.Fatalf("plane 1 never heard of %s", what)
		}
	}
	// The watch is listening once a change made after it started arrives.
	trial(t, ls[0], "ready")
	for i := 0; ; i++ {
		if err := ls[0].Seal(ctx, "ready"); err != nil {
			t.Fatal(err)
		}
		if heard(100*time.Millisecond, func(c Change) bool { return c.Namespace == "ready" && c.Policy }) {
			break
		}
		if i == 100 {
			t.Fatal("Watch never heard a seal")
		}
	}

	// The quota: 200 offers through four planes, 50 taken.
	const quota, offers = 50, 200
	results := make([]error, offers)
	for i := range offers {
		wg.Go(func() { _, _, results[i] = ls[i%planes].Accept(ctx, offer("shared", 1, "", "", quota, 0)) })
	}
	wg.Wait()
	accepted := 0
	for _, err := range results {
		switch {
		case err == nil:
			accepted++
		case !errors.Is(err, ErrCapacity):
			t.Fatalf("an offer over the quota failed otherwise than a refusal: %v", err)
		}
	}
	if accepted != quota {
		t.Fatalf("%d accepted through %d planes, quota %d", accepted, planes, quota)
	}
	await("a send through plane 0", func(c Change) bool { return c.Namespace == "shared" && !c.Policy })

	// One idempotency key through every plane at once: one message.
	trial(t, ls[2], "keyed")
	seqs := make([]int64, 40)
	replays := make([]bool, 40)
	for i := range seqs {
		wg.Go(func() {
			e, replayed, err := ls[i%planes].Accept(ctx, offer("keyed", 1, "k", "fp", 0, 0))
			if err != nil {
				t.Errorf("keyed send %d: %v", i, err)
			}
			seqs[i], replays[i] = e.Seq, replayed
		})
	}
	wg.Wait()
	first := 0
	for i := range seqs {
		if !replays[i] {
			first++
		}
		if seqs[i] != seqs[0] {
			t.Fatalf("one key, two seqs: %d and %d", seqs[0], seqs[i])
		}
	}
	if es, err := ls[3].Entries(ctx, "keyed", 0); err != nil || len(es) != 1 || first != 1 {
		t.Fatalf("one key through %d planes: %d entries (%v), %d first answers", planes, len(es), err, first)
	}

	// One name, one digest, stored through every plane at once: one
	// stores it, the others are told it exists.
	created := make([]error, planes)
	added := make([]error, planes)
	for i := range planes {
		wg.Go(func() {
			tr := &Trial{Profile: "candidate", MailAPIToken: digest(fmt.Sprint("api ", i)), BootstrapToken: digest(fmt.Sprint("boot ", i)), InboxToken: digest(fmt.Sprint("inbox ", i))}
			created[i] = ls[i].CreateTrial(ctx, tr, &Namespace{Name: "fixed", Tag: fmt.Sprint("wb-fixed-", i)}, nil)
			added[i] = ls[i].AddGrant(ctx, Grant{Digest: digest("one grant"), Role: "gateway"})
		})
	}
	wg.Wait()
	for what, errs := range map[string][]error{"CreateTrial of one namespace": created, "AddGrant of one digest": added} {
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, ErrExists):
				t.Fatalf("%s through %d planes at once: %v; want ErrExists", what, planes, err)
			}
		}
		if ok != 1 {
			t.Fatalf("%s through %d planes at once: %d stored", what, planes, ok)
		}
	}

	// Two reapers close one trial: once.
	closeErrs := make([]error, 2)
	for i := range closeErrs {
		wg.Go(func() { _, _, closeErrs[i] = ls[i].CloseTrial(ctx, tr.ID, "close", false) })
	}
	wg.Wait()
	if (closeErrs[0] == nil) == (closeErrs[1] == nil) || !errors.Is(errors.Join(closeErrs...), ErrNotFound) {
		t.Fatalf("two planes closing one trial: %v, %v; want one nil and one ErrNotFound", closeErrs[0], closeErrs[1])
	}
	await("the close", func(c Change) bool { return c.Namespace == "shared" && c.Policy })
}
