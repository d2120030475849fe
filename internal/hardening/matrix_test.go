package hardening

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/pgtest"
	"github.com/websitebench/mailplane/internal/plane"
	"github.com/websitebench/mailplane/internal/sendapi"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// noAuthWait turns off the writers' wait after failed AUTHs: the matrix is
// a scan of wrong credentials by design, and with the wait (up to 1 s per
// failure on a listener) it took ten times as long. The lockout at the
// third failure stays, and authPortCells checks it; the wait itself is
// TestAuthFailuresCloseTheSession's (internal/supervisor).
var noAuthWait = []string{"--auth-failure-delay", "0"}

// The isolation matrix: every credential two live trials hold, the
// plane-wide grants (the gateway's, the admin's, and the shared writer's
// and inbox's) and no credential at all, against every RPC method in the
// plane's authorization table and every route of every surface instance,
// aimed at both trials' namespaces (and, for plain SMTP, at both trials'
// ports). What each cell should answer is computed from the plane's table
// as its golden file pins it (internal/plane/testdata/policy.json, which a
// plane test holds equal to the live table; the matrix never reads the
// live one, so a wrong row cannot pass it): which principal may call which
// method, and what its call is bound to (the grant's trial, the trial its
// credential opens, the namespace its read capability opens), and which of
// a trial's secrets each credential may be, per profile, with what each
// call or route presents (the credential, the namespace named, the port);
// exactly the permitted cells succeed, every other cell
// is a refusal (never an outage), and every message a permitted cell sent
// is found in the namespace it was meant for and in no other.
//
// It runs in two modes. Strict: a plane (serve) with one writer, one
// namespace-selecting writer and one inbox per trial, each with its
// trial-bound grant. Shared: a whole `mail-plane up` stack, whose one
// writer and one inbox serve every trial, plus one shared
// namespace-selecting writer (as mail-plane sidecar runs); each candidate
// trial has its own SMTP port, bound by up's supervisor and served by the
// shared writer.

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
	sharedWriterGrant
	sharedInboxGrant
	gatewayGrant
	adminGrant
	consoleGrant
	sesSecret  // the trial's SES secret access key (matrix_providers_test.go)
	hooksGrant // the hooks process's (webhook deliveries)
)

var credNames = [...]string{"none", "read capability", "write capability", "inbox token", "mail-API token",
	"bootstrap token", "writer grant", "inbox grant", "shared writer grant", "shared inbox grant", "gateway grant", "admin grant",
	"console grant", "SES secret", "hooks grant"}

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
	return trialName(c.trial) + "'s " + credNames[c.kind]
}

func trialName(i int) string { return "ABCDEFGH"[i : i+1] }

// principal is who a grant makes its holder, named as the table names
// principals; "" for a credential that is no grant.
func (c cred) principal() string {
	switch c.kind {
	case writerGrant:
		return principalOf(rpc.RoleWriter, false)
	case inboxGrant:
		return principalOf(rpc.RoleInbox, false)
	case sharedWriterGrant:
		return principalOf(rpc.RoleWriter, true)
	case sharedInboxGrant:
		return principalOf(rpc.RoleInbox, true)
	case gatewayGrant:
		return principalOf(rpc.RoleGateway, false)
	case adminGrant:
		return principalOf(rpc.RoleAdmin, false)
	case consoleGrant:
		return principalOf(rpc.RoleConsole, false)
	case hooksGrant:
		return principalOf(rpc.RoleHooks, false)
	}
	return ""
}

// principalOf names a role's principal: a writer's or inbox's grant is a
// trial's (strict mode) or shared by every trial.
func principalOf(role rpc.Role, shared bool) string {
	if shared {
		return "shared " + string(role)
	}
	return string(role)
}

// credentials lists every credential of the world: each trial's eight,
// the plane-wide grants, and none.
func credentials(t testing.TB, ids [2]rpc.Identity, plane map[credKind]string, sesKey []byte) []cred {
	out := []cred{{kind: noCred, trial: -1}}
	for i, id := range ids {
		for k, v := range map[credKind]string{
			readCap: id.ReadCapability, writeCap: id.WriteCapability, inboxToken: id.InboxToken,
			mailAPIToken: id.MailAPIToken, bootstrapToken: id.BootstrapToken,
			writerGrant: id.WriterGrant, inboxGrant: id.InboxGrant, sesSecret: sesSecretOf(t, sesKey, id),
		} {
			out = append(out, cred{kind: k, trial: i, value: v})
		}
	}
	for k, v := range plane {
		out = append(out, cred{kind: k, trial: -1, value: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].trial != out[j].trial {
			return out[i].trial < out[j].trial
		}
		return out[i].kind < out[j].kind
	})
	return out
}

// keys are the credential kinds that open what a profile's trial offers,
// as the golden table says: the write credentials of POST /emails (and SMTP
// AUTH), the selector of SMTP select, the bootstrap token, the inbox
// token of the inbox and the read capability of every evaluator read.
type keys struct {
	emails, smtpSelect, bootstrap, inbox, read []credKind
}

// secretKinds are the plane's names of a trial's secrets.
var secretKinds = map[string]credKind{"mail_api_token": mailAPIToken, "write_capability": writeCap,
	"bootstrap_token": bootstrapToken, "inbox_token": inboxToken, "read_capability": readCap}

// profileKeys reads the golden table's keys for profile.
func profileKeys(t testing.TB, profile string) keys {
	table := golden(t).Keys()
	kinds := func(credential string) []credKind {
		names := table[credential][profile]
		if len(names) == 0 {
			t.Fatalf("the golden table has no %s for profile %s", credential, profile)
		}
		var out []credKind
		for _, n := range names {
			k, ok := secretKinds[n]
			if !ok {
				t.Fatalf("the golden table names a secret %q the matrix does not hold", n)
			}
			out = append(out, k)
		}
		return out
	}
	return keys{emails: kinds("mail_api_token"), smtpSelect: kinds("capability_header"), bootstrap: kinds("bootstrap_token"),
		inbox: kinds("inbox_token"), read: kinds("read_capability")}
}

// senderOf is an envelope sender each profile accepts.
func senderOf(profile string) string {
	if profile == rpc.ProfileCandidate {
		return rpc.CandidateSender
	}
	return "site@reference.example"
}

const (
	strictMode = "strict"
	sharedMode = "shared"
)

// instance is one running surface the matrix sends requests to: a
// process, or one of the shared writer's per-trial SMTP listeners.
type instance struct {
	surface  string // writer, inbox, gateway
	shared   bool   // holds a shared grant (writer, inbox)
	owner    int    // the trial it serves alone: its grant's, or its port's; -1: none
	name     string
	redirect bool       // an inbox that redirects its root to its one token URL (--root-redirect)
	url      string     // HTTP base; "": its HTTP routes are not run on it
	smtp     string     // SMTP address; "": none
	smtpMode smtpd.Mode // of smtp
}

// world is the running system of one matrix: a plane, two trials, their
// surfaces (strict) or the shared ones, and one gateway.
type world struct {
	*sys
	profile, mode string
	ids           [2]rpc.Identity
	ports         [2]int // each trial's own SMTP port; 0: none
	unowned       int    // an SMTP port no trial owns (the shared one), 0 without
	shared        map[credKind]string
	creds         []cred
	authz         map[string]map[string]string // method → principal → binding (golden)
	accepts       map[string][]string          // method → the credentials it may present, by the trail's names (golden)
	keys          keys                         // the golden table's keys, of profile
	instances     []instance
	hc            *http.Client

	mu       sync.Mutex // the RPC part runs a few grants at once
	cells    int
	allowed  int // cells the table permits
	byPart   map[string]int
	expected [2]map[string]bool // subject → meant for namespace i
	failures int
}

// cell checks one cell: ok is what it did, want what the table says.
func (w *world) cell(part, name string, want, ok bool, detail string) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
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
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expected[dest][subject] = true
}

// TestIsolationMatrix runs the matrix for a candidate's trials (as
// mail-plane up makes them) and for the drop-in sidecar's, whose write
// and selection credentials differ, in strict mode and on shared surfaces.
func TestIsolationMatrix(t *testing.T) {
	total := map[string]int{}
	for _, mode := range []string{strictMode, sharedMode} {
		for _, profile := range []string{rpc.ProfileCandidate, rpc.ProfileSidecar} {
			t.Run(mode+"/"+profile, func(t *testing.T) {
				total[mode] += isolationMatrix(t, mode, profile)
			})
		}
	}
	figure(t, "isolation-matrix cells=%d strict=%d shared=%d profiles=2", total[strictMode]+total[sharedMode], total[strictMode], total[sharedMode])
}

// TestIsolationMatrixPostgres runs the same matrix with the plane's ledger
// and mail in PostgreSQL (--store postgres), a new database for each run.
func TestIsolationMatrixPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	// The cells are the embedded store's; what PostgreSQL changes is
	// underneath them. Each mode and each profile runs once here (strict
	// with the candidate, shared with the sidecar), all four combinations
	// at length (make hardening-long).
	combos := [][2]string{{strictMode, rpc.ProfileCandidate}, {sharedMode, rpc.ProfileSidecar}}
	if long() {
		combos = append(combos, [2]string{strictMode, rpc.ProfileSidecar}, [2]string{sharedMode, rpc.ProfileCandidate})
	}
	for _, c := range combos {
		mode, profile := c[0], c[1]
		t.Run(mode+"/"+profile, func(t *testing.T) {
			isolationMatrix(t, mode, profile, "--store", "postgres", "--dsn-file", itest.WriteSecret(t, "dsn", pg.DSN()))
		})
	}
}

// isolationMatrix runs the matrix on a plane started with store's flags
// (none: the default store) and returns its number of cells.
func isolationMatrix(t *testing.T, mode, profile string, store ...string) int {
	w := &world{profile: profile, mode: mode, authz: policy(t), accepts: accepted(t), byPart: map[string]int{},
		expected: [2]map[string]bool{{}, {}}, hc: httpClient(4), keys: profileKeys(t, profile)}
	var grantsDir string
	var up *upSys
	if mode == strictMode {
		// Advertised URLs (never dialled) let the admin's trial.open answer.
		w.sys = newSys(t, append([]string{"--quota-messages", "0", "--quota-bytes", "0", "--advertise-writer", "http://127.0.0.1:9",
			"--advertise-inbox", "http://127.0.0.1:9", "--advertise-gateway", "http://127.0.0.1:9", "--advertise-smtp", "127.0.0.1:9"}, store...)...)
		grantsDir = w.plane.data
	} else {
		up = newUpSys(t, append([]string{"--quota-messages", "0", "--quota-bytes", "0", noAuthWait[0], noAuthWait[1]}, store...)...)
		w.sys = up.sys
		grantsDir = filepath.Dir(up.bundle.AdminGrantFile)
		w.unowned = up.bundle.SharedSMTPPort
	}
	s := w.sys
	// The shared grants serve writes next to its admin grant; the strict
	// world uses shared grants an admin minted (grant.create) instead.
	w.shared = map[credKind]string{
		sharedWriterGrant: s.sharedGrant(grantsDir, rpc.RoleWriter),
		sharedInboxGrant:  s.sharedGrant(grantsDir, rpc.RoleInbox),
		gatewayGrant:      s.plane.gatewayGrant,
		adminGrant:        s.plane.adminGrant,
		consoleGrant:      s.sharedGrant(grantsDir, rpc.RoleConsole),
		hooksGrant:        s.sharedGrant(grantsDir, rpc.RoleHooks),
	}
	if mode == strictMode {
		for k, role := range map[credKind]rpc.Role{sharedWriterGrant: rpc.RoleWriter, sharedInboxGrant: rpc.RoleInbox} {
			g, err := s.plane.admin.GrantCreate(ctxT(t, 10*time.Second), role)
			if err != nil {
				t.Fatalf("grant.create %s: %v", role, err)
			}
			s.secret("minted shared "+string(role)+" grant", g)
			w.shared[k] = g
		}
	}
	for i := range w.ids {
		w.ids[i] = s.trial(profile)
	}
	trials, err := s.plane.admin.AllTrials(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range w.ids {
		for _, tr := range trials {
			if tr.Namespace == id.Namespace {
				w.ports[i] = tr.SMTPPort
			}
		}
	}
	if mode == sharedMode && profile == rpc.ProfileCandidate {
		// On up every candidate trial has an SMTP port of its own
		// (its WEBSITEBENCH_SMTP_PORT), as in the reference.
		if w.ports[0] <= 0 || w.ports[1] <= 0 || w.ports[0] == w.ports[1] || slices.Contains(w.ports[:], w.unowned) {
			t.Fatalf("candidate trials on up have SMTP ports %v (shared %d), not one of their own each", w.ports, w.unowned)
		}
	}
	sesKey := planeSESKey(t, grantsDir)
	w.creds = credentials(t, w.ids, w.shared, sesKey)
	for _, id := range w.ids {
		s.secret(id.Namespace+" SES secret", sesSecretOf(t, sesKey, id))
	}
	// Message 1 of each namespace names its namespace, so that every page
	// and answer shows whose mail it holds (its HTML part too, for the
	// inbox's frame), and has a link to click.
	for i, id := range w.ids {
		cl := s.plane.client(id.WriterGrant)
		raw := []byte("Subject: " + seed(id) + "\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=s\r\n\r\n" +
			"--s\r\nContent-Type: text/plain\r\n\r\nfirst https://seed.example/\r\n" +
			"--s\r\nContent-Type: text/html\r\n\r\n<p>" + seed(id) + "</p>\r\n--s--\r\n")
		if _, err := cl.Send(ctxT(t, 10*time.Second), &rpc.SendRequest{Via: rpc.ViaSMTP, From: senderOf(profile),
			To: []string{"seed@example.com"}, Raw: raw}); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
	}
	if mode == strictMode {
		for i, id := range w.ids {
			// A's inbox keeps the reference's root redirect, B's does not.
			var flags []string
			if i == 0 {
				flags = []string{"--root-redirect"}
			}
			wr, sel, in := s.writer(id, string(smtpd.Fixed), noAuthWait...), s.writer(id, string(smtpd.Select), noAuthWait...), s.inbox(id, flags...)
			n := trialName(i) + "'s "
			w.instances = append(w.instances,
				instance{surface: "writer", owner: i, name: n + "writer", url: wr.url, smtp: wr.smtp, smtpMode: smtpd.Fixed},
				instance{surface: "writer", owner: i, name: n + "selecting writer", smtp: sel.smtp, smtpMode: smtpd.Select},
				instance{surface: "inbox", owner: i, name: n + "inbox", url: in.url, redirect: len(flags) > 0})
		}
		w.instances = append(w.instances, instance{surface: "gateway", owner: -1, name: "gateway", url: s.gateway().url})
	} else {
		b := up.bundle
		sel := s.sharedWriter(w.shared[sharedWriterGrant], string(smtpd.Select))
		w.instances = append(w.instances,
			instance{surface: "writer", shared: true, owner: -1, name: "shared writer", url: b.WriterURL,
				smtp: "127.0.0.1:" + strconv.Itoa(b.SharedSMTPPort), smtpMode: smtpd.Fixed},
			instance{surface: "writer", shared: true, owner: -1, name: "shared selecting writer", smtp: sel.smtp, smtpMode: smtpd.Select},
			instance{surface: "inbox", shared: true, owner: -1, name: "shared inbox", url: b.InboxBaseURL},
			instance{surface: "gateway", owner: -1, name: "gateway", url: b.APIURL})
		for i, p := range w.ports {
			if p > 0 {
				w.instances = append(w.instances, instance{surface: "writer", shared: true, owner: i,
					name: fmt.Sprintf("shared writer on %s's port", trialName(i)), smtp: "127.0.0.1:" + strconv.Itoa(p), smtpMode: smtpd.Fixed})
			}
		}
	}

	start := time.Now()
	// Before the RPC part's ports.sync, after which a plane with no
	// supervisor opens no candidate trial for a while.
	w.checkExpired()
	w.rpcMatrix()
	rpcTook := time.Since(start)
	w.surfaceMatrix()
	w.authPortCells() // matrix_auth_test.go
	w.checkDestinations()
	parts := slices.Sorted(maps.Keys(w.byPart))
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, " %s=%d", p, w.byPart[p])
	}
	figure(t, "isolation-matrix mode=%s profile=%s credentials=%d instances=%d trial_ports=%v cells=%d permitted=%d%s took=%v rpc_took=%v",
		mode, profile, len(w.creds), len(w.instances), w.ports, w.cells, w.allowed, b.String(), time.Since(start).Round(time.Millisecond), rpcTook.Round(time.Millisecond))
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

// callArgs is what one RPC cell's request is made of: the namespace and
// SMTP port it aims at, the credential it carries, the subject of the
// message it may send.
type callArgs struct {
	ns      string
	port    int
	inner   string
	subject string
}

// rpcOp is one kind of plane call. A namespace-bearing call is aimed at A,
// at B and (for reads) at no namespace; plain SMTP is aimed at A's port,
// B's and one no trial owns; a call that carries a credential of its own
// is made with every credential.
type rpcOp struct {
	name     string
	method   string
	targets  []int // -1: no namespace named (plain SMTP: a port no trial owns)
	inner    bool
	mutating bool // changes a trial: permitted cells aim at scratch trials
	request  func(a callArgs) any
}

func (w *world) rpcOps() []rpcOp {
	from := senderOf(w.profile)
	send := func(via rpc.Via) func(callArgs) any {
		return func(a callArgs) any {
			port := a.port
			if via == rpc.ViaSMTPAuth {
				// AUTH as on the shared port, which names no port; AUTH on a
				// trial's own port is a cell of the surface matrix.
				port = 0
			}
			return &rpc.SendRequest{Via: via, Credential: a.inner, Namespace: a.ns, Port: port, From: from,
				To: []string{"cell@example.com"}, Raw: rawMail(a.subject, "x")}
		}
	}
	read := func(id int64) func(callArgs) any {
		return func(a callArgs) any { return &rpc.ReadRequest{Namespace: a.ns, Capability: a.inner, ID: id} }
	}
	byToken := func(id int64) func(callArgs) any {
		return func(a callArgs) any { return &rpc.ReadRequest{Namespace: a.ns, InboxToken: a.inner, ID: id} }
	}
	empty := func(callArgs) any { return &rpc.Empty{} }
	operator := rpc.Operator{AdminGrant: w.shared[adminGrant]}
	trialReq := func(a callArgs) any { return &rpc.TrialRequest{Namespace: a.ns} }
	both, reads, none := []int{0, 1}, []int{0, 1, -1}, []int{-1}
	// ports.sync comes after every call that opens a trial: it makes a
	// plane with no supervisor behave as a supervised one, whose new
	// candidate trials wait for a port.
	return []rpcOp{
		{name: "health", method: rpc.MethodHealth, targets: none, request: empty},
		// The console's reads carry the operator's admin grant in their
		// body: only a console grant may make them, even so.
		{name: "console.trials", method: rpc.MethodConsoleTrials, targets: none, request: func(callArgs) any {
			return &rpc.ConsoleTrialsRequest{Operator: operator}
		}},
		{name: "console.trial", method: rpc.MethodConsoleTrial, targets: both, request: func(a callArgs) any {
			return &rpc.ConsoleTrialRequest{Operator: operator, Namespace: a.ns}
		}},
		{name: "console.wait", method: rpc.MethodConsoleWait, targets: none, request: func(callArgs) any {
			return &rpc.ConsoleWaitRequest{Operator: operator}
		}},
		{name: "metrics", method: rpc.MethodMetrics, targets: none, request: func(callArgs) any { return &rpc.MetricsRequest{Operator: operator} }},
		{name: "send/http", method: rpc.MethodSend, targets: both, inner: true, request: send(rpc.ViaHTTP)},
		{name: "send/smtp-auth", method: rpc.MethodSend, targets: none, inner: true, request: send(rpc.ViaSMTPAuth)},
		{name: "send/smtp", method: rpc.MethodSend, targets: reads, request: send(rpc.ViaSMTP)},
		{name: "send/smtp-select", method: rpc.MethodSend, targets: both, inner: true, request: send(rpc.ViaSMTPSelect)},
		{name: "credential.check", method: rpc.MethodCredentialCheck, targets: none, inner: true, request: func(a callArgs) any {
			return &rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: a.inner}
		}},
		{name: "send.refused", method: rpc.MethodRefusal, targets: none, inner: true, request: func(a callArgs) any {
			return &rpc.RefusalRequest{CredentialRequest: rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: a.inner}, Code: "validation_error"}
		}},
		{name: "bootstrap", method: rpc.MethodBootstrap, targets: none, inner: true, request: func(a callArgs) any { return &rpc.BootstrapRequest{Token: a.inner} }},
		{name: "list", method: rpc.MethodList, targets: reads, inner: true, request: read(0)},
		{name: "get", method: rpc.MethodGet, targets: reads, inner: true, request: read(1)},
		{name: "latest", method: rpc.MethodLatest, targets: reads, inner: true, request: read(0)},
		{name: "list/inbox-token", method: rpc.MethodList, targets: none, inner: true, request: byToken(0)},
		{name: "get/inbox-token", method: rpc.MethodGet, targets: none, inner: true, request: byToken(1)},
		{name: "latest/inbox-token", method: rpc.MethodLatest, targets: none, inner: true, request: byToken(0)},
		{name: "read.check", method: rpc.MethodReadCheck, targets: reads, inner: true, request: read(0)},
		{name: "read.check/inbox-token", method: rpc.MethodReadCheck, targets: none, inner: true, request: byToken(0)},
		{name: "click/inbox-token", method: rpc.MethodClick, targets: none, inner: true, request: func(a callArgs) any {
			return &rpc.ClickRequest{InboxToken: a.inner, ID: 1, Link: 0}
		}},
		{name: "flag/inbox-token", method: rpc.MethodFlag, targets: none, inner: true, request: func(a callArgs) any {
			return &rpc.FlagRequest{InboxToken: a.inner, IDs: []int64{1}, Flag: rpc.FlagFlagged, Set: true}
		}},
		{name: "trial.create", method: rpc.MethodTrialCreate, targets: none, request: func(callArgs) any { return &rpc.TrialCreateRequest{Profile: w.profile} }},
		{name: "trial.rotate", method: rpc.MethodTrialRotate, targets: both, mutating: true, request: func(a callArgs) any { return &rpc.TrialRotateRequest{Namespace: a.ns} }},
		{name: "trial.seal", method: rpc.MethodTrialSeal, targets: both, mutating: true, request: trialReq},
		{name: "trial.close", method: rpc.MethodTrialClose, targets: both, mutating: true, request: trialReq},
		{name: "trial.open", method: rpc.MethodTrialOpen, targets: none, request: func(callArgs) any {
			return &rpc.TrialOpenRequest{Profile: w.profile, TTLMillis: time.Hour.Milliseconds()}
		}},
		{name: "trial.list", method: rpc.MethodTrialList, targets: none, request: func(callArgs) any { return &rpc.TrialListRequest{} }},
		{name: "trial.info", method: rpc.MethodTrialInfo, targets: both, request: trialReq},
		{name: "trial.plant", method: rpc.MethodTrialPlant, targets: both, mutating: true, request: func(a callArgs) any {
			return &rpc.PlantRequest{Namespace: a.ns, To: []string{"seed@example.com"}, Subject: "cell plant", Text: "planted", Label: "cell"}
		}},
		{name: "trial.faults", method: rpc.MethodTrialFaults, targets: both, mutating: true, request: func(a callArgs) any {
			return &rpc.TrialFaultsRequest{Namespace: a.ns, Faults: json.RawMessage(`[]`)}
		}},
		{name: "trial.webhooks", method: rpc.MethodTrialWebhooks, targets: both, mutating: true, request: func(a callArgs) any {
			return &rpc.TrialWebhooksRequest{Namespace: a.ns, Webhooks: []rpc.Webhook{}}
		}},
		{name: "webhooks.report", method: rpc.MethodWebhooksReport, targets: none, request: func(callArgs) any {
			return &rpc.WebhookReport{Trial: 1 << 40, Seq: 1, Status: 200}
		}},
		{name: "webhooks.take", method: rpc.MethodWebhooksTake, targets: none, request: func(callArgs) any { return &rpc.WebhooksTakeRequest{} }},
		{name: "webhooks.list", method: rpc.MethodWebhooksList, targets: reads, inner: true, request: func(a callArgs) any {
			return &rpc.WebhooksListRequest{Namespace: a.ns, Capability: a.inner}
		}},
		{name: "grant.create", method: rpc.MethodGrantCreate, targets: none, request: func(callArgs) any { return &rpc.GrantCreateRequest{Role: rpc.RoleGateway} }},
		{name: "ports.sync", method: rpc.MethodPortsSync, targets: none, request: func(callArgs) any { return &rpc.PortsSyncRequest{Restore: true} }},
		{name: "events", method: rpc.MethodEvents, targets: reads, inner: true, request: func(a callArgs) any {
			return &rpc.EventsRequest{Namespace: a.ns, Capability: a.inner}
		}},
		{name: "evidence.export", method: rpc.MethodExport, targets: both, request: func(a callArgs) any { return &rpc.EventsRequest{Namespace: a.ns} }},
		{name: "report", method: rpc.MethodReport, targets: reads, request: func(a callArgs) any {
			return &rpc.ReportRequest{Port: a.port, Code: "connection_limit", Count: 1}
		}},
		{name: "unknown method", method: "mail.drop", targets: none, request: empty},
	}
}

// goldenFile is the plane's policy table as pinned.
var goldenFile = filepath.Join("..", "plane", "testdata", "policy.json")

// golden is the pinned table.
func golden(t testing.TB) plane.PolicyTable {
	t.Helper()
	b, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	var p plane.PolicyTable
	if err := json.Unmarshal(b, &p); err != nil || len(p.Methods) == 0 {
		t.Fatalf("%s: %v", goldenFile, err)
	}
	return p
}

// apiTokenOf is the secret a profile's mail API is keyed by, as the
// golden table says.
func apiTokenOf(t testing.TB, profile string) string {
	for _, p := range golden(t).Profiles {
		if p.Name == profile {
			return p.APIToken
		}
	}
	t.Fatalf("%s has no profile %s", goldenFile, profile)
	return ""
}

// policy is the golden table by method: each principal's binding.
func policy(t testing.TB) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, r := range golden(t).Methods {
		out[r.Method] = r.Principals
	}
	return out
}

// accepted is the golden table by method: the credentials its call may
// present to be bound, by the names the trail gives them.
func accepted(t testing.TB) map[string][]string {
	p := golden(t)
	names := map[string]string{}
	for _, c := range p.Credentials {
		names[c.Kind] = c.Name
	}
	out := map[string][]string{}
	for _, r := range p.Methods {
		for _, k := range r.Credentials {
			if n, ok := names[k]; !ok {
				t.Fatalf("%s: the row of %s accepts %q, which it does not describe", goldenFile, r.Method, k)
			} else if !slices.Contains(out[r.Method], n) {
				out[r.Method] = append(out[r.Method], n)
			}
		}
	}
	return out
}

// verdict is what the authorization table says of one cell: whether it
// is permitted, the trial whose namespace it touches (-1: none), and why,
// in the table's terms, for the failure message.
type verdict struct {
	ok    bool
	trial int
	why   string
}

func permit(trial int, why string) verdict { return verdict{true, trial, why} }
func refuse(why string) verdict            { return verdict{false, -1, why} }

// opens is the trial a call keyed by a credential of trial sel is bound
// to: for a shared principal that trial, for a trial-bound one its own
// trial, and only if the credential is its own.
func opens(shared bool, own, sel int) verdict {
	switch {
	case sel < 0:
		return refuse("the credential is not of a kind the table keys this call by")
	case shared:
		return permit(sel, "bound to the credential: it opens "+trialName(sel))
	case sel == own:
		return permit(own, "bound to the grant's trial, and the credential is that trial's")
	}
	return refuse("bound to the grant's trial, and the credential is another trial's")
}

// expectRPC is what the table says of one call: whether it is permitted,
// and for a send, read or bootstrap the trial whose namespace it touches.
func (w *world) expectRPC(op rpcOp, g cred, target int, inner cred) verdict {
	p := g.principal()
	bind, ok := w.authz[op.method][p]
	if p == "" || !ok {
		return refuse(fmt.Sprintf("the row of %s does not list principal %q", op.method, p))
	}
	// A call bound to the credential it presents selects its trial by it
	// (a shared surface's); one bound to the grant's trial is held to it.
	shared := bind == "credential"
	own := g.trial // the trial a trial-bound grant belongs to
	k := w.keys
	// sel is the trial inner opens if it is a credential of the kinds
	// keys (the call is keyed by it).
	sel := func(keys ...credKind) int {
		if slices.Contains(keys, inner.kind) {
			return inner.trial
		}
		return -1
	}
	name := op.name
	if strings.HasSuffix(name, "/inbox-token") && inner.value == "" {
		// No token: the request names no credential of its own, and is
		// the capability read it then looks like.
		name = strings.TrimSuffix(name, "/inbox-token")
	}
	// presents is the kind of credential the call presents to be bound,
	// as the table names it; a kind its row does not accept opens nothing.
	presents := map[string]string{"send/http": "mail_api_token", "send/smtp-auth": "mail_api_token",
		"credential.check": "mail_api_token", "send.refused": "mail_api_token", "send/smtp": "smtp_port", "report": "smtp_port",
		"send/smtp-select": "capability_header", "bootstrap": "bootstrap_token", "list": "read_capability",
		"get": "read_capability", "latest": "read_capability", "events": "read_capability", "webhooks.list": "read_capability",
		"list/inbox-token": "inbox_token", "get/inbox-token": "inbox_token", "latest/inbox-token": "inbox_token",
		"read.check": "read_capability", "read.check/inbox-token": "inbox_token"}
	if kind, ok := presents[name]; ok && !slices.Contains(w.accepts[op.method], kind) {
		return refuse(fmt.Sprintf("the row of %s does not accept credential kind %s", op.method, kind))
	}
	switch name {
	case "send/http", "send/smtp-auth", "credential.check", "send.refused":
		return opens(shared, own, sel(k.emails...))
	case "send/smtp", "report":
		// Keyed by the port: a trial-bound writer's every listener is its
		// trial's; a shared writer's port is its owner's.
		if !shared {
			return permit(own, "a trial-bound writer's every port is its trial's")
		}
		if target >= 0 && w.ports[target] > 0 {
			return permit(target, "the port is "+trialName(target)+"'s")
		}
		return refuse("bound to the port, and no trial owns it")
	case "send/smtp-select":
		if target < 0 || inner.trial != target {
			return refuse("the capability header must name the namespace its capability opens")
		}
		return opens(shared, own, sel(k.smtpSelect...))
	case "bootstrap":
		return opens(shared, own, sel(k.bootstrap...))
	case "list", "get", "latest", "events", "read.check", "webhooks.list":
		switch {
		case bind == "capability":
			if target >= 0 && sel(k.read...) == target {
				return permit(target, "bound to the capability, which opens the namespace named")
			}
			return verdict{false, target, "bound to the capability, which does not open the namespace named"}
		case shared: // a capability opens no trial for a shared inbox
			return refuse("a shared inbox is keyed by an inbox token, not a capability")
		}
		// A trial-bound inbox reads its own namespace, named or not.
		if target == own || target == -1 {
			return permit(own, "a trial-bound inbox reads its own namespace")
		}
		return verdict{false, own, "a trial-bound inbox reads its own namespace only"}
	case "click", "flag":
		// No token: a trial-bound inbox clicks (and flags) in its own trial.
		if shared {
			return verdict{false, -1, "a shared inbox's " + name + " needs a token"}
		}
		return permit(own, "a trial-bound inbox "+name+"s in its own trial")
	case "list/inbox-token", "get/inbox-token", "latest/inbox-token", "click/inbox-token", "flag/inbox-token", "read.check/inbox-token":
		if bind == "capability" {
			return refuse("the gateway is keyed by a read capability only")
		}
		return opens(shared, own, sel(k.inbox...))
	}
	return permit(-1, fmt.Sprintf("the row of %s lists principal %q, bound to %s", op.method, p, bind))
}

// rpcMatrix calls every method with every credential as the grant.
func (w *world) rpcMatrix() {
	t := w.t
	ops := w.rpcOps()
	for m, principals := range w.authz {
		if !slices.ContainsFunc(ops, func(op rpcOp) bool { return op.method == m }) {
			t.Fatalf("the authorization table has method %q, which the matrix does not call", m)
		}
		for p := range principals {
			if !slices.ContainsFunc(w.creds, func(c cred) bool { return c.principal() == p }) {
				t.Fatalf("the authorization table names principal %q, whose grant the matrix does not hold", p)
			}
		}
	}
	// Each grant's row runs in order (the admin's opens trials before
	// its ports.sync); a few rows run at once.
	var wg sync.WaitGroup
	sem := make(chan struct{}, rpcRows)
	for gi, g := range w.creds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			w.rpcRow(ops, gi, g)
		}()
	}
	wg.Wait()
}

// rpcRows is how many grants' rows of the RPC part run at once.
const rpcRows = 4

// rpcRow calls every method with grant g, the gi-th credential.
func (w *world) rpcRow(ops []rpcOp, gi int, g cred) {
	t := w.t
	innerNone := []cred{{kind: noCred, trial: -1}}
	cl := rpc.NewClient(w.plane.socket, g.value)
	defer cl.Close()
	n := 0
	for _, op := range ops {
		inners := innerNone
		if op.inner {
			inners = w.creds
		}
		for _, target := range op.targets {
			for _, inner := range inners {
				n++
				v := w.expectRPC(op, g, target, inner)
				want, dest := v.ok, v.trial
				a := callArgs{inner: inner.value, subject: fmt.Sprintf("cell rpc %d.%d %s", gi, n, op.name), port: w.unowned}
				where := nsName(target)
				if target >= 0 {
					a.ns, a.port = w.ids[target].Namespace, w.ports[target]
				}
				if op.name == "send/smtp" {
					where = fmt.Sprintf("%s (%d)", portName(target), a.port)
				}
				var scratch rpc.Identity
				scratchPort := 0
				if want && op.mutating {
					var err error
					if scratch, err = w.plane.admin.TrialCreate(ctxT(t, 10*time.Second), &rpc.TrialCreateRequest{Profile: w.profile}); err != nil {
						t.Errorf("a scratch trial: %v", err)
						continue
					}
					w.identity(scratch)
					a.ns = scratch.Namespace
					if op.name == "trial.close" {
						scratchPort = w.portOf(scratch.Namespace)
					}
				}
				name := fmt.Sprintf("%s as %s on %s with %s", op.name, g, where, inner)
				var resp json.RawMessage
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := cl.Call(ctx, op.method, op.request(a), &resp)
				cancel()
				if err != nil && rpc.IsOutage(err) {
					t.Errorf("rpc: %s: an outage answer to a healthy plane: %v", name, err)
				}
				if err != nil {
					w.saw(fmt.Sprintf("%s %+v %s", g.value, op.request(a), inner.value), err.Error())
				}
				ok := err == nil && w.rpcAnswerBelongs(op, resp, dest, name)
				if op.method == rpc.MethodWebhooksReport {
					// Permitted, it reaches the outbox and finds no such event.
					ok = rpc.CodeOf(err) == rpc.CodeNotFound
				}
				w.cell("rpc", name, want, ok, fmt.Sprintf("%v; the table: %s", err, v.why))
				if ok && dest >= 0 && op.method == rpc.MethodSend {
					w.sent(a.subject, dest)
				}
				if ok && (op.name == "trial.close") {
					w.checkClosed("closed", scratch, scratchPort)
				}
			}
		}
	}
}

func nsName(target int) string {
	if target < 0 {
		return "no namespace"
	}
	return trialName(target) + "'s namespace"
}

func portName(target int) string {
	if target < 0 {
		return "a port no trial owns"
	}
	return trialName(target) + "'s SMTP port"
}

// portOf is the SMTP port of the open trial whose namespace is ns (0:
// none).
func (w *world) portOf(ns string) int {
	trials, err := w.plane.admin.AllTrials(ctxT(w.t, 10*time.Second))
	if err != nil {
		w.t.Errorf("trial.list: %v", err)
	}
	for _, tr := range trials {
		if tr.Namespace == ns {
			return tr.SMTPPort
		}
	}
	return 0
}

// checkClosed: once a trial is closed (or expired), none of its
// credentials opens anything on any door that would have taken it (the
// shared writer's and inbox's, the gateway's, its own grants), and plain
// SMTP on the port it owned (if it had one) reaches no trial. Credentials
// id lacks (a trial.open bundle has no grants) are not tried.
func (w *world) checkClosed(part string, id rpc.Identity, port int) {
	from := senderOf(w.profile)
	write := id.MailAPIToken
	if w.profile != rpc.ProfileCandidate {
		write = id.BootstrapToken
	}
	msg := func() []byte { return rawMail("cell "+part, "x") }
	calls := []struct {
		what, grant, method, cred string
		req                       any
	}{
		{"send with its write credential", w.shared[sharedWriterGrant], rpc.MethodSend, write,
			&rpc.SendRequest{Via: rpc.ViaHTTP, Credential: write, From: from, To: []string{"cell@example.com"}, Raw: msg()}},
		{"bootstrap with its token", w.shared[sharedWriterGrant], rpc.MethodBootstrap, id.BootstrapToken, &rpc.BootstrapRequest{Token: id.BootstrapToken}},
		{"list with its inbox token", w.shared[sharedInboxGrant], rpc.MethodList, id.InboxToken, &rpc.ReadRequest{InboxToken: id.InboxToken}},
		{"list with its read capability", w.shared[gatewayGrant], rpc.MethodList, id.ReadCapability,
			&rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability}},
		{"send with its writer grant", id.WriterGrant, rpc.MethodSend, id.WriterGrant,
			&rpc.SendRequest{Via: rpc.ViaSMTP, From: from, To: []string{"cell@example.com"}, Raw: msg()}},
		{"list with its inbox grant", id.InboxGrant, rpc.MethodList, id.InboxGrant, &rpc.ReadRequest{}},
	}
	if port > 0 {
		calls = append(calls, struct {
			what, grant, method, cred string
			req                       any
		}{"plain SMTP on its port, by the shared writer", w.shared[sharedWriterGrant], rpc.MethodSend, "-",
			&rpc.SendRequest{Via: rpc.ViaSMTP, Port: port, From: from, To: []string{"cell@example.com"}, Raw: msg()}})
	}
	for _, c := range calls {
		if c.cred == "" {
			continue
		}
		cl := rpc.NewClient(w.plane.socket, c.grant)
		var resp json.RawMessage
		err := cl.Call(ctxT(w.t, 20*time.Second), c.method, c.req, &resp)
		cl.Close()
		if err != nil && rpc.IsOutage(err) {
			w.t.Errorf("%s trial: %s: an outage answer: %v", part, c.what, err)
		}
		if err != nil {
			w.saw(fmt.Sprintf("%+v", c.req), err.Error())
		}
		w.cell(part, "a "+part+" trial's "+c.what, false, err == nil, string(resp))
	}
	if port > 0 && w.mode == sharedMode {
		// The supervisor closes the port's listener soon; until then the
		// shared writer serves it for no trial.
		res := w.sendSMTP("127.0.0.1:"+strconv.Itoa(port), from, []string{"cell@example.com"}, msg())
		if res.code != 250 && res.code != 0 && res.code != 530 {
			w.t.Errorf("%s trial: plain SMTP on its former port answered %d %v, want 530 or no listener", part, res.code, res.err)
		}
		w.cell(part, "plain SMTP to a "+part+" trial's former port", false, res.code == 250, fmt.Sprint(res.code, res.err))
	}
}

// checkExpired opens a trial with a TTL of 1 ms and, once it has expired
// (before the plane's reaper closes it, or after), checks it as a closed
// trial.
func (w *world) checkExpired() {
	b, err := w.plane.admin.TrialOpen(ctxT(w.t, 10*time.Second), &rpc.TrialOpenRequest{Profile: w.profile, TTLMillis: 1})
	if err != nil {
		w.t.Fatalf("trial.open with a TTL: %v", err)
	}
	_, inbox, _ := strings.Cut(b.InboxURL, "/inbox/")
	id := rpc.Identity{Namespace: b.Namespace, ReadCapability: b.ReadCapability, InboxToken: inbox,
		MailAPIToken:   b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"],
		BootstrapToken: b.CandidateEnvironment["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"]}
	w.identity(id)
	port := w.portOf(b.Namespace) // the bundle's is the shared one where the trial has none
	time.Sleep(20 * time.Millisecond)
	w.checkClosed("expired", id, port)
}

// rpcAnswerBelongs checks that a successful answer is about the namespace
// the cell was allowed to touch, and records secrets it hands out.
func (w *world) rpcAnswerBelongs(op rpcOp, raw json.RawMessage, dest int, name string) bool {
	t := w.t
	mine := func(ns string) bool { return dest >= 0 && ns == w.ids[dest].Namespace }
	switch strings.TrimSuffix(op.name, "/inbox-token") {
	case "send/http", "send/smtp", "send/smtp-select", "send/smtp-auth":
		var r rpc.SendResponse
		json.Unmarshal(raw, &r)
		if !mine(r.Namespace) {
			t.Errorf("rpc: %s: message went to %s", name, r.Namespace)
			return false
		}
	case "list":
		var r rpc.ListResponse
		json.Unmarshal(raw, &r)
		for _, m := range r.Messages {
			if !mine(m.Namespace) {
				t.Errorf("rpc: %s: listed a message of %s", name, m.Namespace)
				return false
			}
		}
	case "get", "latest":
		var m rpc.Message
		json.Unmarshal(raw, &m)
		if !mine(m.Namespace) {
			t.Errorf("rpc: %s: read a message of %s", name, m.Namespace)
			return false
		}
	case "read.check":
		var r rpc.CredentialResponse
		json.Unmarshal(raw, &r)
		if !mine(r.Namespace) {
			t.Errorf("rpc: %s: the check named %s", name, r.Namespace)
			return false
		}
	case "events":
		var r rpc.EventsResponse
		json.Unmarshal(raw, &r)
		for _, l := range r.Events {
			var e struct{ Namespace string }
			json.Unmarshal(l, &e)
			if !mine(e.Namespace) {
				t.Errorf("rpc: %s: read an event of %s", name, e.Namespace)
				return false
			}
		}
	case "trial.create":
		var id rpc.Identity
		json.Unmarshal(raw, &id)
		w.identity(id)
	case "trial.open":
		var b rpc.Bundle
		json.Unmarshal(raw, &b)
		w.secret("opened read capability", b.ReadCapability)
		w.secret("opened mail-API token", b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"])
		w.secret("opened bootstrap token", b.CandidateEnvironment["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"])
		if i := strings.LastIndex(b.InboxURL, "/inbox/"); i >= 0 {
			w.secret("opened inbox token", b.InboxURL[i+len("/inbox/"):])
		}
		if b.Namespace == "" || b.Namespace == w.ids[0].Namespace || b.Namespace == w.ids[1].Namespace || b.ReadCapability == "" {
			t.Errorf("rpc: %s: a bundle that is not a new trial's: namespace %q", name, b.Namespace)
			return false
		}
		if w.mode == sharedMode && w.profile == rpc.ProfileCandidate && (b.SMTPPort <= 0 || b.SMTPPort == w.unowned) {
			t.Errorf("rpc: %s: a candidate trial opened on up has SMTP port %d, not one of its own", name, b.SMTPPort)
			return false
		}
	case "trial.rotate":
		var r rpc.RotateResponse
		json.Unmarshal(raw, &r)
		w.secret("rotated read capability", r.ReadCapability)
	case "grant.create":
		var r rpc.GrantResponse
		json.Unmarshal(raw, &r)
		w.secret("minted gateway grant", r.Grant)
	case "ports.sync":
		var r rpc.PortsSyncResponse
		json.Unmarshal(raw, &r)
		for i, p := range w.ports {
			if p > 0 && !slices.Contains(r.Assigned, p) {
				t.Errorf("rpc: %s: the ports open trials own (%v) lack %s's %d", name, r.Assigned, trialName(i), p)
				return false
			}
		}
	case "bootstrap":
		var r rpc.BootstrapResponse
		json.Unmarshal(raw, &r)
		if !mine(r.Namespace) {
			return false
		}
		id := w.ids[dest]
		return (r.Capability == id.WriteCapability || r.Capability == id.ReadCapability) && r.SMTPPort == w.ports[dest]
	}
	return true
}

// selects says what a route's request is bound to.
type selects int

const (
	selOpen       selects = iota + 1 // nothing: open to anyone (health)
	selRedirect                      // the instance's one trial, if it redirects (the inbox's root); else nothing: refused to everyone
	selInstance                      // the trial the instance serves alone (fixed SMTP: its grant's or its port's)
	selCredential                    // the trial the credential presented opens (keys), on a namespace-naming route the one named
)

// route is one route of a surface, as the surface's own route table names
// it, with the plane method its answer depends on, what selects its trial
// and the credential kinds that open it.
type route struct {
	surface string // writer, inbox, gateway
	kind    string // the name in the surface's route table
	role    rpc.Role
	method  string
	selects selects
	keys    []credKind
	ns      bool // the request names a namespace (in its path or headers)
	// A provider API's route (matrix_providers_test.go): the API, its
	// path, and the kind of credential its request presents, as the
	// table names it.
	api      sendapi.API
	path     string
	presents string
}

func (w *world) routes() []route {
	k := w.keys
	read := k.read
	return append([]route{
		{surface: "writer", kind: "/healthz", role: rpc.RoleWriter, method: rpc.MethodHealth, selects: selOpen},
		{surface: "writer", kind: "/internal/bootstrap", role: rpc.RoleWriter, method: rpc.MethodBootstrap, selects: selCredential, keys: k.bootstrap},
		{surface: "writer", kind: "/emails", role: rpc.RoleWriter, method: rpc.MethodSend, selects: selCredential, keys: k.emails},
		{surface: "writer", kind: "/emails/batch", role: rpc.RoleWriter, method: rpc.MethodSend, selects: selCredential, keys: k.emails},
		{surface: "writer", kind: "smtp auth", role: rpc.RoleWriter, method: rpc.MethodSend, selects: selCredential, keys: k.emails},
		{surface: "writer", kind: "smtp " + string(smtpd.Fixed), role: rpc.RoleWriter, method: rpc.MethodSend, selects: selInstance, ns: true},
		{surface: "writer", kind: "smtp " + string(smtpd.Select), role: rpc.RoleWriter, method: rpc.MethodSend, selects: selCredential, keys: k.smtpSelect, ns: true},
		{surface: "inbox", kind: "root", role: rpc.RoleInbox, method: rpc.MethodHealth, selects: selRedirect},
		{surface: "inbox", kind: "healthz", role: rpc.RoleInbox, method: rpc.MethodHealth, selects: selOpen},
		{surface: "inbox", kind: "inbox", role: rpc.RoleInbox, method: rpc.MethodList, selects: selCredential, keys: k.inbox},
		{surface: "inbox", kind: "message", role: rpc.RoleInbox, method: rpc.MethodGet, selects: selCredential, keys: k.inbox},
		{surface: "inbox", kind: "text", role: rpc.RoleInbox, method: rpc.MethodGet, selects: selCredential, keys: k.inbox},
		{surface: "inbox", kind: "frame", role: rpc.RoleInbox, method: rpc.MethodGet, selects: selCredential, keys: k.inbox},
		{surface: "inbox", kind: "ping", role: rpc.RoleInbox, method: rpc.MethodClick, selects: selCredential, keys: k.inbox},
		{surface: "inbox", kind: "mcp", role: rpc.RoleInbox, method: rpc.MethodGet, selects: selCredential, keys: k.inbox},
		{surface: "gateway", kind: "healthz", role: rpc.RoleGateway, method: rpc.MethodHealth, selects: selOpen},
		{surface: "gateway", kind: "list", role: rpc.RoleGateway, method: rpc.MethodList, selects: selCredential, keys: read, ns: true},
		{surface: "gateway", kind: "latest", role: rpc.RoleGateway, method: rpc.MethodLatest, selects: selCredential, keys: read, ns: true},
		{surface: "gateway", kind: "message", role: rpc.RoleGateway, method: rpc.MethodGet, selects: selCredential, keys: read, ns: true},
		{surface: "gateway", kind: "inbox", role: rpc.RoleGateway, method: rpc.MethodList, selects: selCredential, keys: read, ns: true},
		{surface: "gateway", kind: "inbox_message", role: rpc.RoleGateway, method: rpc.MethodGet, selects: selCredential, keys: read, ns: true},
		{surface: "gateway", kind: "events", role: rpc.RoleGateway, method: rpc.MethodEvents, selects: selCredential, keys: read, ns: true},
		{surface: "gateway", kind: "webhooks", role: rpc.RoleGateway, method: rpc.MethodWebhooksList, selects: selCredential, keys: read, ns: true},
	}, w.providerRoutes()...)
}

// runsOn says whether route r is asked of instance in.
func runsOn(r route, in instance) bool {
	if r.surface != in.surface {
		return false
	}
	if r.kind == "smtp auth" {
		return in.smtp != "" // AUTH is offered on every SMTP listener (on loopback)
	}
	if mode, ok := strings.CutPrefix(r.kind, "smtp "); ok {
		return in.smtp != "" && string(in.smtpMode) == mode
	}
	return in.url != ""
}

// expectRoute is what the table says of one request to instance in,
// naming namespace target, with c: whether it is permitted, and the trial
// whose mail it touches.
func (w *world) expectRoute(r route, in instance, target int, c cred) verdict {
	switch r.selects {
	case selOpen:
		return permit(-1, "the route is open")
	case selRedirect:
		if in.redirect && in.owner >= 0 {
			return permit(in.owner, "a trial-bound inbox's root redirects to its page")
		}
		return verdict{false, in.owner, "only a trial-bound inbox with --root-redirect redirects"}
	}
	if _, ok := w.authz[r.method][principalOf(r.role, in.shared)]; !ok {
		return refuse(fmt.Sprintf("the row of %s does not list the %s", r.method, in.name))
	}
	if r.selects == selInstance {
		// A trial's own port on the shared writer requires AUTH first.
		if in.owner >= 0 && !in.shared {
			return permit(in.owner, "a trial-bound instance serves its own trial")
		}
		return verdict{false, in.owner, "a trial's own port on the shared writer requires AUTH first"}
	}
	if r.presents != "" && !slices.Contains(w.accepts[r.method], r.presents) {
		return refuse(fmt.Sprintf("the row of %s does not accept credential kind %s", r.method, r.presents))
	}
	if !slices.Contains(r.keys, c.kind) || c.trial < 0 {
		return refuse("the credential is not of a kind the table keys this route by")
	}
	if in.owner >= 0 && c.trial != in.owner {
		// A trial-bound instance, and a trial's own port on the shared
		// writer, serve their own trial only (AUTH with another trial's
		// token there is 535).
		return refuse("the instance serves " + trialName(in.owner) + " only")
	}
	if r.ns && target != c.trial {
		return refuse("the credential does not open the namespace named")
	}
	return permit(c.trial, "the credential opens "+trialName(c.trial))
}

// surfaceMatrix sends every credential to every route of every instance.
func (w *world) surfaceMatrix() {
	routes := w.routes()
	w.checkRouteTables(routes)
	n := 0
	for _, r := range routes {
		part := "surfaces/" + w.mode
		if r.api != nil {
			part = "providers/" + w.mode // counted apart, to show they ran
		}
		targets := []int{-1}
		if r.ns {
			targets = []int{0, 1}
		}
		ran := false
		for _, in := range w.instances {
			if !runsOn(r, in) {
				continue
			}
			ran = true
			for _, target := range targets {
				for _, c := range w.creds {
					n++
					v := w.expectRoute(r, in, target, c)
					want, dest := v.ok, v.trial
					name := fmt.Sprintf("%s %s of the %s", r.surface, r.kind, in.name)
					if r.ns {
						name += " naming " + nsName(target)
					}
					name += " with " + c.String()
					subject := fmt.Sprintf("cell surface %d", n)
					ok, detail := w.request(r, in, target, dest, c, subject)
					w.cell(part, name, want, ok, detail+"; the table: "+v.why)
					if ok && dest >= 0 && r.method == rpc.MethodSend {
						w.sent(subject, dest)
					}
				}
			}
		}
		if !ran {
			w.t.Errorf("route %s %s runs on no instance of the %s world", r.surface, r.kind, w.mode)
		}
	}
}

// request makes one surface request and judges its answer: ok when it
// succeeded with data of trial dest (the one the table says it touches);
// a refusal must be a 4xx (an SMTP 5xx), never an outage, and reveal no
// inbox token.
func (w *world) request(r route, in instance, target, dest int, c cred, subject string) (ok bool, detail string) {
	t := w.t
	auth := ""
	if c.value != "" {
		auth = "Bearer " + c.value
	}
	what := fmt.Sprintf("%s %s of the %s", r.surface, r.kind, in.name)
	get := func(path string) answer {
		a, err := w.sys.request(w.hc, http.MethodGet, in.url+path, auth, "", nil)
		if err != nil {
			t.Fatalf("GET %s of the %s: %v", r.kind, in.name, err)
		}
		return a
	}
	refusal := func(a answer) (bool, string) {
		if a.status < 400 || a.status >= 500 {
			t.Errorf("%s: refused with %d, want a 4xx: %s", what, a.status, a.body)
		}
		for _, id := range w.ids {
			if strings.Contains(a.body, id.InboxToken) || strings.Contains(a.header.Get("Location"), id.InboxToken) {
				t.Errorf("%s: a refusal reveals an inbox token", what)
			}
		}
		return false, fmt.Sprintf("%d %s", a.status, a.body)
	}
	nsOf := func(i int) string { return w.ids[i].Namespace }
	if r.api != nil {
		return w.providerCell(r, in, target, dest, c, subject) // matrix_providers_test.go
	}
	// succeeded is whether an answer is for trial dest; a success the
	// table does not permit has no dest to judge it by.
	switch r.surface + " " + r.kind {
	case "writer /healthz", "inbox healthz", "gateway healthz":
		a := get("/" + strings.TrimPrefix(r.kind, "/"))
		return a.status == 200, a.body
	case "writer /internal/bootstrap":
		a := get("/internal/bootstrap")
		if a.status != 200 {
			return refusal(a)
		}
		var b struct {
			Capability, Namespace string
			SMTPPort              int `json:"smtp_port"`
		}
		json.Unmarshal([]byte(a.body), &b)
		if dest < 0 || b.Namespace != nsOf(dest) {
			return false, "bootstrap of another namespace: " + b.Namespace
		}
		// Each trial is told its own SMTP port, where it has one; else
		// the writer's.
		wantPort := w.ports[dest]
		if wantPort == 0 {
			_, p, _ := net.SplitHostPort(in.smtp)
			wantPort, _ = strconv.Atoi(p)
		}
		if b.SMTPPort != wantPort {
			t.Errorf("%s: bootstrap of %s hands out SMTP port %d, want %d", what, nsOf(dest), b.SMTPPort, wantPort)
			return false, a.body
		}
		return true, a.body
	case "writer /emails":
		a, err := w.postEmail(w.hc, in.url, c.value, "", emailBody(senderOf(w.profile), "cell@example.com", subject, "x"))
		if err != nil {
			t.Fatalf("POST /emails: %v", err)
		}
		if a.status != 200 {
			return refusal(a)
		}
		return dest >= 0, a.body // where it went, checkDestinations judges
	case "writer /emails/batch", "writer smtp auth":
		return w.authCell(r, in, dest, c, subject) // matrix_auth_test.go
	case "writer smtp fixed", "writer smtp select":
		res := w.sendSMTP(in.smtp, senderOf(w.profile), []string{"cell@example.com"},
			rawMail(subject, "x", smtpd.NamespaceHeader+": "+nsOf(target), smtpd.CapabilityHeader+": "+c.value))
		if res.code == 250 {
			return dest >= 0, ""
		}
		if res.code < 500 {
			t.Errorf("%s naming %s: refused with %d %s, want a 5xx", what, nsOf(target), res.code, res.err)
		}
		if r.selects == selInstance && in.shared && res.code != 530 {
			t.Errorf("%s: plain SMTP on the shared writer answered %d %s, want 530 (authenticate)", what, res.code, res.err)
		}
		return false, fmt.Sprint(res.code, res.err)
	case "inbox root":
		a := get("/")
		if a.status >= 200 && a.status < 400 {
			// Only ever a redirect to the inbox's own token URL.
			return a.status == http.StatusFound && dest >= 0 && a.header.Get("Location") == "/inbox/"+w.ids[dest].InboxToken,
				fmt.Sprintf("%d to the inbox of %s", a.status, whoseToken(w.ids, strings.TrimPrefix(a.header.Get("Location"), "/inbox/")))
		}
		return refusal(a)
	case "inbox inbox", "inbox message", "inbox text", "inbox frame":
		path := "/inbox/" + url.PathEscape(c.value)
		switch r.kind {
		case "message":
			path += "/messages/1"
		case "text":
			path += "/messages/1/text"
		case "frame":
			path += "/messages/1/html"
		}
		a := get(path)
		if a.status != 200 {
			return refusal(a)
		}
		return w.pageOf(a.body, dest, what), ""
	case "inbox ping":
		a, err := w.sys.request(w.hc, http.MethodPost, in.url+"/inbox/"+url.PathEscape(c.value)+"/messages/1/ping/0", auth, "PING",
			map[string]string{"Content-Type": "text/ping"})
		if err != nil {
			t.Fatalf("POST %s of the %s: %v", r.kind, in.name, err)
		}
		if a.status != http.StatusNoContent {
			return refusal(a)
		}
		return dest >= 0, "" // a click answers nothing: its trail holds it
	case "inbox mcp":
		a, err := w.sys.request(w.hc, http.MethodPost, in.url+"/mcp/"+url.PathEscape(c.value), auth,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_message","arguments":{"id":1}}}`,
			map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
		if err != nil {
			t.Fatalf("POST %s of the %s: %v", r.kind, in.name, err)
		}
		if a.status != 200 {
			return refusal(a)
		}
		var m struct {
			Result *struct {
				IsError           bool `json:"isError"`
				StructuredContent struct{ Subject string }
			}
		}
		json.Unmarshal([]byte(a.body), &m)
		if m.Result == nil || m.Result.IsError {
			return false, a.body // an MCP error: no mailbox here
		}
		if dest >= 0 && m.Result.StructuredContent.Subject != seed(w.ids[dest]) {
			t.Errorf("%s: read %q, not %s's message 1", what, m.Result.StructuredContent.Subject, w.ids[dest].Namespace)
			return false, a.body
		}
		return true, ""
	case "gateway list", "gateway latest", "gateway message":
		path := "/api/namespaces/" + nsOf(target) + "/messages"
		switch r.kind {
		case "latest":
			path += "/latest"
		case "message":
			path += "/1"
		}
		a := get(path)
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
			t.Errorf("%s of %s: no message", what, nsOf(target))
			return false, a.body
		}
		for _, m := range msgs {
			if m.Namespace != nsOf(target) {
				t.Errorf("%s of %s: a message of %s", what, nsOf(target), m.Namespace)
				return false, a.body
			}
		}
		return true, ""
	case "gateway events":
		a := get("/api/namespaces/" + nsOf(target) + "/events")
		if a.status != 200 {
			return refusal(a)
		}
		var page struct{ Events []struct{ Namespace string } }
		json.Unmarshal([]byte(a.body), &page)
		if len(page.Events) == 0 {
			t.Errorf("%s of %s: no event", what, nsOf(target))
			return false, a.body
		}
		for _, e := range page.Events {
			if e.Namespace != nsOf(target) {
				t.Errorf("%s of %s: an event of %s", what, nsOf(target), e.Namespace)
				return false, a.body
			}
		}
		return true, ""
	case "gateway webhooks":
		// The matrix's trials have no webhooks: an allowed read is an
		// empty list, a refused one no list at all.
		a := get("/api/namespaces/" + nsOf(target) + "/webhooks")
		if a.status != 200 {
			return refusal(a)
		}
		var page struct{ Webhooks []json.RawMessage }
		if err := json.Unmarshal([]byte(a.body), &page); err != nil || page.Webhooks == nil || len(page.Webhooks) != 0 {
			t.Errorf("%s of %s: %s", what, nsOf(target), a.body)
			return false, a.body
		}
		return true, ""
	case "gateway inbox", "gateway inbox_message":
		path := "/inbox/" + nsOf(target)
		if r.kind == "inbox_message" {
			path += "/messages/1"
		}
		a := get(path)
		if a.status != 200 {
			return refusal(a)
		}
		return w.pageOf(a.body, target, what), ""
	}
	t.Fatalf("no request for route %s %s", r.surface, r.kind)
	return false, ""
}

// whoseToken names the trial whose inbox token tok is, without showing it.
func whoseToken(ids [2]rpc.Identity, tok string) string {
	for i, id := range ids {
		if tok == id.InboxToken {
			return trialName(i)
		}
	}
	return "no trial"
}

// pageOf checks that an HTML page shows namespace i's mail and not the
// other's.
func (w *world) pageOf(body string, i int, what string) bool {
	if i < 0 {
		return true // a success the table does not permit: the cell fails
	}
	mine, other := seed(w.ids[i]), seed(w.ids[1-i])
	if !strings.Contains(body, mine) || strings.Contains(body, other) {
		w.t.Errorf("%s: the page does not show exactly %s's mail", what, w.ids[i].Namespace)
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
		{"writer", "internal/writer", "routes"},
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
	w.checkProviderTable(routes) // matrix_providers_test.go
}

// routeTable reads the string keys (of a map) or elements (of an array or
// slice) of the package-level variable name declared in dir's Go files.
func routeTable(t testing.TB, dir, name string) []string {
	t.Helper()
	var out []string
	for _, f := range sourceFiles(t, dir) {
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

// sourceFiles parses dir's Go files, its tests left out.
func sourceFiles(t interface {
	Fatal(...any)
	Helper()
}, dir string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var files []*ast.File
	for _, path := range matches {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}
