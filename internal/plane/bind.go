package plane

import (
	"context"
	"errors"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// caller is who is calling, as the server established it from the peer's
// credentials and the grant.
type caller struct {
	role  rpc.Role
	trial int64 // the grant's trial, for bindTrial
	bind  binding
}

// credKind is the kind of credential a call presents.
type credKind int

const (
	credNone      credKind = iota
	credWrite              // POST /emails: mail-API token or write capability (candidate), bootstrap token (sidecar, authoring)
	credAuth               // SMTP AUTH: as credWrite
	credPort               // plain SMTP: the local port of the writer's listener
	credSelect             // selecting SMTP: a namespace and its capability
	credBootstrap          // GET /internal/bootstrap: the bootstrap token
	credInbox              // the agent's inbox: the inbox token in its URL
	credRead               // the evaluator: a namespace and its read capability
)

// selector is what a call presents to be bound: a credential of a kind,
// and the namespace or port it names.
type selector struct {
	kind       credKind
	credential string
	namespace  string
	port       int
}

// refusal is each kind's answer when its credential opens nothing, the same
// whether the credential is unknown, of another trial, or of a closed one.
var refusal = map[credKind]*rpc.Error{
	credNone:      rpc.Errorf(rpc.CodeBadRequest, "the call names no credential"),
	credWrite:     rpc.Errorf(rpc.CodeUnauthorized, "the credential does not open a trial's mail API"),
	credAuth:      rpc.Errorf(rpc.CodeUnauthorized, "the credential does not open a trial's mail API"),
	credPort:      rpc.Errorf(rpc.CodeUnauthorized, "no trial owns this SMTP port: authenticate"),
	credSelect:    rpc.Errorf(rpc.CodeInvalidCapability, "namespace or capability does not match"),
	credBootstrap: rpc.Errorf(rpc.CodeForbidden, "the token does not open a trial's bootstrap"),
	credInbox:     rpc.Errorf(rpc.CodeNotFound, "no such inbox"),
	credRead:      rpc.Errorf(rpc.CodeForbidden, "the capability does not open this namespace"),
}

// target is what a call is bound to once resolved: the trial (zero for a
// call bound to nothing or to the plane) and the namespace it acts on.
type target struct {
	role  rpc.Role
	trial ledger.Trial
	ns    ledger.Namespace
	// credential is the kind of credential that opened it (or was
	// refused), as the trail names it.
	credential string
}

// credentialNames are the trail's names of credential kinds.
var credentialNames = map[credKind]string{
	credWrite: "mail_api_token", credAuth: "mail_api_token", credPort: "smtp_port", credSelect: "capability_header",
	credBootstrap: "bootstrap_token", credInbox: "inbox_token", credRead: "read_capability",
}

// resolve binds a call: it finds the trial and namespace the caller's
// grant or presented credential opens, refusing a closed or expired trial.
// Every credential is compared in constant time against its digest. What
// a call was bound to is cached for the next call that presents the same
// (see policyCache); a cached binding is checked again as a fresh one is.
func (b *Broker) resolve(ctx context.Context, c caller, sel selector) (target, error) {
	t := target{role: c.role, credential: credentialNames[sel.kind]}
	if c.bind == bindTrial && sel.kind == credRead {
		t.credential = "" // a trial-bound inbox presents nothing: its grant is its trial
	}
	switch c.bind {
	case bindNothing, bindPlane:
		return t, nil
	case bindTrial, bindCredential, bindCapability:
	default:
		return t, rpc.Errorf(rpc.CodePermissionDenied, "no binding")
	}
	gen, key := b.ledger.PolicyGen(), keyOf(c, sel)
	if hit, ok := b.binds.get(gen, key); ok {
		t.trial, t.ns = hit.trial, hit.ns
		if t.trial.Expired(time.Now()) {
			return t, closedRefusal(c.bind, sel.kind)
		}
		return t, b.reopens(&t, sel, c.bind)
	}
	t, err := b.lookup(ctx, c, sel, t)
	if err == nil {
		b.binds.put(gen, key, boundToOf(t))
	}
	return t, err
}

// reopens checks a cached binding as lookup checked it: a gateway's read
// capability against its namespace, any other credential by opens.
func (b *Broker) reopens(t *target, sel selector, bind binding) error {
	switch bind {
	case bindCapability:
		if !ident.Equal(sel.credential, t.ns.ReadCapability) {
			return refusal[credRead]
		}
		return nil
	}
	return b.opens(t, sel, bind)
}

// closedRefusal is the answer to a call bound to a closed trial.
func closedRefusal(bind binding, kind credKind) error {
	switch bind {
	case bindTrial:
		return rpc.Errorf(rpc.CodeUnauthenticated, "the grant's trial is closed")
	case bindCapability:
		return refusal[credRead]
	}
	return refusal[kind]
}

// lookup binds a call from the ledger.
func (b *Broker) lookup(ctx context.Context, c caller, sel selector, t target) (target, error) {
	var err error
	switch c.bind {
	case bindCapability:
		if sel.kind != credRead {
			return t, refusal[credRead]
		}
		return b.byReadCapability(ctx, c.role, sel)
	case bindTrial:
		t.trial, err = b.ledger.Trial(ctx, c.trial)
		if errors.Is(err, ledger.ErrNotFound) {
			return t, closedRefusal(c.bind, sel.kind)
		}
	case bindCredential:
		t.trial, err = b.findTrial(ctx, sel)
		if errors.Is(err, ledger.ErrNotFound) {
			return t, refusal[sel.kind]
		}
	}
	if err != nil {
		return t, b.storeErr("trial", err)
	}
	if t.trial.Expired(time.Now()) {
		return t, closedRefusal(c.bind, sel.kind)
	}
	if t.ns, err = b.namespaceOf(ctx, t.trial, sel); err != nil {
		return t, err
	}
	return t, b.opens(&t, sel, c.bind)
}

// findTrial finds the trial a shared surface's caller's credential opens.
func (b *Broker) findTrial(ctx context.Context, sel selector) (ledger.Trial, error) {
	d := ident.Digest(sel.credential)
	switch sel.kind {
	case credWrite, credAuth:
		t, err := b.ledger.TrialBy(ctx, ledger.ByMailAPIToken, d)
		if errors.Is(err, ledger.ErrNotFound) {
			t, err = b.ledger.TrialBy(ctx, ledger.ByBootstrapToken, d)
		}
		if errors.Is(err, ledger.ErrNotFound) {
			t, err = b.ledger.TrialBy(ctx, ledger.ByWriteCapability, d)
		}
		return t, err
	case credBootstrap:
		return b.ledger.TrialBy(ctx, ledger.ByBootstrapToken, d)
	case credInbox:
		return b.ledger.TrialBy(ctx, ledger.ByInboxToken, d)
	case credPort:
		return b.ledger.TrialByPort(ctx, sel.port)
	case credSelect:
		if !ident.ValidNamespace(sel.namespace) {
			return ledger.Trial{}, ledger.ErrNotFound
		}
		ns, err := b.ledger.Namespace(ctx, sel.namespace)
		if err != nil {
			return ledger.Trial{}, err
		}
		return b.ledger.Trial(ctx, ns.TrialID)
	}
	return ledger.Trial{}, ledger.ErrNotFound
}

// namespaceOf is the namespace a call on trial t acts on: the trial's
// current one, or for selecting SMTP the one the message names, if it is
// the trial's own.
func (b *Broker) namespaceOf(ctx context.Context, t ledger.Trial, sel selector) (ledger.Namespace, error) {
	name := t.Namespace
	if sel.kind == credSelect {
		fixed, err := b.fixedAfterRotation(ctx, t)
		if err != nil {
			return ledger.Namespace{}, err
		}
		if !fixed {
			if !ident.ValidNamespace(sel.namespace) {
				return ledger.Namespace{}, refusal[credSelect]
			}
			name = sel.namespace
		}
	}
	ns, err := b.ledger.Namespace(ctx, name)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && ns.TrialID != t.ID) {
		return ns, refusal[sel.kind]
	}
	if err != nil {
		return ns, b.storeErr("namespace", err)
	}
	return ns, nil
}

// opens checks in constant time that the credential sel presents opens t:
// a shared surface's trial was found by the credential's digest, and is
// checked again here for the credential's profile; a trial-bound grant's
// trial must be the one a presented credential opens.
func (b *Broker) opens(t *target, sel selector, bind binding) error {
	tr, ns, kind := t.trial, t.ns, &t.credential
	ok := false
	switch sel.kind {
	case credWrite, credAuth:
		if tr.Profile == rpc.ProfileCandidate {
			ok = ident.Equal(sel.credential, tr.MailAPIToken) || ident.Equal(sel.credential, ns.WriteCapability)
			if ok && !ident.Equal(sel.credential, tr.MailAPIToken) {
				*kind = "write_capability"
			}
		} else {
			*kind = "bootstrap_token"
			ok = ident.Equal(sel.credential, tr.BootstrapToken)
		}
	case credPort:
		// A trial-bound writer's plain SMTP is its trial's; a shared one's
		// port was looked up.
		ok = bind == bindTrial || (sel.port > 0 && sel.port == tr.SMTPPort)
	case credSelect:
		if ns.Name != sel.namespace {
			return nil // an authoring trial's fixed listener, after a rotation
		}
		selector := ns.ReadCapability
		if tr.Profile == rpc.ProfileCandidate {
			selector = ns.WriteCapability
		}
		ok = ident.Equal(sel.credential, selector)
	case credBootstrap:
		ok = ident.Equal(sel.credential, tr.BootstrapToken)
	case credInbox:
		ok = ident.Equal(sel.credential, tr.InboxToken)
	case credRead:
		// A trial-bound inbox names nothing but, at most, its own
		// namespace: its grant is its trial. (A gateway's capability was
		// checked by byReadCapability.)
		if bind == bindTrial && sel.namespace != "" && sel.namespace != ns.Name {
			return rpc.Errorf(rpc.CodePermissionDenied, "this grant reads only its own namespace")
		}
		ok = bind == bindTrial
	}
	if !ok {
		return refusal[sel.kind]
	}
	return nil
}

// byReadCapability opens the namespace a gateway names with its caller's
// read capability.
func (b *Broker) byReadCapability(ctx context.Context, role rpc.Role, sel selector) (target, error) {
	t := target{role: role, credential: credentialNames[credRead]}
	if !ident.ValidNamespace(sel.namespace) {
		return t, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	ns, err := b.ledger.Namespace(ctx, sel.namespace)
	if errors.Is(err, ledger.ErrNotFound) {
		return t, refusal[credRead]
	}
	if err != nil {
		return t, b.storeErr("namespace", err)
	}
	if !ident.Equal(sel.credential, ns.ReadCapability) {
		t.ns = ns // a wrong capability for a namespace that exists: its trail records the refusal
		return t, refusal[credRead]
	}
	t.trial, err = b.ledger.Trial(ctx, ns.TrialID)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && t.trial.Expired(time.Now())) {
		return t, refusal[credRead]
	}
	if err != nil {
		return t, b.storeErr("trial", err)
	}
	t.ns = ns
	return t, nil
}
