package plane

import (
	"context"

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
)

// method is one row of the plane's authorization table: who may call it,
// bound to what, and its handler (decode, resolve the binding, answer).
type method struct {
	roles map[principal]binding
	call  handler
}

// handler decodes a call's body, resolves its binding for c and answers.
type handler func(b *Broker, ctx context.Context, c caller, body []byte) (any, error)

// methods is the plane's whole authorization policy and its dispatch: a
// method that is not here, or a principal not listed for it, is refused
// and logged; nothing is passed through.
var methods = map[string]method{
	rpc.MethodHealth: {
		roles: map[principal]binding{writer: bindNothing, sharedWriter: bindNothing, inbox: bindNothing,
			sharedInbox: bindNothing, gateway: bindNothing, admin: bindNothing},
		call: unbound(func(b *Broker, ctx context.Context, c caller, _ *rpc.Empty) (rpc.HealthResponse, error) {
			return b.Health(ctx, c.role), nil
		}),
	},
	rpc.MethodSend: {
		roles: map[principal]binding{writer: bindTrial, sharedWriter: bindCredential},
		call:  bound(sendSelector, (*Broker).Send, sendEvent),
	},
	rpc.MethodBootstrap: {
		roles: map[principal]binding{writer: bindTrial, sharedWriter: bindCredential},
		call: bound(func(r *rpc.BootstrapRequest) selector { return selector{kind: credBootstrap, credential: r.Token} },
			(*Broker).Bootstrap, bootstrapEvent),
	},
	rpc.MethodReport: {
		roles: map[principal]binding{writer: bindTrial, sharedWriter: bindCredential},
		call: bound(func(r *rpc.ReportRequest) selector { return selector{kind: credPort, port: r.Port} },
			(*Broker).Report, reportEvent),
	},
	rpc.MethodList: {
		roles: map[principal]binding{inbox: bindTrial, sharedInbox: bindCredential, gateway: bindCapability},
		call:  bound(readSelector, (*Broker).List, listEvent),
	},
	rpc.MethodGet: {
		roles: map[principal]binding{inbox: bindTrial, sharedInbox: bindCredential, gateway: bindCapability},
		call:  bound(readSelector, (*Broker).Get, getEvent),
	},
	rpc.MethodLatest: {
		roles: map[principal]binding{gateway: bindCapability},
		call:  bound(readSelector, (*Broker).Latest, latestEvent),
	},
	// Reading a trail is not itself recorded: it would only record itself.
	rpc.MethodEvents: {
		roles: map[principal]binding{gateway: bindCapability},
		call: bound(func(r *rpc.EventsRequest) selector {
			return selector{kind: credRead, credential: r.Capability, namespace: r.Namespace}
		}, (*Broker).Events, nil),
	},
	rpc.MethodExport:       adminCall((*Broker).Export),
	rpc.MethodTrialCreate:  adminCall((*Broker).CreateTrial),
	rpc.MethodTrialOpen:    adminCall((*Broker).OpenTrial),
	rpc.MethodTrialRotate:  adminCall((*Broker).RotateTrial),
	rpc.MethodTrialSeal:    adminCall((*Broker).SealTrial),
	rpc.MethodTrialDestroy: adminCall((*Broker).CloseTrial),
	rpc.MethodTrialClose:   adminCall((*Broker).CloseTrial),
	rpc.MethodTrialList:    adminCall((*Broker).ListTrials),
	rpc.MethodGrantCreate:  adminCall((*Broker).CreateGrant),
	rpc.MethodPortsSync:    adminCall((*Broker).SyncPorts),
}

// bound is a handler whose call is bound to a trial or namespace: the
// selector its request presents is resolved (bind.go) before h runs. Its
// outcome, allowed or refused, is recorded in the namespace's trail by ev
// (evidence.go) before it is answered; a call refused before a namespace
// was found has no trail.
func bound[Req, Resp any](sel func(*Req) selector, h func(*Broker, context.Context, target, *Req) (Resp, error), ev evidencer[Req, Resp]) handler {
	return func(b *Broker, ctx context.Context, c caller, body []byte) (any, error) {
		var req Req
		if err := decode(body, &req); err != nil {
			return nil, err
		}
		t, err := b.resolve(ctx, c, sel(&req))
		if err != nil {
			if ev != nil && t.ns.Name != "" {
				var none Resp
				b.record(ctx, t, ev(t, &req, none, err))
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
	return func(b *Broker, ctx context.Context, c caller, body []byte) (any, error) {
		var req Req
		if err := decode(body, &req); err != nil {
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

func sendSelector(r *rpc.SendRequest) selector {
	switch r.Via {
	case rpc.ViaHTTP:
		return selector{kind: credWrite, credential: r.Credential}
	case rpc.ViaSMTPAuth:
		return selector{kind: credAuth, credential: r.Credential}
	case rpc.ViaSMTP:
		return selector{kind: credPort, port: r.Port}
	case rpc.ViaSMTPSelect:
		return selector{kind: credSelect, credential: r.Credential, namespace: r.Namespace}
	}
	return selector{}
}

func readSelector(r *rpc.ReadRequest) selector {
	if r.InboxToken != "" {
		return selector{kind: credInbox, credential: r.InboxToken}
	}
	return selector{kind: credRead, credential: r.Capability, namespace: r.Namespace}
}

// Authz returns, for each method, the principals that may call it, named
// "writer", "shared writer" and so on: for tests that generate their
// matrix from the table.
func Authz() map[string]map[string]bool {
	out := make(map[string]map[string]bool, len(methods))
	for name, m := range methods {
		out[name] = map[string]bool{}
		for p := range m.roles {
			out[name][p.String()] = true
		}
	}
	return out
}
