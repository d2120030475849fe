package hardening

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/plane"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The isolation matrix: every credential two live trials hold, the
// plane-wide grants and no credential at all, against every RPC method in
// the plane's authorization table and every route in the surfaces' route
// tables, aimed at both trials' namespaces. What each cell should answer
// is computed from plane.Authz() (which role may call which method) and
// from what each route is keyed by; exactly the permitted cells succeed,
// every other cell is a refusal (never an outage), and every message a
// permitted cell sent is found in the namespace it was meant for and in
// no other.

// credKind is what a credential is.
type credKind int

const (
	noCred credKind = iota
	readCap
	writeCap
	inboxToken
	mailAPIToken
	bootstrapToken
	writerGrant
	inboxGrant
	gatewayGrant
	adminGrant
)

var credNames = [...]string{"none", "read capability", "write capability", "inbox token", "mail-API token",
	"bootstrap token", "writer grant", "inbox grant", "gateway grant", "admin grant"}

// cred is one credential: of trial 0 (A) or 1 (B), or of nobody (-1).
type cred struct {
	kind  credKind
	trial int
	value string
}

func (c cred) String() string {
	if c.trial < 0 {
		return credNames[c.kind]
	}
	return "ABCDEFGH"[c.trial:c.trial+1] + "'s " + credNames[c.kind]
}

// role is the role of a grant, "" for anything else.
func (c cred) role() rpc.Role {
	switch c.kind {
	case writerGrant:
		return rpc.RoleWriter
	case inboxGrant:
		return rpc.RoleInbox
	case gatewayGrant:
		return rpc.RoleGateway
	case adminGrant:
		return rpc.RoleAdmin
	}
	return ""
}

// trialBound says which roles' grants are bound to one trial: their calls
// can only ever touch that trial's namespace (the plane's bindTrial).
var trialBound = map[rpc.Role]bool{rpc.RoleWriter: true, rpc.RoleInbox: true}

// credentials lists every credential of the world: each trial's seven,
// the gateway and admin grants, and none.
func credentials(ids [2]rpc.Identity, gateway, admin string) []cred {
	out := []cred{{kind: noCred, trial: -1}}
	for i, id := range ids {
		for k, v := range map[credKind]string{
			readCap: id.ReadCapability, writeCap: id.WriteCapability, inboxToken: id.InboxToken,
			mailAPIToken: id.MailAPIToken, bootstrapToken: id.BootstrapToken,
			writerGrant: id.WriterGrant, inboxGrant: id.InboxGrant,
		} {
			out = append(out, cred{kind: k, trial: i, value: v})
		}
	}
	out = append(out, cred{kind: gatewayGrant, trial: -1, value: gateway}, cred{kind: adminGrant, trial: -1, value: admin})
	sort.Slice(out, func(i, j int) bool {
		if out[i].trial != out[j].trial {
			return out[i].trial < out[j].trial
		}
		return out[i].kind < out[j].kind
	})
	return out
}

// keys are the credential kinds that open what a profile's trial offers
// (rpc.ProfileCandidate, rpc.ProfileSidecar): the write credentials of
// POST /emails, the selector of SMTP select, the bootstrap token, the read
// capability of every evaluator read, the inbox token of the inbox.
type keys struct {
	emails, smtpSelect []credKind
}

var profileKeys = map[string]keys{
	rpc.ProfileCandidate: {emails: []credKind{mailAPIToken, writeCap}, smtpSelect: []credKind{writeCap}},
	rpc.ProfileSidecar:   {emails: []credKind{bootstrapToken}, smtpSelect: []credKind{readCap}},
}

// senderOf is an envelope sender each profile accepts.
func senderOf(profile string) string {
	if profile == rpc.ProfileCandidate {
		return rpc.CandidateSender
	}
	return "site@reference.example"
}

// world is the running system of one matrix: a plane, two trials, a fixed
// and a selecting writer and an inbox per trial, and one gateway.
type world struct {
	*sys
	profile string
	ids     [2]rpc.Identity
	creds   []cred
	authz   map[string]map[rpc.Role]bool
	writers [2]*surface
	selects [2]*surface
	inboxes [2]*surface
	gw      *surface
	hc      *http.Client

	cells    int
	allowed  int // cells the table permits
	byPart   map[string]int
	expected [2]map[string]bool // subject → meant for namespace i
	failures int
}

// cell checks one cell: ok is what it did, want what the table says.
func (w *world) cell(part, name string, want, ok bool, detail string) {
	w.t.Helper()
	w.cells++
	w.byPart[part]++
	if want {
		w.allowed++
	}
	if want != ok {
		w.failures++
		if w.failures <= 50 {
			w.t.Errorf("%s: %s: permitted=%v but succeeded=%v (%s)", part, name, want, ok, detail)
		}
	}
}

// sent records that a permitted cell's message must be in namespace dest.
func (w *world) sent(subject string, dest int) {
	w.expected[dest][subject] = true
}

// TestIsolationMatrix runs the matrix for a candidate's trials (as
// mail-plane up makes them) and for the drop-in sidecar's, whose write
// and selection credentials differ.
func TestIsolationMatrix(t *testing.T) {
	total := 0
	for _, profile := range []string{rpc.ProfileCandidate, rpc.ProfileSidecar} {
		t.Run(profile, func(t *testing.T) {
			total += isolationMatrix(t, profile)
		})
	}
	figure(t, "isolation-matrix cells=%d profiles=2", total)
}

func isolationMatrix(t *testing.T, profile string) int {
	s := newSys(t, "--quota-messages", "0", "--quota-bytes", "0")
	w := &world{sys: s, profile: profile, authz: plane.Authz(), byPart: map[string]int{},
		expected: [2]map[string]bool{{}, {}}, hc: httpClient(4)}
	for i := range w.ids {
		w.ids[i] = s.trial(profile)
	}
	w.creds = credentials(w.ids, s.plane.gatewayGrant, s.plane.adminGrant)
	// Message 1 of each namespace names its namespace, so that every page
	// and answer shows whose mail it holds.
	for i, id := range w.ids {
		cl := s.plane.client(id.WriterGrant)
		if _, err := cl.Send(ctxT(t, 10*time.Second), &rpc.SendRequest{Via: rpc.ViaSMTP, From: senderOf(profile),
			To: []string{"seed@example.com"}, Raw: rawMail(seed(id), "first")}); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
	}
	for i, id := range w.ids {
		w.writers[i] = s.writer(id, string(smtpd.Fixed))
		w.selects[i] = s.writer(id, string(smtpd.Select))
		w.inboxes[i] = s.inbox(id)
	}
	w.gw = s.gateway()

	start := time.Now()
	w.rpcMatrix()
	w.surfaceMatrix()
	w.checkDestinations()
	parts := slices.Sorted(maps.Keys(w.byPart))
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, " %s=%d", p, w.byPart[p])
	}
	figure(t, "isolation-matrix profile=%s credentials=%d cells=%d permitted=%d%s took=%v", profile, len(w.creds), w.cells, w.allowed, b.String(), time.Since(start).Round(time.Millisecond))
	if w.failures > 0 {
		t.Fatalf("%d of %d cells answered other than the authorization table says", w.failures, w.cells)
	}
	return w.cells
}

func seed(id rpc.Identity) string { return "seed of " + id.Namespace }

// checkDestinations: every message a permitted cell sent is in the
// namespace it was meant for, once, and in no other.
func (w *world) checkDestinations() {
	w.t.Helper()
	for i, id := range w.ids {
		got := map[string]bool{}
		for _, m := range w.messages(id) {
			if !strings.HasPrefix(m.Subject, "cell ") {
				continue
			}
			if got[m.Subject] {
				w.t.Errorf("%s holds %q twice", id.Namespace, m.Subject)
			}
			got[m.Subject] = true
			if !w.expected[i][m.Subject] {
				w.t.Errorf("%s holds %q, which was not meant for it", id.Namespace, m.Subject)
			}
		}
		for subj := range w.expected[i] {
			if !got[subj] {
				w.t.Errorf("%s lacks %q, which a permitted cell sent to it", id.Namespace, subj)
			}
		}
		w.cells += len(w.expected[i])
		w.byPart["destinations"] += len(w.expected[i])
	}
}

// rpcOp is one kind of plane call. A namespace-bearing call is aimed at A,
// at B and (for reads) at no namespace; a call that carries a credential
// of its own is made with every credential.
type rpcOp struct {
	name     string
	method   string
	targets  []int // -1: no namespace named
	inner    bool
	mutating bool // changes a trial: permitted cells aim at scratch trials
	request  func(ns, inner, subject string) any
}

func (w *world) rpcOps() []rpcOp {
	from := senderOf(w.profile)
	send := func(via rpc.Via) func(ns, inner, subject string) any {
		return func(ns, inner, subject string) any {
			return &rpc.SendRequest{Via: via, Credential: inner, Namespace: ns, From: from, To: []string{"cell@example.com"}, Raw: rawMail(subject, "x")}
		}
	}
	read := func(id int64) func(ns, inner, subject string) any {
		return func(ns, inner, _ string) any { return &rpc.ReadRequest{Namespace: ns, Capability: inner, ID: id} }
	}
	trialReq := func(ns, _, _ string) any { return &rpc.TrialRequest{Namespace: ns} }
	both, reads, none := []int{0, 1}, []int{0, 1, -1}, []int{-1}
	return []rpcOp{
		{name: "health", method: rpc.MethodHealth, targets: none, request: func(string, string, string) any { return &rpc.Empty{} }},
		{name: "send/http", method: rpc.MethodSend, targets: both, inner: true, request: send(rpc.ViaHTTP)},
		{name: "send/smtp", method: rpc.MethodSend, targets: both, request: send(rpc.ViaSMTP)},
		{name: "send/smtp-select", method: rpc.MethodSend, targets: both, inner: true, request: send(rpc.ViaSMTPSelect)},
		{name: "send/smtp-auth", method: rpc.MethodSend, targets: both, inner: true, request: send(rpc.ViaSMTPAuth)},
		{name: "bootstrap", method: rpc.MethodBootstrap, targets: none, inner: true, request: func(_, inner, _ string) any { return &rpc.BootstrapRequest{Token: inner} }},
		{name: "list", method: rpc.MethodList, targets: reads, inner: true, request: read(0)},
		{name: "get", method: rpc.MethodGet, targets: reads, inner: true, request: read(1)},
		{name: "latest", method: rpc.MethodLatest, targets: reads, inner: true, request: read(0)},
		{name: "trial.create", method: rpc.MethodTrialCreate, targets: none, request: func(string, string, string) any { return &rpc.TrialCreateRequest{Profile: w.profile} }},
		{name: "trial.rotate", method: rpc.MethodTrialRotate, targets: both, mutating: true, request: func(ns, _, _ string) any { return &rpc.TrialRotateRequest{Namespace: ns} }},
		{name: "trial.seal", method: rpc.MethodTrialSeal, targets: both, mutating: true, request: trialReq},
		{name: "trial.destroy", method: rpc.MethodTrialDestroy, targets: both, mutating: true, request: trialReq},
		{name: "trial.list", method: rpc.MethodTrialList, targets: none, request: func(string, string, string) any { return &rpc.Empty{} }},
		{name: "grant.create", method: rpc.MethodGrantCreate, targets: none, request: func(string, string, string) any { return &rpc.GrantCreateRequest{Role: rpc.RoleGateway} }},
		{name: "unknown method", method: "mail.drop", targets: none, request: func(string, string, string) any { return &rpc.Empty{} }},
	}
}

// expectRPC is what the table says of one call: whether it is permitted,
// and for a send the namespace its message must land in.
func (w *world) expectRPC(op rpcOp, g cred, target int, inner cred) (bool, int) {
	role := g.role()
	if role == "" || !w.authz[op.method][role] {
		return false, -1
	}
	own := g.trial // the trial a trial-bound grant belongs to
	k := profileKeys[w.profile]
	switch op.name {
	case "send/http", "send/smtp-auth":
		return inner.trial == own && slices.Contains(k.emails, inner.kind), own
	case "send/smtp":
		return true, own
	case "send/smtp-select":
		return target == own && inner.trial == own && slices.Contains(k.smtpSelect, inner.kind), own
	case "bootstrap":
		return inner.trial == own && inner.kind == bootstrapToken, -1
	case "list", "get", "latest":
		if trialBound[role] {
			return target == own || target == -1, own
		}
		return target >= 0 && inner.trial == target && inner.kind == readCap, target
	}
	return true, -1
}

// rpcMatrix calls every method with every credential as the grant.
func (w *world) rpcMatrix() {
	t := w.t
	ops := w.rpcOps()
	for m := range w.authz {
		if !slices.ContainsFunc(ops, func(op rpcOp) bool { return op.method == m }) {
			t.Fatalf("the authorization table has method %q, which the matrix does not call", m)
		}
	}
	innerNone := []cred{{kind: noCred, trial: -1}}
	n := 0
	for _, op := range ops {
		inners := innerNone
		if op.inner {
			inners = w.creds
		}
		for _, g := range w.creds {
			cl := rpc.NewClient(w.plane.socket, g.value)
			for _, target := range op.targets {
				for _, inner := range inners {
					n++
					want, dest := w.expectRPC(op, g, target, inner)
					ns := ""
					if target >= 0 {
						ns = w.ids[target].Namespace
					}
					if want && op.mutating {
						ns = w.trial(w.profile).Namespace // a scratch trial
					}
					subject := fmt.Sprintf("cell rpc %d %s", n, op.name)
					name := fmt.Sprintf("%s as %s on %s with %s", op.name, g, nsName(target), inner)
					var resp json.RawMessage
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					err := cl.Call(ctx, op.method, op.request(ns, inner.value, subject), &resp)
					cancel()
					if err != nil && rpc.IsOutage(err) {
						t.Errorf("rpc: %s: an outage answer to a healthy plane: %v", name, err)
					}
					if err != nil {
						w.saw(fmt.Sprintf("%s %+v %s", g.value, op.request(ns, inner.value, subject), inner.value), err.Error())
					}
					ok := err == nil && w.rpcAnswerBelongs(op, resp, dest, name)
					w.cell("rpc", name, want, ok, fmt.Sprint(err))
					if ok && dest >= 0 && strings.HasPrefix(op.name, "send") {
						w.sent(subject, dest)
					}
				}
			}
			cl.Close()
		}
	}
}

func nsName(target int) string {
	if target < 0 {
		return "no namespace"
	}
	return "ABCDEFGH"[target:target+1] + "'s namespace"
}

// rpcAnswerBelongs checks that a successful answer is about the namespace
// the cell was allowed to touch, and records secrets it hands out.
func (w *world) rpcAnswerBelongs(op rpcOp, raw json.RawMessage, dest int, name string) bool {
	t := w.t
	switch op.name {
	case "send/http", "send/smtp", "send/smtp-select", "send/smtp-auth":
		var r rpc.SendResponse
		json.Unmarshal(raw, &r)
		if r.Namespace != w.ids[dest].Namespace {
			t.Errorf("rpc: %s: message went to %s", name, r.Namespace)
			return false
		}
	case "list":
		var r rpc.ListResponse
		json.Unmarshal(raw, &r)
		for _, m := range r.Messages {
			if m.Namespace != w.ids[dest].Namespace {
				t.Errorf("rpc: %s: listed a message of %s", name, m.Namespace)
				return false
			}
		}
	case "get", "latest":
		var m rpc.Message
		json.Unmarshal(raw, &m)
		if m.Namespace != w.ids[dest].Namespace {
			t.Errorf("rpc: %s: read a message of %s", name, m.Namespace)
			return false
		}
	case "trial.create":
		var id rpc.Identity
		json.Unmarshal(raw, &id)
		w.identity(id)
	case "trial.rotate":
		var r rpc.RotateResponse
		json.Unmarshal(raw, &r)
		w.secret("rotated read capability", r.ReadCapability)
	case "grant.create":
		var r rpc.GrantResponse
		json.Unmarshal(raw, &r)
		w.secret("minted gateway grant", r.Grant)
	case "bootstrap":
		var r rpc.BootstrapResponse
		json.Unmarshal(raw, &r)
		return r.Namespace != "" && slices.ContainsFunc(w.ids[:], func(id rpc.Identity) bool {
			return id.Namespace == r.Namespace && (r.Capability == id.WriteCapability || r.Capability == id.ReadCapability)
		})
	}
	return true
}

// route is one route of a surface, as the surface's own route table names
// it, with the plane method and role its answer depends on and the
// credential kinds that open it (none: open to anyone).
type route struct {
	surface string // writer, inbox, gateway
	kind    string // the name in the surface's route table
	role    rpc.Role
	method  string
	keys    []credKind
	open    bool
	ns      bool // the request names a namespace (in its path or headers)
}

func (w *world) routes() []route {
	k := profileKeys[w.profile]
	read := []credKind{readCap}
	return []route{
		{surface: "writer", kind: "/healthz", role: rpc.RoleWriter, method: rpc.MethodHealth, open: true},
		{surface: "writer", kind: "/internal/bootstrap", role: rpc.RoleWriter, method: rpc.MethodBootstrap, keys: []credKind{bootstrapToken}},
		{surface: "writer", kind: "/emails", role: rpc.RoleWriter, method: rpc.MethodSend, keys: k.emails},
		{surface: "writer", kind: "/emails/batch", role: rpc.RoleWriter, method: rpc.MethodSend, keys: k.emails},
		{surface: "writer", kind: "smtp auth", role: rpc.RoleWriter, method: rpc.MethodSend, keys: k.emails},
		{surface: "writer", kind: "smtp " + string(smtpd.Fixed), role: rpc.RoleWriter, method: rpc.MethodSend, open: true, ns: true},
		{surface: "writer", kind: "smtp " + string(smtpd.Select), role: rpc.RoleWriter, method: rpc.MethodSend, keys: k.smtpSelect, ns: true},
		{surface: "inbox", kind: "root", role: rpc.RoleInbox, method: rpc.MethodHealth, open: true},
		{surface: "inbox", kind: "healthz", role: rpc.RoleInbox, method: rpc.MethodHealth, open: true},
		{surface: "inbox", kind: "inbox", role: rpc.RoleInbox, method: rpc.MethodList, keys: []credKind{inboxToken}},
		{surface: "inbox", kind: "message", role: rpc.RoleInbox, method: rpc.MethodGet, keys: []credKind{inboxToken}},
		{surface: "gateway", kind: "healthz", role: rpc.RoleGateway, method: rpc.MethodHealth, open: true},
		{surface: "gateway", kind: "list", role: rpc.RoleGateway, method: rpc.MethodList, keys: read, ns: true},
		{surface: "gateway", kind: "latest", role: rpc.RoleGateway, method: rpc.MethodLatest, keys: read, ns: true},
		{surface: "gateway", kind: "message", role: rpc.RoleGateway, method: rpc.MethodGet, keys: read, ns: true},
		{surface: "gateway", kind: "inbox", role: rpc.RoleGateway, method: rpc.MethodList, keys: read, ns: true},
		{surface: "gateway", kind: "inbox_message", role: rpc.RoleGateway, method: rpc.MethodGet, keys: read, ns: true},
	}
}

// expectRoute is what the table says of one request to instance (the
// trial whose writer or inbox it is; -1 for the shared gateway), naming
// namespace target, with c.
func (w *world) expectRoute(r route, instance, target int, c cred) bool {
	if r.open {
		return true
	}
	if !w.authz[r.method][r.role] || !slices.Contains(r.keys, c.kind) {
		return false
	}
	owner := instance
	if r.ns {
		owner = target
	}
	if trialBound[r.role] && owner != instance {
		return false
	}
	return c.trial == owner
}

// surfaceMatrix sends every credential to every route of every surface.
func (w *world) surfaceMatrix() {
	routes := w.routes()
	w.checkRouteTables(routes)
	n := 0
	for _, r := range routes {
		instances := []int{0, 1}
		if r.surface == "gateway" {
			instances = []int{-1}
		}
		targets := []int{-1}
		if r.ns {
			targets = []int{0, 1}
		}
		for _, inst := range instances {
			for _, target := range targets {
				for _, c := range w.creds {
					n++
					want := w.expectRoute(r, inst, target, c)
					name := fmt.Sprintf("%s %s", r.surface, r.kind)
					if inst >= 0 {
						name = fmt.Sprintf("%s of %s", name, "ABCDEFGH"[inst:inst+1])
					}
					if r.ns {
						name += " naming " + nsName(target)
					}
					name += " with " + c.String()
					subject := fmt.Sprintf("cell surface %d", n)
					ok, dest, detail := w.request(r, inst, target, c, subject)
					w.cell("surfaces", name, want, ok, detail)
					if ok && dest >= 0 {
						w.sent(subject, dest)
					}
				}
			}
		}
	}
}

// request makes one surface request and judges its answer: ok when it
// succeeded with data of the right namespace; a refusal must be a 4xx (an
// SMTP 5xx), never an outage.
func (w *world) request(r route, inst, target int, c cred, subject string) (ok bool, dest int, detail string) {
	t := w.t
	auth := ""
	if c.value != "" {
		auth = "Bearer " + c.value
	}
	get := func(base, path string) answer {
		a, err := w.sys.request(w.hc, http.MethodGet, base+path, auth, "", nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return a
	}
	refusal := func(a answer) (bool, int, string) {
		if a.status < 400 || a.status >= 500 {
			t.Errorf("%s %s: refused with %d, want a 4xx: %s", r.surface, r.kind, a.status, a.body)
		}
		return false, -1, fmt.Sprintf("%d %s", a.status, a.body)
	}
	nsOf := func(i int) string { return w.ids[i].Namespace }
	smtpData := func(ns string) []byte {
		return rawMail(subject, "x", smtpd.NamespaceHeader+": "+ns, smtpd.CapabilityHeader+": "+c.value)
	}
	switch r.surface + " " + r.kind {
	case "writer /healthz":
		a := get(w.writers[inst].url, "/healthz")
		return a.status == 200, -1, a.body
	case "writer /internal/bootstrap":
		a := get(w.writers[inst].url, "/internal/bootstrap")
		if a.status != 200 {
			return refusal(a)
		}
		var b struct{ Capability, Namespace string }
		json.Unmarshal([]byte(a.body), &b)
		return b.Namespace == nsOf(inst), -1, a.body
	case "writer /emails":
		a, err := w.postEmail(w.hc, w.writers[inst].url, c.value, "", emailBody(senderOf(w.profile), "cell@example.com", subject, "x"))
		if err != nil {
			t.Fatalf("POST /emails: %v", err)
		}
		if a.status != 200 {
			return refusal(a)
		}
		return true, inst, a.body
	case "writer /emails/batch", "writer smtp auth":
		return w.authCell(r, inst, c, subject) // matrix_auth_test.go
	case "writer smtp fixed", "writer smtp select":
		srv := w.writers[inst]
		if r.kind == "smtp select" {
			srv = w.selects[inst]
		}
		res := w.sendSMTP(srv.smtp, senderOf(w.profile), []string{"cell@example.com"}, smtpData(nsOf(target)))
		if res.code == 250 {
			return true, inst, ""
		}
		if res.code < 500 {
			t.Errorf("%s naming %s: refused with %d %s, want a 5xx", r.kind, nsOf(target), res.code, res.err)
		}
		return false, -1, fmt.Sprint(res.code, res.err)
	case "inbox root":
		a := get(w.inboxes[inst].url, "/")
		return a.status == http.StatusFound && a.header.Get("Location") == "/inbox/"+w.ids[inst].InboxToken, -1, a.body
	case "inbox healthz":
		a := get(w.inboxes[inst].url, "/healthz")
		return a.status == 200, -1, a.body
	case "inbox inbox", "inbox message":
		path := "/inbox/" + url.PathEscape(c.value)
		if r.kind == "message" {
			path += "/messages/1"
		}
		a := get(w.inboxes[inst].url, path)
		if a.status != 200 {
			return refusal(a)
		}
		return w.pageOf(a.body, inst, name(r, inst)), -1, ""
	case "gateway healthz":
		a := get(w.gw.url, "/healthz")
		return a.status == 200, -1, a.body
	case "gateway list", "gateway latest", "gateway message":
		path := "/api/namespaces/" + nsOf(target) + "/messages"
		switch r.kind {
		case "latest":
			path += "/latest"
		case "message":
			path += "/1"
		}
		a := get(w.gw.url, path)
		if a.status != 200 {
			return refusal(a)
		}
		var msgs []mailclient.Message
		if r.kind == "list" {
			var l mailclient.List
			json.Unmarshal([]byte(a.body), &l)
			msgs = l.Messages
		} else {
			var m mailclient.Message
			json.Unmarshal([]byte(a.body), &m)
			msgs = []mailclient.Message{m}
		}
		if len(msgs) == 0 {
			t.Errorf("gateway %s of %s: no message", r.kind, nsOf(target))
			return false, -1, a.body
		}
		for _, m := range msgs {
			if m.Namespace != nsOf(target) {
				t.Errorf("gateway %s of %s: a message of %s", r.kind, nsOf(target), m.Namespace)
				return false, -1, a.body
			}
		}
		return true, -1, ""
	case "gateway inbox", "gateway inbox_message":
		path := "/inbox/" + nsOf(target)
		if r.kind == "inbox_message" {
			path += "/messages/1"
		}
		a := get(w.gw.url, path)
		if a.status != 200 {
			return refusal(a)
		}
		return w.pageOf(a.body, target, name(r, target)), -1, ""
	}
	t.Fatalf("no request for route %s %s", r.surface, r.kind)
	return false, -1, ""
}

func name(r route, i int) string { return fmt.Sprintf("%s %s of %s", r.surface, r.kind, nsName(i)) }

// pageOf checks that an HTML page shows namespace i's mail and not the
// other's.
func (w *world) pageOf(body string, i int, what string) bool {
	mine, other := seed(w.ids[i]), seed(w.ids[1-i])
	if !strings.Contains(body, mine) || strings.Contains(body, other) {
		w.t.Errorf("%s: the page does not show exactly its own namespace's mail", what)
		return false
	}
	return true
}

// checkRouteTables: the matrix covers every route the surfaces' own route
// tables declare, so a route added to a surface fails here until the
// matrix knows who may use it.
func (w *world) checkRouteTables(routes []route) {
	t := w.t
	has := func(surface, kind string) bool {
		return slices.ContainsFunc(routes, func(r route) bool { return r.surface == surface && r.kind == kind })
	}
	tables := []struct{ surface, dir, variable string }{
		{"writer", "internal/writer", "allow"},
		{"inbox", "internal/inbox", "kindNames"},
		{"gateway", "internal/gateway", "kindNames"},
	}
	for _, tb := range tables {
		names := routeTable(t, filepath.Join(repoRoot(), tb.dir), tb.variable)
		if len(names) == 0 {
			t.Fatalf("no route table %s in %s", tb.variable, tb.dir)
		}
		for _, n := range names {
			if n == "not_found" {
				continue // the answer to every path that is no route
			}
			if !has(tb.surface, n) {
				t.Errorf("%s declares route %q, which the isolation matrix does not cover", tb.surface, n)
			}
		}
	}
	for _, mode := range []smtpd.Mode{smtpd.Fixed, smtpd.Select} {
		if !has("writer", "smtp "+string(mode)) {
			t.Errorf("SMTP mode %s not covered", mode)
		}
	}
}

// routeTable reads the string keys (of a map) or elements (of an array or
// slice) of the package-level variable name declared in dir's Go files.
func routeTable(t testing.TB, dir, name string) []string {
	t.Helper()
	fset := token.NewFileSet()
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var out []string
	for _, path := range matches {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if id.Name != name || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.CompositeLit)
					if !ok {
						continue
					}
					for _, e := range lit.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							e = kv.Key
						}
						if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
							s, _ := strconv.Unquote(bl.Value)
							out = append(out, s)
						}
					}
				}
			}
		}
	}
	return out
}
