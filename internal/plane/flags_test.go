package plane_test

import (
	"slices"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestAgentFlags: the agent's flags over IMAP (flag) are kept per trial
// across a restart and shown on its IMAP lists only, which also carry
// each message's HTML; bad input is refused with a fixed code and
// changes nothing; another trial's inbox cannot flag this trial's mail.
func TestAgentFlags(t *testing.T) {
	w := newWorld(t)
	mustSend(t, w.writerA, "user@example.com", msg("one", "hello"))
	mustSend(t, w.writerA, "user@example.com", htmlMail)
	flags := func(cl *rpc.Client) map[int64][]string {
		t.Helper()
		msgs, err := cl.List(ctx(t), &rpc.ReadRequest{Door: rpc.DoorIMAP})
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64][]string{}
		for _, m := range msgs {
			if m.ID == 2 && m.HTML == "" {
				t.Fatal("an IMAP list lacks the HTML part a client is told the structure of")
			}
			if len(m.Flags) > 0 {
				out[m.ID] = m.Flags
			}
		}
		return out
	}
	for _, bad := range []struct {
		req  rpc.FlagRequest
		code string
	}{
		{rpc.FlagRequest{IDs: []int64{1}, Flag: `\Deleted`, Set: true}, rpc.CodeBadRequest},
		{rpc.FlagRequest{IDs: []int64{1}, Flag: "", Set: true}, rpc.CodeBadRequest},
		{rpc.FlagRequest{Flag: rpc.FlagFlagged, Set: true}, rpc.CodeBadRequest},
		{rpc.FlagRequest{IDs: []int64{0}, Flag: rpc.FlagFlagged, Set: true}, rpc.CodeBadRequest},
		{rpc.FlagRequest{IDs: make([]int64, rpc.MaxFlagIDs+1), Flag: rpc.FlagFlagged, Set: true}, rpc.CodeBadRequest},
		{rpc.FlagRequest{IDs: []int64{1, 9}, Flag: rpc.FlagFlagged, Set: true}, rpc.CodeNotFound},
	} {
		if err := w.inboxA.Flag(ctx(t), &bad.req); code(err) != bad.code {
			t.Errorf("flag %+v: %v, want %s", bad.req, err, bad.code)
		}
	}
	if got := flags(w.inboxA); len(got) != 0 {
		t.Fatalf("flags after refused calls: %v", got)
	}
	// B's inbox token names B's mailbox: its flag of id 1 is B's (which
	// holds no message 1), never A's.
	inboxB := w.plane.Client(t, w.b.InboxGrant)
	if err := inboxB.Flag(ctx(t), &rpc.FlagRequest{IDs: []int64{1}, Flag: rpc.FlagFlagged, Set: true}); code(err) != rpc.CodeNotFound {
		t.Fatalf("B flags its missing message 1: %v", err)
	}
	for _, req := range []rpc.FlagRequest{
		{IDs: []int64{1, 2}, Flag: rpc.FlagFlagged, Set: true},
		{IDs: []int64{2}, Flag: rpc.FlagSeen, Set: true},
		{IDs: []int64{1}, Flag: rpc.FlagFlagged, Set: false},
	} {
		if err := w.inboxA.Flag(ctx(t), &req); err != nil {
			t.Fatal(err)
		}
	}
	want := map[int64][]string{2: {rpc.FlagFlagged, rpc.FlagSeen}}
	check := func(got map[int64][]string) {
		t.Helper()
		slices.Sort(got[2])
		if len(got) != 1 || !slices.Equal(got[2], want[2]) {
			t.Fatalf("flags %v, want %v", got, want)
		}
	}
	check(flags(w.inboxA))
	// The other doors' lists carry no flags and no HTML.
	msgs, err := w.inboxA.List(ctx(t), &rpc.ReadRequest{})
	if err != nil || len(msgs) != 2 || msgs[1].Flags != nil || msgs[1].HTML != "" || msgs[1].Opened {
		t.Fatalf("the HTML inbox's list: %v %+v", err, msgs)
	}
	w.plane.Stop(t)
	w.plane.Restart(t)
	check(flags(w.plane.Client(t, w.a.InboxGrant)))
}
