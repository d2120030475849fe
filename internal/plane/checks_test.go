package plane_test

import (
	"cmp"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/plane"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestWriterChecks: the writer's credential check (credential.check) and
// its refusal of a malformed request (send.refused) are calls of their
// own, bound as a send is, storing nothing; each is in the trail as the
// send it stands for: a check that opens the trial adds nothing, a wrong
// credential is a refused send, and a refusal is a refused send with the
// writer's code if the code is a stable one.
func TestWriterChecks(t *testing.T) {
	w := newWorld(t)
	good := rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: w.a.MailAPIToken}
	wrong := rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: w.b.MailAPIToken}
	before := len(exportTrail(t, w.plane.Admin, w.a.Namespace))
	if resp, err := w.writerA.ResolveCredential(ctx(t), &good); err != nil || resp.Namespace != w.a.Namespace {
		t.Fatalf("check with the trial's token: %+v, %v; want namespace %s", resp, err, w.a.Namespace)
	}
	if err := w.writerA.CheckCredential(ctx(t), &wrong); code(err) != rpc.CodeUnauthorized {
		t.Fatalf("check with another trial's token: %v", err)
	}
	if err := w.writerA.Refused(ctx(t), &rpc.RefusalRequest{CredentialRequest: good, Code: "validation_error"}); err != nil {
		t.Fatalf("refusal with the trial's token: %v", err)
	}
	if err := w.writerA.Refused(ctx(t), &rpc.RefusalRequest{CredentialRequest: good, Code: "Not A Code"}); err != nil {
		t.Fatalf("refusal with an unstable code: %v", err)
	}
	if err := w.writerA.Refused(ctx(t), &rpc.RefusalRequest{CredentialRequest: wrong, Code: "validation_error"}); code(err) != rpc.CodeUnauthorized {
		t.Fatalf("refusal with another trial's token: %v", err)
	}
	// Neither takes a credential of a kind its row does not accept (a
	// door, a port), nor a via that names none.
	if err := w.writerA.CheckCredential(ctx(t), &rpc.CredentialRequest{Via: rpc.ViaSMTP}); code(err) == "" || rpc.IsOutage(err) {
		t.Fatalf("check of plain SMTP: %v, want a refusal", err)
	}
	trail := exportTrail(t, w.plane.Admin, w.a.Namespace)[before:]
	want := []struct{ outcome, code string }{
		{evidence.Refused, rpc.CodeUnauthorized}, {evidence.Refused, "validation_error"},
		{evidence.Refused, rpc.CodeUnauthorized}, {evidence.Refused, rpc.CodeBadRequest},
	}
	if len(trail) != len(want) {
		t.Fatalf("trail grew by %d events (%+v), want %d", len(trail), trail, len(want))
	}
	for i, e := range trail {
		if e.Action != rpc.MethodSend || e.Door != evidence.DoorWriterHTTP && i < 3 || e.Outcome != want[i].outcome || e.Code != want[i].code {
			t.Errorf("event %d: %+v, want a %s send with %s", i, e, want[i].outcome, want[i].code)
		}
	}
	if got := w.list(t, w.a); len(got) != 0 {
		t.Fatalf("the checks stored %d messages", len(got))
	}
	if err := w.gateway.Call(ctx(t), rpc.MethodCredentialCheck, &good, nil); code(err) != rpc.CodePermissionDenied {
		t.Fatalf("a gateway's credential check: %v", err)
	}
}

// TestPolicyColumns: the table Policy exports frames a send as its frame
// and every other call as JSON, and names the credential kinds each bound
// call may present.
func TestPolicyColumns(t *testing.T) {
	for _, r := range plane.Policy().Methods {
		framing := "json"
		if r.Method == rpc.MethodSend {
			framing = "send"
		}
		if r.Framing != framing {
			t.Errorf("%s is framed %q, want %q", r.Method, r.Framing, framing)
		}
		bound := false
		for _, b := range r.Principals {
			bound = bound || b == "trial" || b == "credential" || b == "capability" || b == "operator"
		}
		if bound != (len(r.Credentials) > 0) {
			t.Errorf("%s: bound=%v but accepts %v", r.Method, bound, r.Credentials)
		}
	}
}

// TestReaderChecks: a reader's check (read.check) answers the namespace
// a shared inbox's token, or the gateway's capability for the namespace
// it names, opens; a wrong one is refused as the reads refuse it; and no
// check, good or refused, adds to a trail or reads mail.
func TestReaderChecks(t *testing.T) {
	w := newWorld(t)
	mustSend(t, w.writerA, "user@example.com", msg("one", "hello"))
	shared := w.plane.Client(t, w.plane.Grant(t, rpc.RoleInbox))
	before := len(exportTrail(t, w.plane.Admin, w.a.Namespace))
	beforeB := len(exportTrail(t, w.plane.Admin, w.b.Namespace))
	cases := []struct {
		name   string
		client *rpc.Client
		req    rpc.ReadRequest
		want   string // the namespace, or the refusal's code
	}{
		{"shared inbox, A's token", shared, rpc.ReadRequest{InboxToken: w.a.InboxToken}, w.a.Namespace},
		{"shared inbox, B's token", shared, rpc.ReadRequest{InboxToken: w.b.InboxToken}, w.b.Namespace},
		{"shared inbox, a wrong token", shared, rpc.ReadRequest{InboxToken: strings.Repeat("x", 43)}, rpc.CodeNotFound},
		{"shared inbox, A's read capability", shared, rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability}, rpc.CodeForbidden},
		{"gateway, A's capability for A", w.gateway, rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability}, w.a.Namespace},
		{"gateway, A's capability for B", w.gateway, rpc.ReadRequest{Namespace: w.b.Namespace, Capability: w.a.ReadCapability}, rpc.CodeForbidden},
		{"gateway, A's inbox token", w.gateway, rpc.ReadRequest{InboxToken: w.a.InboxToken}, rpc.CodeForbidden},
		{"A's own inbox (one trial)", w.inboxA, rpc.ReadRequest{}, rpc.CodePermissionDenied},
		{"A's writer", w.writerA, rpc.ReadRequest{InboxToken: w.a.InboxToken}, rpc.CodePermissionDenied},
	}
	for _, c := range cases {
		for range 2 { // the second is served from the plane's binding cache
			resp, err := c.client.ResolveReader(ctx(t), &c.req)
			if got := cmp.Or(code(err), resp.Namespace); got != c.want {
				t.Errorf("%s: %q (%v), want %q", c.name, got, err, c.want)
			}
			if err != nil && rpc.IsOutage(err) {
				t.Errorf("%s: an outage answer: %v", c.name, err)
			}
		}
	}
	if n := len(exportTrail(t, w.plane.Admin, w.a.Namespace)); n != before {
		t.Errorf("A's trail grew by %d events under reader checks", n-before)
	}
	if n := len(exportTrail(t, w.plane.Admin, w.b.Namespace)); n != beforeB {
		t.Errorf("B's trail grew by %d events under reader checks", n-beforeB)
	}
}
