package plane

import (
	"context"
	"slices"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/pkg/rpc"
)

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

// principalOf is who holds g: a writer's or inbox's grant with no trial
// is a shared surface's.
func principalOf(g ledger.Grant) principal {
	role := rpc.Role(g.Role)
	return principal{role: role, shared: g.TrialID == 0 && (role == rpc.RoleWriter || role == rpc.RoleInbox)}
}

func (p principal) String() string {
	if p.shared {
		return "shared " + string(p.role)
	}
	return string(p.role)
}

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

// bindingNames are the bindings as Policy names them.
var bindingNames = map[binding]string{bindNothing: "nothing", bindTrial: "trial", bindCredential: "credential",
	bindCapability: "capability", bindPlane: "plane", bindOperator: "operator"}

// framing is how a call's body is encoded.
type framing int

const (
	frameJSON framing = iota // one JSON object
	frameSend                // a send's frame: a line of JSON, a newline, the message (rpc.SendRequest.Frame)
)

// framingNames are the framings as Policy names them.
var framingNames = map[framing]string{frameJSON: "json", frameSend: "send"}

// method is one row of the plane's authorization table: who may call it,
// bound to what, the kinds of credential its call may present to be bound
// (checked by opens, bind.go), whether it answers mail (seen through the
// caller's view), whether it waits (a long poll: it ends
// when its caller goes away), how its body is framed, and its handler
// (decode, resolve the binding, answer).
type method struct {
	roles   map[principal]binding
	accepts []credKind
	reads   bool // answers mail, as each role's view (views) allows
	waits   bool
	framing framing
	call    handler
}

// handler decodes a call's body, framed as its row says, resolves its
// binding for c and answers.
type handler func(b *Broker, ctx context.Context, c caller, f framing, body []byte) (any, error)

// Kinds of credential a row accepts.
var (
	writeKinds = []credKind{credWrite, credAuth, credSigV4}
	sendKinds  = []credKind{credWrite, credAuth, credSigV4, credPort, credSelect, credDoor}
	portKinds  = []credKind{credPort, credDoor}
	readKinds  = []credKind{credInbox, credRead}
)

// methods is the plane's whole authorization policy and its dispatch: a
// method that is not here, or a principal not listed for it, is refused
// and logged; nothing is passed through.
var methods = map[string]method{
	rpc.MethodHealth: {
		roles: map[principal]binding{writer: bindNothing, sharedWriter: bindNothing, inbox: bindNothing,
			sharedInbox: bindNothing, gateway: bindNothing, admin: bindNothing, console: bindNothing},
		call: unbound(func(b *Broker, ctx context.Context, c caller, _ *rpc.Empty) (rpc.HealthResponse, error) {
			return b.Health(ctx, c.role), nil
		}),
	},
	rpc.MethodSend: {
		roles:   map[principal]binding{writer: bindTrial, sharedWriter: bindCredential},
		accepts: sendKinds,
		framing: frameSend,
		call:    metered(bound(sendSelector, (*Broker).Send, sendEvent)),
	},
	// The writer's credential check, and its refusal of a malformed
	// request, are recorded as the send they stand for.
	rpc.MethodCredentialCheck: {
		roles:   map[principal]binding{writer: bindTrial, sharedWriter: bindCredential},
		accepts: writeKinds,
		call:    bound(credentialSelector, (*Broker).CheckCredential, checkEvent),
	},
	rpc.MethodRefusal: {
		roles:   map[principal]binding{writer: bindTrial, sharedWriter: bindCredential},
		accepts: writeKinds,
		call: meteredRefusal(bound(func(r *rpc.RefusalRequest) selector { return credentialSelector(&r.CredentialRequest) },
			(*Broker).Refused, refusalEvent)),
	},
	rpc.MethodBootstrap: {
		roles:   map[principal]binding{writer: bindTrial, sharedWriter: bindCredential},
		accepts: []credKind{credBootstrap},
		call: bound(func(r *rpc.BootstrapRequest) selector { return selector{kind: credBootstrap, credential: r.Token} },
			(*Broker).Bootstrap, bootstrapEvent),
	},
	rpc.MethodReport: {
		roles:   map[principal]binding{writer: bindTrial, sharedWriter: bindCredential},
		accepts: portKinds,
		call: bound(func(r *rpc.ReportRequest) selector {
			if r.Door != "" {
				return selector{kind: credDoor, door: r.Door}
			}
			return selector{kind: credPort, port: r.Port}
		},
			(*Broker).Report, reportEvent),
	},
	rpc.MethodList: {
		roles:   map[principal]binding{inbox: bindTrial, sharedInbox: bindCredential, gateway: bindCapability},
		accepts: readKinds,
		reads:   true,
		waits:   true,
		call:    meteredRead(bound(readSelector, (*Broker).List, listEvent)),
	},
	rpc.MethodGet: {
		roles:   map[principal]binding{inbox: bindTrial, sharedInbox: bindCredential, gateway: bindCapability},
		accepts: readKinds,
		reads:   true,
		call:    meteredRead(bound(readSelector, (*Broker).Get, getEvent)),
	},
	// The agent's click on a link of a message (its browser's ping),
	// bound as the inbox's reads are: the plane checks the link against
	// the stored message (agent.go).
	rpc.MethodClick: {
		roles:   map[principal]binding{inbox: bindTrial, sharedInbox: bindCredential},
		accepts: readKinds,
		call: bound(func(r *rpc.ClickRequest) selector { return readSelector(&rpc.ReadRequest{InboxToken: r.InboxToken}) },
			(*Broker).Click, clickEvent),
	},
	// A reader's check before a shared surface serves its request (a
	// shared inbox's token, the gateway's capability), bound as its reads
	// are: it answers the namespace, the key of the caller's fair share,
	// and records nothing; a refusal is counted as every refusal that
	// names no trail is.
	rpc.MethodReadCheck: {
		roles:   map[principal]binding{sharedInbox: bindCredential, gateway: bindCapability},
		accepts: readKinds,
		call:    bound(readSelector, (*Broker).CheckReader, nil),
	},
	rpc.MethodLatest: {
		roles:   map[principal]binding{gateway: bindCapability},
		accepts: readKinds,
		reads:   true,
		waits:   true,
		call:    meteredRead(bound(readSelector, (*Broker).Latest, latestEvent)),
	},
	// Reading a trail is not itself recorded: it would only record itself.
	rpc.MethodEvents: {
		roles:   map[principal]binding{gateway: bindCapability},
		accepts: []credKind{credRead},
		waits:   true,
		call: bound(func(r *rpc.EventsRequest) selector {
			return selector{kind: credRead, credential: r.Capability, namespace: r.Namespace}
		}, (*Broker).Events, nil),
	},
	// The evaluator's list of a trial's webhook events, bound as reading
	// its trail is.
	rpc.MethodWebhooksList: {
		roles:   map[principal]binding{gateway: bindCapability},
		accepts: []credKind{credRead},
		call: bound(func(r *rpc.WebhooksListRequest) selector {
			return selector{kind: credRead, credential: r.Capability, namespace: r.Namespace}
		}, (*Broker).ListWebhooks, nil),
	},
	rpc.MethodExport:      adminCall((*Broker).Export),
	rpc.MethodTrialCreate: adminCall((*Broker).CreateTrial),
	rpc.MethodTrialOpen:   adminCall((*Broker).OpenTrial),
	rpc.MethodTrialRotate: adminCall((*Broker).RotateTrial),
	rpc.MethodTrialSeal:   adminCall((*Broker).SealTrial),
	rpc.MethodTrialClose:  adminCall((*Broker).CloseTrial),
	rpc.MethodTrialList:   adminCall((*Broker).ListTrials),
	rpc.MethodTrialInfo:   adminCall((*Broker).InfoTrial),
	rpc.MethodTrialPlant:  adminCall((*Broker).Plant),
	rpc.MethodTrialFaults: adminCall((*Broker).SetFaults),
	rpc.MethodGrantCreate: adminCall((*Broker).CreateGrant),
	rpc.MethodPortsSync:   waiting(adminCall((*Broker).SyncPorts)),
	// Only the admin aims a trial's webhooks: no candidate can point the
	// hooks process anywhere.
	rpc.MethodTrialWebhooks: adminCall((*Broker).SetWebhooks),
	// The hooks process: it is handed webhook events to deliver, whole
	// and signed, and reports each attempt; it reads no mail, holds no
	// trial's key and chooses no URL.
	rpc.MethodWebhooksTake:   waiting(hooksCall((*Broker).TakeWebhooks)),
	rpc.MethodWebhooksReport: hooksCall((*Broker).ReportWebhook),
	// The operator's console: read-only, and each call must carry the
	// admin grant the console's own caller presented.
	rpc.MethodConsoleTrials: operatorCall((*Broker).ConsoleTrials),
	rpc.MethodConsoleTrial:  operatorCall((*Broker).ConsoleTrial),
	rpc.MethodConsoleWait:   waiting(operatorCall((*Broker).ConsoleWait)),
	rpc.MethodMetrics:       operatorCall((*Broker).Metrics),
}

// waiting marks m's row as a long poll.
func waiting(m method) method {
	m.waits = true
	return m
}

// view is what a reading role may see of a namespace's mail, and how its
// reads are named; list, get and latest answer through it.
type view struct {
	door      string   // the trail's door for its reads
	recipient bool     // may narrow a read to one recipient; else it sees the whole namespace
	html      bool     // is given a message's HTML part (the agent's lists are not: markUnread)
	faults    bool     // is told which messages a fault delayed or duplicated (faults.go)
	labels    bool     // is told the label of mail the evaluator planted (agent.go)
	agent     bool     // its reads are the agent's: a get is an open, at the door it came by (inbox or inbox-mcp)
	closed    credKind // the refusal it gets when its trial closes under a read
}

// views is what each reading role may see: the third part of the table.
var views = map[rpc.Role]view{
	rpc.RoleInbox:   {door: evidence.DoorInbox, recipient: false, html: true, faults: false, labels: false, agent: true, closed: credInbox},
	rpc.RoleGateway: {door: evidence.DoorGateway, recipient: true, html: true, faults: true, labels: true, agent: false, closed: credRead},
	// The operator's console reads mail only to search subjects; its pages
	// come from console.go, which shows everything but secrets.
	rpc.RoleConsole: {door: evidence.DoorPlane, recipient: true, html: true, faults: true, labels: true, agent: false, closed: credRead},
}

// secret is one of a trial's secrets that a presented credential is
// compared with.
type secret int

const (
	secretMailAPIToken secret = iota + 1
	secretWriteCapability
	secretBootstrapToken
	secretReadCapability
	secretInboxToken
)

// secretNames are the secrets as the trail and Keys name them.
var secretNames = map[secret]string{secretMailAPIToken: "mail_api_token", secretWriteCapability: "write_capability",
	secretBootstrapToken: "bootstrap_token", secretReadCapability: "read_capability", secretInboxToken: "inbox_token"}

// keys is the other half of the table: for each kind of credential a
// bound call presents, and each profile of trial, the trial's secrets
// that credential may be (opens, bind.go, compares it with these and
// nothing else). Credentials keyed by a port or a netns door present no
// secret: the port or door is the key.
var keys = map[credKind]map[string][]secret{
	credWrite:     candidateOr([]secret{secretMailAPIToken, secretWriteCapability}, secretBootstrapToken),
	credAuth:      candidateOr([]secret{secretMailAPIToken, secretWriteCapability}, secretBootstrapToken),
	credSelect:    candidateOr([]secret{secretWriteCapability}, secretReadCapability),
	credBootstrap: candidateOr([]secret{secretBootstrapToken}, secretBootstrapToken),
	credInbox:     candidateOr([]secret{secretInboxToken}, secretInboxToken),
	credRead:      candidateOr([]secret{secretReadCapability}, secretReadCapability),
}

// candidateOr is a row of keys: a candidate trial's secrets, and the one
// secret of every other profile (sidecar, authoring).
func candidateOr(candidate []secret, other secret) map[string][]secret {
	out := map[string][]secret{}
	for _, p := range profiles {
		out[p] = []secret{other}
	}
	out[rpc.ProfileCandidate] = candidate
	return out
}

// bound is a handler whose call is bound to a trial or namespace: the
// selector its request presents is resolved (bind.go) before h runs. Its
// outcome, allowed or refused, is recorded in the namespace's trail by ev
// (evidence.go) before it is answered; a call refused before a namespace
// was found has no trail, and is counted.
func bound[Req, Resp any](sel func(*Req) selector, h func(*Broker, context.Context, target, *Req) (Resp, error), ev evidencer[Req, Resp]) handler {
	return func(b *Broker, ctx context.Context, c caller, f framing, body []byte) (any, error) {
		var req Req
		if err := decode(f, body, &req); err != nil {
			return nil, err
		}
		t, err := b.resolve(ctx, c, sel(&req))
		if err != nil {
			if ev != nil && t.ns.Name != "" {
				var none Resp
				b.record(ctx, t, ev(t, &req, none, err))
			} else if t.ns.Name == "" && !rpc.IsOutage(err) {
				b.unbound.add()
			}
			return nil, err
		}
		resp, err := h(b, ctx, t, &req)
		if ev != nil {
			b.record(ctx, t, ev(t, &req, resp, err))
		}
		return resp, err
	}
}

// unbound is a handler whose call touches no trial.
func unbound[Req, Resp any](h func(*Broker, context.Context, caller, *Req) (Resp, error)) handler {
	return func(b *Broker, ctx context.Context, c caller, f framing, body []byte) (any, error) {
		var req Req
		if err := decode(f, body, &req); err != nil {
			return nil, err
		}
		return h(b, ctx, c, &req)
	}
}

// adminCall is a row for an operator's method: admin grants only, bound
// to the whole plane.
func adminCall[Req, Resp any](h func(*Broker, context.Context, *Req) (Resp, error)) method {
	return method{
		roles: map[principal]binding{admin: bindPlane},
		call: unbound(func(b *Broker, ctx context.Context, _ caller, req *Req) (Resp, error) {
			return h(b, ctx, req)
		}),
	}
}

// hooksCall is a row for the hooks process's methods: hooks grants
// only, bound to the whole plane's outbox.
func hooksCall[Req, Resp any](h func(*Broker, context.Context, *Req) (Resp, error)) method {
	m := adminCall(h)
	m.roles = map[principal]binding{hooks: bindPlane}
	return m
}

// operatorCall is a row for a console's method: console grants only,
// bound to the operator whose admin grant the request carries (the
// binding checks it: the console's grant alone reads nothing).
func operatorCall[Req, Resp any](h func(*Broker, context.Context, *Req) (Resp, error)) method {
	return method{
		roles: map[principal]binding{console: bindOperator},
		call: unbound(func(b *Broker, ctx context.Context, c caller, req *Req) (Resp, error) {
			sel := selector{}
			if op, ok := any(req).(interface{ AdminGrantOf() string }); ok {
				sel.credential = op.AdminGrantOf()
			}
			if _, err := b.resolve(ctx, c, sel); err != nil {
				var none Resp
				return none, err
			}
			return h(b, ctx, req)
		}),
	}
}

func sendSelector(r *rpc.SendRequest) selector {
	switch r.Via {
	case rpc.ViaHTTP, rpc.ViaSMTPAuth:
		return credentialSelector(&rpc.CredentialRequest{Via: r.Via, Credential: r.Credential, Port: r.Port, SigV4: r.SigV4})
	case rpc.ViaSMTP:
		if r.Door != "" {
			return selector{kind: credDoor, door: r.Door}
		}
		return selector{kind: credPort, port: r.Port}
	case rpc.ViaSMTPSelect:
		return selector{kind: credSelect, credential: r.Credential, namespace: r.Namespace}
	}
	return selector{}
}

// credentialSelector is a write credential's selector: POST /emails's
// Bearer token, or SMTP AUTH's password (on Port, if a trial's own).
func credentialSelector(r *rpc.CredentialRequest) selector {
	switch r.Via {
	case rpc.ViaHTTP:
		if r.SigV4 != nil {
			return selector{kind: credSigV4, namespace: r.SigV4.AccessKeyID, proof: r.SigV4}
		}
		return selector{kind: credWrite, credential: r.Credential}
	case rpc.ViaSMTPAuth:
		return selector{kind: credAuth, credential: r.Credential, port: r.Port}
	}
	return selector{}
}

func readSelector(r *rpc.ReadRequest) selector {
	if r.InboxToken != "" {
		return selector{kind: credInbox, credential: r.InboxToken}
	}
	return selector{kind: credRead, credential: r.Capability, namespace: r.Namespace}
}

// Row is one row of the authorization table as Policy exports it.
type Row struct {
	Method string
	// Principals maps each principal that may call the method ("writer",
	// "shared writer", "inbox", "shared inbox", "gateway", "admin",
	// "console") to
	// what its call is bound to: "nothing", "trial" (the grant's),
	// "credential" (the trial the presented credential, port or door
	// opens), "capability" (the namespace the call names, opened by its
	// read capability), "plane" or "operator" (the plane, for the
	// operator whose admin grant a console's call carries).
	Principals map[string]string
	// Credentials are the kinds of credential a call may present to be
	// bound, named as the trail names them ("mail_api_token",
	// "smtp_port", "netns", "capability_header", "bootstrap_token",
	// "inbox_token", "read_capability").
	Credentials []string
	Waits       bool   // a long poll
	Framing     string // "json", or "send": a send's frame
	// Sees, for a reading method, is what each role that may call it sees
	// of the namespace's mail.
	Sees map[string]View
}

// View is what a reading role sees, as Policy exports it.
type View struct {
	Door      string // the trail's door for its reads
	Recipient bool   // may narrow a read to one recipient
	HTML      bool   // is given a message's HTML part
	Faults    bool   // is told which messages a fault delayed or duplicated
}

// Policy is a copy of the plane's authorization table, for tests that
// derive what every call should answer from it.
func Policy() []Row {
	out := make([]Row, 0, len(methods))
	for name, m := range methods {
		r := Row{Method: name, Principals: map[string]string{}, Waits: m.waits, Framing: framingNames[m.framing]}
		for _, k := range m.accepts {
			if n := credentialNames[k]; !slices.Contains(r.Credentials, n) {
				r.Credentials = append(r.Credentials, n)
			}
		}
		for p, b := range m.roles {
			r.Principals[p.String()] = bindingNames[b]
			if v, ok := views[p.role]; ok && m.reads {
				if r.Sees == nil {
					r.Sees = map[string]View{}
				}
				r.Sees[string(p.role)] = View{Door: v.door, Recipient: v.recipient, HTML: v.html, Faults: v.faults}
			}
		}
		out = append(out, r)
	}
	return out
}

// Keys is a copy of keys: for each credential a call presents, named as
// the trail names it ("mail_api_token" for POST /emails and SMTP AUTH,
// "capability_header" for selecting SMTP, "bootstrap_token",
// "inbox_token", "read_capability"), and each profile, the names of the
// trial's secrets it may be.
func Keys() map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for kind, byProfile := range keys {
		name := credentialNames[kind]
		out[name] = map[string][]string{}
		for profile, secrets := range byProfile {
			for _, s := range secrets {
				out[name][profile] = append(out[name][profile], secretNames[s])
			}
		}
	}
	return out
}
