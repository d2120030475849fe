package plane_test

import (
	"bytes"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// htmlMail is a multipart/related sign-up mail: a text part, an HTML part
// and the inline image its HTML names by cid:.
var htmlMail = []byte("Subject: Welcome\r\nMIME-Version: 1.0\r\nContent-Type: multipart/related; boundary=r\r\n\r\n" +
	"--r\r\nContent-Type: multipart/alternative; boundary=a\r\n\r\n" +
	"--a\r\nContent-Type: text/plain\r\n\r\nConfirm: https://site.example/c\r\n" +
	"--a\r\nContent-Type: text/html\r\n\r\n<p><img src=\"cid:logo@x\"><a href=\"https://site.example/c\">Confirm</a></p>\r\n--a--\r\n" +
	"--r\r\nContent-Type: image/png\r\nContent-ID: <logo@x>\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n--r--\r\n")

// TestAgentOpens: the agent's list says which messages it opened (by the
// HTML pages or MCP), from the plane's record, which outlives a restart;
// only its message page gets the HTML and inline images, and no other
// reader gets the images.
func TestAgentOpens(t *testing.T) {
	w := newWorld(t)
	mustSend(t, w.writerA, "user@example.com", msg("one", "hello"))
	mustSend(t, w.writerA, "user@example.com", htmlMail)
	mustSend(t, w.writerA, "user@example.com", msg("three", "hello"))
	opened := func(cl *rpc.Client) (out []int64) {
		t.Helper()
		msgs, err := cl.List(ctx(t), &rpc.ReadRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.HTML != "" || m.Inline != nil {
				t.Fatalf("the agent's list carries message %d's HTML or images", m.ID)
			}
			if m.Opened {
				out = append(out, m.ID)
			}
		}
		return out
	}
	if got := opened(w.inboxA); len(got) != 0 {
		t.Fatalf("opened before any open: %v", got)
	}
	m, err := w.inboxA.Get(ctx(t), &rpc.ReadRequest{ID: 2})
	if err != nil {
		t.Fatal(err)
	}
	if m.HTML == "" || len(m.Inline) != 1 || m.Inline[0].ContentID != "logo@x" || m.Inline[0].ContentType != "image/png" || !bytes.Equal(m.Inline[0].Data, []byte("hello")) {
		t.Fatalf("the agent's message page lacks its HTML or inline image: %q %+v", m.HTML, m.Inline)
	}
	// The page's frame of message 1 reads it without opening it.
	if _, err := w.inboxA.Get(ctx(t), &rpc.ReadRequest{ID: 1, Door: rpc.DoorInboxFrame}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.inboxA.Get(ctx(t), &rpc.ReadRequest{ID: 3, Door: rpc.DoorInboxMCP}); err != nil {
		t.Fatal(err)
	}
	// A read that is not an open marks nothing: a missing id, the
	// evaluator's read.
	if _, err := w.inboxA.Get(ctx(t), &rpc.ReadRequest{ID: 9}); code(err) != rpc.CodeNotFound {
		t.Fatalf("get 9: %v", err)
	}
	g, err := w.gateway.Get(ctx(t), &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability, ID: 1})
	if err != nil || g.Opened || g.Inline != nil {
		t.Fatalf("gateway get: %v opened %v inline %v", err, g.Opened, g.Inline)
	}
	if got := opened(w.inboxA); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("opened %v, want [2 3]", got)
	}
	// Another inbox process (a new client) after a restart sees the same.
	w.plane.Stop(t)
	w.plane.Restart(t)
	if got := opened(w.plane.Client(t, w.a.InboxGrant)); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("after a restart, opened %v, want [2 3]", got)
	}
}
