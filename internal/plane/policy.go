package plane

import (
	"slices"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The plane's whole policy, in one table (OpenSSH's mon_dispatch_proto20):
// a row per method says who may call it, what each caller's call is bound
// to and which view its reads go through, the kinds of credential the call
// may present (each with its keys per profile, its rules and its refusal),
// whether and how long it waits, its framing, and its handler (whose
// request and response types the row exports). The dispatcher (server.go)
// and the binding (bind.go) read the row, each through its own index kept
// beside it (byMethod, credentials); no handler asks who is calling.
// A method not in the table, or a principal not in its row, is refused
// and logged.
//
// Adding a method: add its row to table, with its handler built by bound
// (a call bound to a trial or namespace by what it presents: give the
// selector, the Broker method and the trail's event), unbound (bound to
// nothing), adminCall or operatorCall (bind.go); a method that waits
// also goes in pkg/rpc's waitBounds (the client's). Then `make policy` rewrites
// the golden file (testdata/policy.json) and docs/rpc.md's table; read
// the diff: the golden file is what the isolation matrix
// (internal/hardening) expects, so a row changes with its golden file in
// the same commit (TestPolicyGolden, TestPolicyDoc and TestClientWaitBounds
// fail until all agree).

// principal is who holds a grant: a role, and for writer and inbox whether
// the grant is bound to one trial (strict mode: one surface process per
// trial) or shared by every trial of the plane.
type principal struct {
	role   rpc.Role
	shared bool
}

var (
	writer       = principal{role: rpc.RoleWriter}
	sharedWriter = principal{role: rpc.RoleWriter, shared: true}
	inbox        = principal{role: rpc.RoleInbox}
	sharedInbox  = principal{role: rpc.RoleInbox, shared: true}
	gateway      = principal{role: rpc.RoleGateway}
	admin        = principal{role: rpc.RoleAdmin}
	console      = principal{role: rpc.RoleConsole}
	hooks        = principal{role: rpc.RoleHooks}
)

// principals are every principal, in the order the table's columns are printed.
var principals = []principal{writer, sharedWriter, inbox, sharedInbox, gateway, admin, console, hooks}

// binding says what a principal's call is bound to. It is resolved before
// the call's handler runs (bind.go), so a handler receives its trial and
// namespace and cannot derive them again.
type binding int

const (
	bindNothing    binding = iota + 1 // health: touches no namespace
	bindTrial                         // the trial the grant is bound to
	bindCredential                    // the trial the credential its caller presented opens
	bindCapability                    // a namespace the call names, opened by its read capability
	bindPlane                         // the whole plane (admin)
	bindOperator                      // the whole plane, read for the operator whose admin grant the call carries (console)
)

var bindingNames = map[binding]string{bindNothing: "nothing", bindTrial: "trial", bindCredential: "credential",
	bindCapability: "capability", bindPlane: "plane", bindOperator: "operator"}

// framing is how a call's body is encoded.
type framing int

const (
	frameJSON framing = iota // one JSON object
	frameSend                // a send's frame: a line of JSON, a newline, the message (rpc.SendRequest.Frame)
)

var framingNames = map[framing]string{frameJSON: "json", frameSend: "send"}

// access is what a row gives one principal: what its call is bound to,
// the view its reads go through (nil: it reads no mail), and for health
// whether it is told the count of refusals that named no trail.
type access struct {
	bind     binding
	view     *view
	unbounds bool
}

// view is what a reader may see of a namespace's mail, and how its reads
// are named; list, get, latest, click and events answer through it.
type view struct {
	name      string
	door      string   // the trail's door for its reads
	recipient bool     // may narrow a read to one recipient; else it sees the whole namespace
	html      bool     // is given a message's HTML part (the agent's lists are not: markUnread)
	faults    bool     // is told which messages a fault delayed or duplicated (faults.go)
	labels    bool     // is told the label of mail the evaluator planted (agent.go)
	agent     bool     // its reads are the agent's: a get is an open, at the door it came by (inbox or inbox-mcp)
	closed    credKind // the refusal it gets when its trial closes under a read
}

var (
	agentView     = &view{name: "agent", door: evidence.DoorInbox, html: true, agent: true, closed: credInbox}
	evaluatorView = &view{name: "evaluator", door: evidence.DoorGateway, recipient: true, html: true, faults: true, labels: true, closed: credRead}
	// The operator's console reads mail only to search subjects; its pages
	// come from console.go, which shows everything but secrets.
	operatorView = &view{name: "operator", door: evidence.DoorPlane, recipient: true, html: true, faults: true, labels: true, closed: credRead}
)

// rule is a check a credential's binding makes beyond its keys (opens, bind.go).
type rule uint8

const (
	// authPortMatches: SMTP AUTH on one trial's own port opens that trial
	// only; another trial's token there is refused as a wrong one is.
	authPortMatches rule = 1 << iota
	// portOwned: plain SMTP on a port opens the trial that owns it, for a
	// shared writer (a trial-bound writer's plain SMTP is its trial's).
	portOwned
	// sharedDoorsOnly: a netns door opens the trial that owns it, for a
	// shared writer only.
	sharedDoorsOnly
	// ownNamespaceOnly: a trial-bound inbox names, at most, its own
	// namespace (else permission_denied): its grant is its trial.
	ownNamespaceOnly
)

var ruleNames = []struct {
	rule rule
	name string
}{{authPortMatches, "auth_port_matches"}, {portOwned, "port_owned"}, {sharedDoorsOnly, "shared_doors_only"},
	{ownNamespaceOnly, "own_namespace_only"}}

func (r rule) has(f rule) bool { return r&f != 0 }

// secret is one of a trial's secrets that a presented credential is
// compared with, named as the trail and the exported table name it.
type secret string

const (
	secretMailAPIToken    secret = "mail_api_token"
	secretWriteCapability secret = "write_capability"
	secretBootstrapToken  secret = "bootstrap_token"
	secretReadCapability  secret = "read_capability"
	secretInboxToken      secret = "inbox_token"
)

// profile is a kind of trial. apiToken is the secret its mail API is
// opened with (a candidate's mail-API token, another profile's bootstrap
// token), the token providers hands out and its SES secret is made from.
type profile struct {
	name     string
	apiToken secret
}

var profiles = []profile{
	{name: rpc.ProfileCandidate, apiToken: secretMailAPIToken},
	{name: rpc.ProfileSidecar, apiToken: secretBootstrapToken},
	{name: rpc.ProfileAuthoring, apiToken: secretBootstrapToken},
}

// profileOf is the profile named name; a zero profile if there is none.
func profileOf(name string) profile {
	i := slices.IndexFunc(profiles, func(p profile) bool { return p.name == name })
	if i < 0 {
		return profile{}
	}
	return profiles[i]
}

// credential is a kind of credential a call presents to be bound: its
// name in the trail, the trial's secrets it may be for each profile
// (opens compares it with these and nothing else; a credential keyed by a
// port, a door or a signature has none), its rules, and its refusal when
// it opens nothing, the same whether it is unknown, another trial's, or a
// closed one's.
type credential struct {
	kind    credKind
	name    string
	keys    map[string][]secret
	grantOf *principal // a grant, of this principal, rather than a trial's secret
	rules   rule
	refused *rpc.Error
}

var (
	noCredential = &credential{kind: credNone, refused: rpc.Errorf(rpc.CodeBadRequest, "the call names no credential")}
	// POST /emails's Bearer token, and a provider API's.
	writeCred = &credential{kind: credWrite, name: "mail_api_token",
		keys:    candidateOr([]secret{secretMailAPIToken, secretWriteCapability}, secretBootstrapToken),
		refused: rpc.Errorf(rpc.CodeUnauthorized, "the credential does not open a trial's mail API")}
	authCred = &credential{kind: credAuth, name: "mail_api_token", rules: authPortMatches,
		keys:    candidateOr([]secret{secretMailAPIToken, secretWriteCapability}, secretBootstrapToken),
		refused: rpc.Errorf(rpc.CodeUnauthorized, "the credential does not open a trial's mail API")}
	sigV4Cred = &credential{kind: credSigV4, name: "sigv4_signature",
		refused: rpc.Errorf(rpc.CodeUnauthorized, "the signature does not open a trial's mail API")}
	portCred = &credential{kind: credPort, name: "smtp_port", rules: portOwned,
		refused: rpc.Errorf(rpc.CodeUnauthorized, "no trial owns this SMTP port: authenticate")}
	doorCred = &credential{kind: credDoor, name: "netns", rules: sharedDoorsOnly,
		refused: rpc.Errorf(rpc.CodeUnauthorized, "no trial owns this SMTP port: authenticate")}
	selectCred = &credential{kind: credSelect, name: "capability_header",
		keys:    candidateOr([]secret{secretWriteCapability}, secretReadCapability),
		refused: rpc.Errorf(rpc.CodeInvalidCapability, "namespace or capability does not match")}
	bootstrapCred = &credential{kind: credBootstrap, name: "bootstrap_token",
		keys:    candidateOr([]secret{secretBootstrapToken}, secretBootstrapToken),
		refused: rpc.Errorf(rpc.CodeForbidden, "the token does not open a trial's bootstrap")}
	inboxCred = &credential{kind: credInbox, name: "inbox_token",
		keys:    candidateOr([]secret{secretInboxToken}, secretInboxToken),
		refused: rpc.Errorf(rpc.CodeNotFound, "no such inbox")}
	// The operator's grant a console's call carries.
	operatorCred = &credential{kind: credOperator, name: "admin_grant", grantOf: &admin,
		refused: rpc.Errorf(rpc.CodeUnauthenticated, "the operator's credential is not a valid admin grant")}
	readCred = &credential{kind: credRead, name: "read_capability", rules: ownNamespaceOnly,
		keys:    candidateOr([]secret{secretReadCapability}, secretReadCapability),
		refused: rpc.Errorf(rpc.CodeForbidden, "the capability does not open this namespace")}
)

// candidateOr is a credential's keys: a candidate trial's secrets, and
// the one secret of every other profile (sidecar, authoring).
func candidateOr(candidate []secret, other secret) map[string][]secret {
	out := map[string][]secret{}
	for _, p := range profiles {
		out[p.name] = []secret{other}
	}
	out[rpc.ProfileCandidate] = candidate
	return out
}

// Credentials rows accept.
var (
	writeCreds = []*credential{writeCred, authCred, sigV4Cred}
	sendCreds  = []*credential{writeCred, authCred, sigV4Cred, portCred, selectCred, doorCred}
	portCreds  = []*credential{portCred, doorCred}
	readCreds  = []*credential{inboxCred, readCred}
)

// row is one method of the table.
type row struct {
	method  string
	who     map[principal]access
	accepts []*credential
	// waits is the longest the call waits (a long poll, which ends when its
	// caller goes away); its deadline is callLimit plus this. 0: it does
	// not wait.
	waits   time.Duration
	framing framing
	call    handler
}

// Who may call what, bound how, reading what. (Shared writer and inbox
// serve every trial: their calls are bound by what they present.)
var (
	writers   = map[principal]access{writer: {bind: bindTrial}, sharedWriter: {bind: bindCredential}}
	agents    = map[principal]access{inbox: {bind: bindTrial, view: agentView}, sharedInbox: {bind: bindCredential, view: agentView}}
	readers   = map[principal]access{inbox: {bind: bindTrial, view: agentView}, sharedInbox: {bind: bindCredential, view: agentView}, gateway: {bind: bindCapability, view: evaluatorView}}
	evaluator = map[principal]access{gateway: {bind: bindCapability, view: evaluatorView}}
)

// table is the plane's policy and its dispatch.
var table = []row{
	{method: rpc.MethodHealth,
		who: map[principal]access{writer: {bind: bindNothing}, sharedWriter: {bind: bindNothing}, inbox: {bind: bindNothing},
			sharedInbox: {bind: bindNothing}, gateway: {bind: bindNothing}, admin: {bind: bindNothing, unbounds: true}, console: {bind: bindNothing}},
		call: unbound((*Broker).Health)},
	{method: rpc.MethodSend, who: writers, accepts: sendCreds, framing: frameSend,
		call: metered(bound(sendSelector, (*Broker).Send, sendEvent))},
	// The writer's credential check, and its refusal of a malformed
	// request, are recorded as the send they stand for.
	{method: rpc.MethodCredentialCheck, who: writers, accepts: writeCreds,
		call: bound(credentialSelector, (*Broker).CheckCredential, checkEvent)},
	{method: rpc.MethodRefusal, who: writers, accepts: writeCreds,
		call: meteredRefusal(bound(refusalSelector, (*Broker).Refused, refusalEvent))},
	{method: rpc.MethodBootstrap, who: writers, accepts: []*credential{bootstrapCred},
		call: bound(bootstrapSelector, (*Broker).Bootstrap, bootstrapEvent)},
	{method: rpc.MethodReport, who: writers, accepts: portCreds,
		call: bound(reportSelector, (*Broker).Report, reportEvent)},
	{method: rpc.MethodList, who: readers, accepts: readCreds, waits: rpc.MaxWait,
		call: meteredRead(bound(readSelector, (*Broker).List, listEvent))},
	{method: rpc.MethodGet, who: readers, accepts: readCreds,
		call: meteredRead(bound(readSelector, (*Broker).Get, getEvent))},
	// The agent's click on a link of a message (its browser's ping),
	// bound as the inbox's reads are: the plane checks the link against
	// the stored message (agent.go).
	{method: rpc.MethodClick, who: agents, accepts: readCreds,
		call: bound(clickSelector, (*Broker).Click, clickEvent)},
	// The agent's flags over IMAP (\Seen, \Flagged), kept per trial, bound
	// as its clicks: the plane checks each id names a stored message.
	{method: rpc.MethodFlag, who: agents, accepts: readCreds,
		call: bound(flagSelector, (*Broker).Flag, flagEvent)},
	// A reader's check before a shared surface serves its request (a
	// shared inbox's token, the gateway's capability), bound as its reads
	// are: it answers the namespace, the key of the caller's fair share,
	// reads nothing and records nothing; a refusal is counted as every
	// refusal that names no trail is.
	{method: rpc.MethodReadCheck,
		who:     map[principal]access{sharedInbox: {bind: bindCredential}, gateway: {bind: bindCapability}},
		accepts: readCreds, call: bound(readSelector, (*Broker).CheckReader, nil)},
	{method: rpc.MethodLatest, who: evaluator, accepts: readCreds, waits: rpc.MaxWait,
		call: meteredRead(bound(readSelector, (*Broker).Latest, latestEvent))},
	// Reading a trail is not itself recorded: it would only record itself.
	{method: rpc.MethodEvents, who: evaluator, accepts: []*credential{readCred}, waits: rpc.MaxWait,
		call: bound(eventsSelector, (*Broker).Events, nil)},
	// The evaluator's list of a trial's webhook events and their attempts,
	// bound as reading its trail is; it reads no mail.
	{method: rpc.MethodWebhooksList, who: map[principal]access{gateway: {bind: bindCapability}}, accepts: []*credential{readCred},
		call: bound(webhooksSelector, (*Broker).ListWebhooks, nil)},
	adminRow(rpc.MethodExport, adminCall((*Broker).Export)),
	adminRow(rpc.MethodTrialCreate, adminCall((*Broker).CreateTrial)),
	adminRow(rpc.MethodTrialOpen, adminCall((*Broker).OpenTrial)),
	adminRow(rpc.MethodTrialRotate, adminCall((*Broker).RotateTrial)),
	adminRow(rpc.MethodTrialSeal, adminCall((*Broker).SealTrial)),
	adminRow(rpc.MethodTrialClose, adminCall((*Broker).CloseTrial)),
	adminRow(rpc.MethodTrialList, adminCall((*Broker).ListTrials)),
	adminRow(rpc.MethodTrialInfo, adminCall((*Broker).InfoTrial)),
	adminRow(rpc.MethodTrialPlant, adminCall((*Broker).Plant)),
	adminRow(rpc.MethodTrialFaults, adminCall((*Broker).SetFaults)),
	adminRow(rpc.MethodGrantCreate, adminCall((*Broker).CreateGrant)),
	{method: rpc.MethodPortsSync, who: map[principal]access{admin: {bind: bindPlane}}, waits: rpc.MaxWait,
		call: adminCall((*Broker).SyncPorts)},
	// Only the admin aims a trial's webhooks: no candidate can point the
	// hooks process anywhere.
	adminRow(rpc.MethodTrialWebhooks, adminCall((*Broker).SetWebhooks)),
	// The hooks process: it is handed webhook events to deliver, whole and
	// signed, and reports each attempt; it reads no mail, holds no trial's
	// key and chooses no URL.
	{method: rpc.MethodWebhooksTake, who: map[principal]access{hooks: {bind: bindPlane}}, waits: rpc.MaxWait,
		call: adminCall((*Broker).TakeWebhooks)},
	{method: rpc.MethodWebhooksReport, who: map[principal]access{hooks: {bind: bindPlane}},
		call: adminCall((*Broker).ReportWebhook)},
	// The operator's console: read-only, and each call must carry the
	// admin grant the console's own caller presented.
	operatorRow(rpc.MethodConsoleTrials, operatorCall((*Broker).ConsoleTrials)),
	operatorRow(rpc.MethodConsoleTrial, operatorCall((*Broker).ConsoleTrial)),
	{method: rpc.MethodConsoleWait, who: map[principal]access{console: {bind: bindOperator}}, accepts: []*credential{operatorCred}, waits: rpc.MaxWait,
		call: operatorCall((*Broker).ConsoleWait)},
	operatorRow(rpc.MethodMetrics, operatorCall((*Broker).Metrics)),
}

// adminRow is an operator's method: admin grants only, bound to the
// whole plane; it does not wait.
func adminRow(method string, h handler) row {
	return row{method: method, who: map[principal]access{admin: {bind: bindPlane}}, call: h}
}

// operatorRow is a console's method: console grants only, bound to the
// operator whose admin grant the request carries (the binding checks it:
// the console's grant alone reads nothing); it does not wait.
func operatorRow(method string, h handler) row {
	return row{method: method, who: map[principal]access{console: {bind: bindOperator}}, accepts: []*credential{operatorCred}, call: h}
}
