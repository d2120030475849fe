package plane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Binding: a row's handler (bound, unbound, adminCall, operatorCall)
// decodes its call, takes what the request presents (its selector) and
// resolves it, by the row's binding for its caller, to the trial and
// namespace the call acts on, checked against the row's credentials
// (their keys and rules, policy.go), before the Broker's method runs.
//
// A credential's walk from the dispatcher (server.go) to its handler
// passes here twice: for the caller's grant, then for what its call
// presents. So the grant's lookup, the policy cache it shares with the
// binding, and the index of credentials the binding reads live here; the
// walk leaves this file only to go back to the dispatcher and to test a
// credential's rules (policy.go).

// grant returns the valid grant the request presents; an error means the
// ledger could not be asked.
func (s *Server) grant(ctx context.Context, authorization []byte) (ledger.Grant, bool, error) {
	tok, ok := bytes.CutPrefix(authorization, []byte("Bearer "))
	if !ok || !bytes.HasPrefix(tok, []byte(ident.GrantPrefix)) {
		return ledger.Grant{}, false, nil
	}
	d := ident.Digest(string(tok))
	gen := s.ledger.PolicyGen()
	if g, ok := s.grants.get(gen, string(d)); ok {
		return g, true, nil
	}
	g, err := s.ledger.Grant(ctx, d)
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return ledger.Grant{}, false, err
	}
	if err != nil || g.Revoked {
		return ledger.Grant{}, false, nil
	}
	s.grants.put(gen, string(d), g)
	return g, true, nil
}

// credentials are every kind, by kind (for a refusal, named by the kind
// a call presented, accepted or not).
var credentials = map[credKind]*credential{}

func init() {
	for _, c := range []*credential{noCredential, writeCred, authCred, sigV4Cred, portCred, doorCred, selectCred,
		bootstrapCred, inboxCred, readCred, operatorCred} {
		credentials[c.kind] = c
	}
}

// refusal is kind's answer when its credential opens nothing.
func refusal(kind credKind) *rpc.Error { return credentials[kind].refused }

// policyCacheEntries bounds each policy cache; a full cache starts over.
// Entries are made only by credentials that open a trial, so an attacker
// with unknown credentials cannot fill it.
const policyCacheEntries = 1 << 16

// policyCache keeps rows of the ledger's policy (trials, namespaces,
// grants) that calls looked up, so that a send or a read does not query
// the ledger to learn what it learned on the call before. Every entry
// belongs to the ledger's policy generation it was read in (see
// ledger.PolicyGen); a lookup serves it only while that generation is
// current, and the generation moves on with every rotate, seal, close and
// revocation, so no entry outlives the rows it copies. Only what was found
// is kept: an unknown credential is looked up every time.
type policyCache[K comparable, V any] struct {
	mu  sync.Mutex
	gen uint64
	m   map[K]V
}

// get returns the entry for k if it was read in generation gen.
func (c *policyCache[K, V]) get(gen uint64, k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	if !ok || c.gen != gen {
		var zero V
		return zero, false
	}
	return v, true
}

// put keeps v for k, read in generation gen (taken before the read began).
// A read from an older generation than the cache's is dropped; a newer one
// starts the cache over.
func (c *policyCache[K, V]) put(gen uint64, k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen < c.gen {
		return
	}
	if gen > c.gen || c.m == nil || len(c.m) >= policyCacheEntries {
		c.gen, c.m = gen, map[K]V{}
	}
	c.m[k] = v
}

// accepted is the credential of kind its row accepts, or nil.
func (c caller) accepted(kind credKind) *credential {
	for _, cr := range c.accepts {
		if cr.kind == kind {
			return cr
		}
	}
	return nil
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
	credDoor               // plain SMTP on a trial's door inside its network namespace: the door's key
	credSigV4              // a provider API signed with SigV4 (SES): a proof whose access key id is the namespace (providers.go)
	credOperator           // the console's call: the operator's grant, which the console's own caller presented (the last kind)
)

// selector is what a call presents to be bound: a credential of a kind,
// and the namespace or port it names.
type selector struct {
	kind       credKind
	credential string
	namespace  string
	port       int
	door       string // credDoor: the key of the listener's netns door
	// proof is credSigV4's: verified, not compared, with the trial's SES
	// secret, which the plane makes again and nobody presents.
	proof *rpc.SigV4Proof
}

// nothingOpens is a digest no credential opens: a missing namespace's
// capability is compared with it, as a real one's is with its own.
var nothingOpens = ident.Digest(ident.Capability())

// target is what a call is bound to once resolved: the trial (zero for a
// call bound to nothing or to the plane) and the namespace it acts on.
type target struct {
	view  *view // its row's, for its caller: nil if it reads no mail
	trial ledger.Trial
	ns    ledger.Namespace
	// credential is the kind of credential that opened it (or was
	// refused), as the trail names it.
	credential string
}

// handler serves a row's call: run decodes its body, framed as its row
// says, resolves its binding for c and answers. request and response are
// its types, as the table exports them.
type handler struct {
	run               func(b *Broker, ctx context.Context, c caller, f framing, body []byte) (any, error)
	request, response reflect.Type
}

// bound is a handler whose call is bound to a trial or namespace: the
// selector its request presents is resolved before h runs. Its outcome,
// allowed or refused, is recorded in the namespace's trail by ev
// (evidence.go) before it is answered; a call refused before a namespace
// was found has no trail, and is counted.
func bound[Req, Resp any](sel func(*Req) selector, h func(*Broker, context.Context, target, *Req) (Resp, error), ev evidencer[Req, Resp]) handler {
	return handler{request: reflect.TypeFor[Req](), response: reflect.TypeFor[Resp](),
		run: func(b *Broker, ctx context.Context, c caller, f framing, body []byte) (any, error) {
			var req Req
			if err := decode(f, body, &req); err != nil {
				return nil, err
			}
			if d, ok := ctx.Value(decodedKey{}).(*any); ok {
				*d = &req
			}
			t, err := b.resolve(ctx, c, sel(&req))
			if err != nil {
				if ev != nil && t.ns.Name != "" {
					var none Resp
					b.record(ctx, t, ev(t, &req, none, err))
				} else if t.ns.Name == "" && rpc.ClassOf(err) == rpc.Refused {
					b.unbound.add()
				}
				return nil, err
			}
			resp, err := h(b, ctx, t, &req)
			if ev != nil {
				b.record(ctx, t, ev(t, &req, resp, err))
			}
			return resp, err
		}}
}

// errFraming is a row whose framing its request type cannot take: a bug
// in the table, answered 500 (Server.call).
var errFraming = errors.New("the row's framing does not fit its request")

// decode reads a call's request as its row frames it: JSON, or a send's
// frame (rpc.SendRequest.Frame).
func decode(f framing, body []byte, v any) error {
	switch f {
	case frameJSON:
		return decodeJSON(body, v)
	case frameSend:
		s, ok := v.(*rpc.SendRequest)
		if !ok {
			return errFraming
		}
		head, raw, ok := rpc.SplitSendFrame(body)
		if !ok {
			return rpc.Errorf(rpc.CodeBadRequest, "a send is framed as one line of JSON, a newline, then the message")
		}
		if err := decodeJSON(head, s); err != nil {
			return err
		}
		s.Raw = raw
		return nil
	}
	return errFraming
}

func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return rpc.Errorf(rpc.CodeBadRequest, "malformed request body")
	}
	if dec.More() {
		return rpc.Errorf(rpc.CodeBadRequest, "trailing data after the request body")
	}
	return nil
}

// unbound is a handler whose call touches no trial.
func unbound[Req, Resp any](h func(*Broker, context.Context, caller, *Req) (Resp, error)) handler {
	return handler{request: reflect.TypeFor[Req](), response: reflect.TypeFor[Resp](),
		run: func(b *Broker, ctx context.Context, c caller, f framing, body []byte) (any, error) {
			var req Req
			if err := decode(f, body, &req); err != nil {
				return nil, err
			}
			return h(b, ctx, c, &req)
		}}
}

// adminCall is the handler of an operator's method, bound to the whole
// plane.
func adminCall[Req, Resp any](h func(*Broker, context.Context, *Req) (Resp, error)) handler {
	return unbound(func(b *Broker, ctx context.Context, _ caller, req *Req) (Resp, error) {
		return h(b, ctx, req)
	})
}

// operatorRequest is a console call's request: it carries the operator's
// admin grant, which its binding checks.
type operatorRequest[Req any] interface {
	*Req
	AdminGrantOf() string
}

// operatorCall is the handler of a console's method, bound to the
// operator whose admin grant its request carries: the request type must
// carry one (checked when the table is compiled).
func operatorCall[Req any, PReq operatorRequest[Req], Resp any](h func(*Broker, context.Context, PReq) (Resp, error)) handler {
	return unbound(func(b *Broker, ctx context.Context, c caller, req *Req) (Resp, error) {
		if _, err := b.resolve(ctx, c, selector{kind: credOperator, credential: PReq(req).AdminGrantOf()}); err != nil {
			var none Resp
			return none, err
		}
		return h(b, ctx, req)
	})
}

// The selectors: what each bound row's request presents.

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

func refusalSelector(r *rpc.RefusalRequest) selector { return credentialSelector(&r.CredentialRequest) }

func bootstrapSelector(r *rpc.BootstrapRequest) selector {
	return selector{kind: credBootstrap, credential: r.Token}
}

func reportSelector(r *rpc.ReportRequest) selector {
	if r.Door != "" {
		return selector{kind: credDoor, door: r.Door}
	}
	return selector{kind: credPort, port: r.Port}
}

func readSelector(r *rpc.ReadRequest) selector {
	if r.InboxToken != "" {
		return selector{kind: credInbox, credential: r.InboxToken}
	}
	return selector{kind: credRead, credential: r.Capability, namespace: r.Namespace}
}

func clickSelector(r *rpc.ClickRequest) selector {
	return readSelector(&rpc.ReadRequest{InboxToken: r.InboxToken})
}

func flagSelector(r *rpc.FlagRequest) selector {
	return readSelector(&rpc.ReadRequest{InboxToken: r.InboxToken})
}

func eventsSelector(r *rpc.EventsRequest) selector {
	return selector{kind: credRead, credential: r.Capability, namespace: r.Namespace}
}

func webhooksSelector(r *rpc.WebhooksListRequest) selector {
	return selector{kind: credRead, credential: r.Capability, namespace: r.Namespace}
}

// resolve binds a call: it finds the trial and namespace the caller's
// grant or presented credential opens, refusing a closed or expired trial.
// Every credential is compared in constant time against its digest. What
// a call was bound to is cached for the next call that presents the same
// (see policyCache); a cached binding is checked again as a fresh one is.
func (b *Broker) resolve(ctx context.Context, c caller, sel selector) (target, error) {
	t := target{view: c.view, credential: credentials[sel.kind].name}
	if c.bind == bindTrial && sel.kind == credRead {
		t.credential = "" // a trial-bound inbox presents nothing: its grant is its trial
	}
	switch c.bind {
	case bindNothing, bindPlane:
		return t, nil
	case bindOperator:
		return t, b.operatorOpens(ctx, sel, c)
	case bindTrial, bindCredential, bindCapability:
	default:
		return t, rpc.Errorf(rpc.CodePermissionDenied, "no binding")
	}
	gen, key := b.ledger.PolicyGen(), keyOf(c, sel)
	hit, cached := b.binds.get(gen, key)
	if bind := c.bind; cached && bind == bindCredential && sel.kind == credSigV4 {
		// Only a signature that verifies is served from the cache: a
		// refused one costs what a missing namespace's does (bySigV4),
		// the two store reads and one check of the signature, the one
		// just made.
		cachedT := t
		cachedT.trial, cachedT.ns = hit.trial, hit.ns
		if !cachedT.trial.Expired(time.Now()) {
			if b.opens(&cachedT, sel, c) == nil {
				return cachedT, nil
			}
			if _, _, _, err := b.sigV4Trial(ctx, sel); err != nil {
				return t, err
			}
			return t, refusal(credSigV4) // t names no namespace, as bySigV4's
		}
		cached = false
	}
	if cached {
		t.trial, t.ns = hit.trial, hit.ns
		if t.trial.Expired(time.Now()) {
			return t, closedRefusal(c.bind, sel.kind)
		}
		err := b.reopens(&t, sel, c)
		if err != nil && namedByName(sel.kind) {
			t.ns = ledger.Namespace{} // as lookup: a refusal names no trail
		}
		return t, err
	}
	t, err := b.lookup(ctx, c, sel, t)
	if err == nil {
		b.binds.put(gen, key, boundToOf(t))
	}
	return t, err
}

// bindKey is what resolve binds a call by: the grant's binding and trial,
// and what the call presents (its credential only as a digest).
type bindKey struct {
	bind      binding
	trial     int64
	kind      credKind
	digest    [sha256.Size]byte
	namespace string
	port      int
	door      string
}

func keyOf(c caller, sel selector) bindKey {
	k := bindKey{bind: c.bind, trial: c.trial, kind: sel.kind, namespace: sel.namespace, port: sel.port, door: sel.door}
	if sel.credential != "" {
		k.digest = sha256.Sum256([]byte(sel.credential))
	}
	return k
}

// boundTo is a cached binding: the trial and namespace a call was bound
// to. The namespace's counters are not kept (they change with every send;
// nothing that binds a call reads them).
type boundTo struct {
	trial ledger.Trial
	ns    ledger.Namespace
}

func boundToOf(t target) boundTo {
	ns := t.ns
	ns.NextSeq, ns.MessageCount, ns.ByteCount = 0, 0, 0
	return boundTo{trial: t.trial, ns: ns}
}

// reopens checks a cached binding as lookup checked it: a gateway's read
// capability against its namespace, any other credential by opens.
func (b *Broker) reopens(t *target, sel selector, c caller) error {
	switch c.bind {
	case bindCapability:
		if !ident.Equal(sel.credential, t.ns.ReadCapability) {
			return refusal(credRead)
		}
		return nil
	}
	return b.opens(t, sel, c)
}

// closedRefusal is the answer to a call bound to a closed trial.
func closedRefusal(bind binding, kind credKind) error {
	switch bind {
	case bindTrial:
		return rpc.Errorf(rpc.CodeUnauthenticated, "the grant's trial is closed")
	case bindCapability:
		return refusal(credRead)
	}
	return refusal(kind)
}

// lookup binds a call from the ledger.
func (b *Broker) lookup(ctx context.Context, c caller, sel selector, t target) (target, error) {
	var err error
	switch c.bind {
	case bindCapability:
		if sel.kind != credRead {
			return t, refusal(credRead)
		}
		return b.byReadCapability(ctx, c.view, sel)
	case bindTrial:
		t.trial, err = b.ledger.Trial(ctx, c.trial)
		if errors.Is(err, ledger.ErrNotFound) {
			return t, closedRefusal(c.bind, sel.kind)
		}
	case bindCredential:
		if sel.kind == credSigV4 {
			return b.bySigV4(ctx, c, sel, t)
		}
		t.trial, err = b.findTrial(ctx, sel)
		if errors.Is(err, ledger.ErrNotFound) {
			return t, refusal(sel.kind)
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
	err = b.opens(&t, sel, c)
	if err != nil && namedByName(sel.kind) {
		// A wrong capability or signature named a real namespace: it opens
		// nothing, and its refusal goes in no trail (only the count).
		t.ns = ledger.Namespace{}
	}
	return t, err
}

// namedByName reports whether a credential of kind names its trial by a
// value anyone may present (a namespace: the capability header's, SigV4's
// access key id), so that its refusal must go in no trail.
func namedByName(kind credKind) bool { return kind == credSelect || kind == credSigV4 }

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
	case credDoor:
		return b.ledger.TrialByDoor(ctx, sel.door)
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
				return ledger.Namespace{}, refusal(credSelect)
			}
			name = sel.namespace
		}
	}
	ns, err := b.ledger.Namespace(ctx, name)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && ns.TrialID != t.ID) {
		return ns, refusal(sel.kind)
	}
	if err != nil {
		return ns, b.storeErr("namespace", err)
	}
	return ns, nil
}

// opens checks in constant time that the credential sel presents opens t:
// it must be of a kind c's row accepts, and is compared with that kind's
// keys for the trial's profile and checked by its rules (policy.go); a
// shared surface's trial was found by the credential's digest, and is
// checked again here; a trial-bound grant's trial must be the one a
// presented credential opens.
func (b *Broker) opens(t *target, sel selector, c caller) error {
	tr, ns, bind := t.trial, t.ns, c.bind
	cr := c.accepted(sel.kind)
	if cr == nil {
		return refusal(sel.kind)
	}
	ok := false
	switch sel.kind {
	case credWrite, credAuth:
		// The trail names the secret the credential was (or, refused,
		// the profile's first).
		var which secret
		which, ok = opener(sel.credential, tr, ns, cr.keys[tr.Profile])
		t.credential = string(which)
		if cr.rules.has(authPortMatches) && sel.port > 0 && sel.port != tr.SMTPPort {
			ok = false
		}
	case credPort:
		// A trial-bound writer's plain SMTP is its trial's; a shared one's
		// port was looked up.
		ok = bind == bindTrial || (cr.rules.has(portOwned) && sel.port > 0 && sel.port == tr.SMTPPort)
	case credDoor:
		// The trial was looked up by the door's key (or cached under it).
		ok = cr.rules.has(sharedDoorsOnly) && bind == bindCredential && sel.door != ""
	case credSelect:
		if ns.Name != sel.namespace {
			return nil // an authoring trial's fixed listener, after a rotation
		}
		_, ok = opener(sel.credential, tr, ns, cr.keys[tr.Profile])
	case credBootstrap, credInbox:
		_, ok = opener(sel.credential, tr, ns, cr.keys[tr.Profile])
	case credSigV4:
		ok = b.sigV4Opens(tr, ns, sel.proof, time.Now())
	case credRead:
		// Only a trial-bound inbox presents it here: its grant is its
		// trial. (A gateway's capability was checked by byReadCapability.)
		if cr.rules.has(ownNamespaceOnly) && bind == bindTrial && sel.namespace != "" && sel.namespace != ns.Name {
			return rpc.Errorf(rpc.CodePermissionDenied, "this grant reads only its own namespace")
		}
		ok = bind == bindTrial
	}
	if !ok {
		return refusal(sel.kind)
	}
	return nil
}

// operatorOpens checks that the grant an operator's call presents is
// valid, unrevoked and a grant of the principal its credential names (the
// admin's), looked up by its digest as every grant is.
func (b *Broker) operatorOpens(ctx context.Context, sel selector, c caller) error {
	cr := c.accepted(sel.kind)
	if cr == nil {
		return refusal(sel.kind)
	}
	if !strings.HasPrefix(sel.credential, ident.GrantPrefix) {
		return cr.refused
	}
	g, err := b.ledger.Grant(ctx, ident.Digest(sel.credential))
	if errors.Is(err, ledger.ErrNotFound) {
		return cr.refused
	}
	if err != nil {
		return b.storeErr("grant", err)
	}
	if g.Revoked || principalOf(g) != *cr.grantOf {
		return cr.refused
	}
	return nil
}

// opener is the first of secrets (of trial tr and its namespace ns) that
// credential is, compared with every one in constant time; refused, it
// names the first.
func opener(credential string, tr ledger.Trial, ns ledger.Namespace, secrets []secret) (secret, bool) {
	if len(secrets) == 0 {
		return "", false
	}
	which, ok := secrets[0], false
	for _, s := range secrets {
		if ident.Equal(credential, digestOf(s, tr, ns)) && !ok {
			which, ok = s, true
		}
	}
	return which, ok
}

// digestOf is secret s of trial tr and its namespace ns, as the ledger
// keeps it.
func digestOf(s secret, tr ledger.Trial, ns ledger.Namespace) []byte {
	switch s {
	case secretMailAPIToken:
		return tr.MailAPIToken
	case secretWriteCapability:
		return ns.WriteCapability
	case secretBootstrapToken:
		return tr.BootstrapToken
	case secretReadCapability:
		return ns.ReadCapability
	case secretInboxToken:
		return tr.InboxToken
	}
	return nil
}

// byReadCapability opens the namespace a gateway names with its caller's
// read capability. A refusal names no real namespace, by its answer or by
// its time: a missing namespace costs the same one store round trip and
// one constant-time comparison (against a digest nothing opens) as a real
// one with a wrong capability, and neither is written into a trail.
func (b *Broker) byReadCapability(ctx context.Context, v *view, sel selector) (target, error) {
	t := target{view: v, credential: readCred.name}
	if !ident.ValidNamespace(sel.namespace) {
		return t, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	ns, err := b.ledger.Namespace(ctx, sel.namespace)
	found := err == nil
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return t, b.storeErr("namespace", err)
	}
	digest := ns.ReadCapability
	if !found {
		digest = nothingOpens
	}
	if !ident.Equal(sel.credential, digest) || !found {
		return t, refusal(credRead)
	}
	t.trial, err = b.ledger.Trial(ctx, ns.TrialID)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && t.trial.Expired(time.Now())) {
		return t, refusal(credRead)
	}
	if err != nil {
		return t, b.storeErr("trial", err)
	}
	t.ns = ns
	return t, nil
}
