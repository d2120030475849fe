package plane

import (
	"context"
	"crypto/ed25519"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/mailindex"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/internal/webhooks"
	"github.com/websitebench/mailplane/pkg/rpc"
)

const (
	// maxListMessages and maxListBytes bound one list answer; a reader
	// pages with After.
	maxListMessages = 512
	maxListBytes    = 32 << 20
)

// Quotas per namespace; 0 means unlimited.
type Quotas struct {
	Messages int64
	Bytes    int64
}

// DefaultQuotas are the reference's.
var DefaultQuotas = Quotas{Messages: 32, Bytes: 2 << 20}

// Broker is the plane's logic: it decides every send and read against the
// ledger and moves bodies in and out of storage.
type Broker struct {
	ledger ledger.Ledger
	store  msgstore.Store // an external store, or nil: the ledger keeps the bodies
	bodies bodies         // how bodies move in and out of storage (bodies.go)
	quotas Quotas
	log    zerolog.Logger
	wake   notifier
	// writeFailed is set when a send failed in the store and cleared when
	// one succeeds; while it is set, health probes the write path.
	writeFailed atomic.Bool
	// binds caches what calls were bound to (bind.go), messages what
	// reads loaded (msgcache.go).
	binds    policyCache[bindKey, boundTo]
	messages messageCache
	// advertise is what trial.open hands out of the shared surfaces.
	advertise Advertise
	ports     portPool
	// trails wakes readers waiting on a trail; retention is how long a
	// closed trial's trail is kept (evidence.go).
	trails     notifier
	retention  time.Duration
	unrecorded unrecorded
	// signer signs an export's head; unbound counts refusals no trail
	// holds (evidence.go).
	signer  ed25519.PrivateKey
	unbound unboundRefusals
	// sesKey makes every trial's SES secret (providers.go).
	sesKey []byte
	// delays wakes the runner that shows delayed messages (faults.go).
	delays delayed
	// hooks wakes the hooks process's waiting call (webhooks.go).
	hooks hookQueue
	// metrics counts what the plane sees of every door (metrics.go).
	metrics *metrics
}

// NewBroker returns a broker over an open ledger and s, an external
// message store, or nil when the ledger keeps the bodies.
func NewBroker(l ledger.Ledger, s msgstore.Store, q Quotas, log zerolog.Logger) *Broker {
	m := newMetrics()
	b := &Broker{ledger: l, store: s, bodies: bodiesFor(s), quotas: q, log: log,
		wake:  notifier{chans: map[string]chan struct{}{}, woke: func(d time.Duration) { m.wake.Observe(d.Seconds()) }},
		ports: newPortPool(), trails: notifier{chans: map[string]chan struct{}{}}, retention: DefaultRetention,
		delays: delayed{kick: make(chan struct{}, 1)}, metrics: m, sesKey: ephemeralKey(), hooks: newHookQueue()}
	m.countParked(&b.wake, &b.trails)
	b.trails.touched = b.hooks.touch
	return b
}

// storeErr classifies an unexpected ledger or store error, as the ledger
// and the store say (their Unavailable): an outage is store_unavailable
// (or deadline_exceeded, when the call ran out of time); anything else,
// a corrupt row or a broken invariant, is a bug, answered 500
// internal_error. The detail goes to the log only.
func (b *Broker) storeErr(op string, err error) *rpc.Error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller went away or ran out of time: not the store's fault.
		b.log.Debug().Err(err).Str("op", op).Msg("call ended before the store answered")
		return rpc.Errorf(rpc.CodeDeadlineExceeded, "the call ended before the store answered")
	}
	if b.ledger.Unavailable(err) || b.store != nil && b.store.Unavailable(err) {
		b.log.Error().Err(err).Str("op", op).Msg("store failure")
		return rpc.Errorf(rpc.CodeStoreUnavailable, "the plane's store is unavailable")
	}
	b.log.Error().Err(err).Str("op", op).Msg("store answered what the plane cannot use: a bug or corrupt data")
	return rpc.Errorf(rpc.CodeInternal, "the plane failed to answer this call")
}

// Health reports the store's state.
func (b *Broker) Health(ctx context.Context, c caller, _ *rpc.Empty) (rpc.HealthResponse, error) {
	h := rpc.HealthResponse{Role: c.role, Store: "ok", EvidencePublicKey: b.PublicKey()}
	if c.unbounds {
		h.UnboundRefusals = b.unbound.n.Load()
	}
	if err := b.ping(ctx); err != nil {
		b.log.Warn().Err(err).Msg("health: store unavailable")
		h.Store = "unavailable"
	}
	return h, nil
}

func (b *Broker) ping(ctx context.Context) error {
	if b.writeFailed.Load() {
		if err := b.ledger.PingWrite(ctx, 2*limits.MessageBytes); err != nil {
			return err
		}
	}
	return errors.Join(b.ledger.Ping(ctx), b.bodies.ping(ctx, b))
}

// CheckCredential answers a credential check: its credential opened the
// trial it was bound to, and nothing else is judged. The answer names
// the namespace, the key of the caller's fair share on the writer.
func (b *Broker) CheckCredential(_ context.Context, t target, _ *rpc.CredentialRequest) (rpc.CredentialResponse, error) {
	return rpc.CredentialResponse{Namespace: t.ns.Name}, nil
}

// CheckReader answers a reader's check: its credential opened the
// namespace it was bound to, and nothing else is judged.
func (b *Broker) CheckReader(_ context.Context, t target, _ *rpc.ReadRequest) (rpc.CredentialResponse, error) {
	return rpc.CredentialResponse{Namespace: t.ns.Name}, nil
}

// checkEvent records a credential check as credentialEvent does.
func checkEvent(t target, req *rpc.CredentialRequest, _ rpc.CredentialResponse, err error) *evidence.Event {
	return credentialEvent(t, req, rpc.Empty{}, err)
}

// Refused answers the writer's refusal of a malformed request, once its
// credential opened the trial: refusalEvent records it.
func (b *Broker) Refused(context.Context, target, *rpc.RefusalRequest) (rpc.Empty, error) {
	return rpc.Empty{}, nil
}

// Send decides on one message for the trial and namespace its credential
// was bound to and, if it is accepted, stores it durably before
// answering.
func (b *Broker) Send(ctx context.Context, t target, req *rpc.SendRequest) (rpc.SendResponse, error) {
	ns := t.ns
	if ns.State != ledger.StateActive {
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeSealed, "the namespace no longer takes mail")
	}
	if len(req.Raw) > limits.MessageBytes {
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeMessageTooLarge, "message exceeds %d bytes", limits.MessageBytes)
	}
	if len(req.To) > limits.Recipients {
		e := rpc.Errorf(rpc.CodeTooManyRecipients, "more than %d recipients", limits.Recipients)
		e.Field = "to"
		return rpc.SendResponse{}, e
	}
	if err := checkEnvelope(req.From, req.To, ns.AllowedSenders); err != nil {
		return rpc.SendResponse{}, err
	}
	if len(req.IdempotencyKey) > limits.IdempotencyKeyBytes {
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeBadRequest, "idempotency key longer than %d bytes", limits.IdempotencyKeyBytes)
	}
	offer := &ledger.Offer{
		Namespace:      ns.Name,
		UUID:           ident.UUID(),
		From:           req.From,
		To:             req.To,
		IdempotencyKey: req.IdempotencyKey,
		Fingerprint:    req.Fingerprint,
		MaxMessages:    b.quotas.Messages,
		MaxBytes:       b.quotas.Bytes,
		Event: &evidence.Event{Door: sendDoor(req.Via), Action: rpc.MethodSend, Outcome: evidence.Accepted,
			Credential: t.credential, API: req.API, From: address(req.From), To: addresses(req.To)},
		Faults: faultCheck(t.trial, req.Via),
		Bounce: webhooks.AllBounce(req.To),
	}
	// A read-only precheck before any work on the body: a namespace that
	// is full, sealed or replaying a key costs a message nothing to refuse.
	// Accept decides again.
	if e, replayed, err := b.ledger.Precheck(ctx, offer); err != nil || replayed {
		return b.sendAnswer(ns.Name, req.Via, e, replayed, err)
	}
	stored, err := mailmsg.Scrub(ctx, req.Raw, req.From, req.To)
	if errors.Is(err, mailmsg.ErrHeaderTooLarge) {
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeMessageTooLarge, "a header block exceeds %d lines or %d bytes", limits.HeaderLines, limits.HeaderBytes)
	}
	if err != nil {
		return rpc.SendResponse{}, b.storeErr("scrub", err)
	}
	offer.Size, offer.Index = len(stored), mailindex.Of(stored).Encode()
	env := msgstore.Envelope{From: req.From, To: req.To}
	sns := msgstore.Namespace{Name: ns.Name, Tag: ns.Tag}
	if e, replayed, decided, err := b.bodies.stage(ctx, b, offer, sns, env, stored); decided {
		return b.sendAnswer(ns.Name, req.Via, e, replayed, err)
	}
	e, replayed, err := b.ledger.Accept(ctx, offer)
	return b.sendAnswer(ns.Name, req.Via, e, replayed, err)
}

// sendAnswer turns the ledger's and the store's verdict on a send into the
// plane's answer.
func (b *Broker) sendAnswer(ns string, via rpc.Via, e ledger.Entry, replayed bool, err error) (rpc.SendResponse, error) {
	switch {
	case errors.Is(err, ledger.ErrNotActive):
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeSealed, "the namespace no longer takes mail")
	case errors.Is(err, ledger.ErrNotFound):
		// Closed while this send was decided: policy, not an outage.
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeSealed, "the trial is closed")
	case errors.Is(err, ledger.ErrCapacity):
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeMailboxCapacity, "the namespace's quota is exhausted")
	case errors.Is(err, ledger.ErrIdempotencyConflict):
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeIdempotencyConflict, "the idempotency key was used with another payload")
	case errors.Is(err, msgstore.ErrRefused):
		b.log.Warn().Err(err).Str("namespace", ns).Msg("store refused a message")
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeInvalidEnvelope, "the store refused the message")
	case err != nil:
		e := b.storeErr("accept", err)
		if e.Code == rpc.CodeStoreUnavailable {
			b.writeFailed.Store(true)
		}
		return rpc.SendResponse{}, e
	}
	b.writeFailed.Store(false)
	if !replayed {
		b.wake.notify(ns)
		b.trails.notify(ns)
	}
	if e.Injected != nil && !e.Injected.VisibleAt.IsZero() {
		b.delays.wake()
	}
	b.log.Debug().Str("namespace", ns).Int64("seq", e.Seq).Str("via", string(via)).Bool("replayed", replayed).Int("bytes", e.Size).Msg("accepted")
	return rpc.SendResponse{ID: e.UUID, Seq: e.Seq, Namespace: ns, Replayed: replayed, Fault: faultAnswer(e.Injected)}, nil
}

// fixedAfterRotation reports whether a namespace-selecting SMTP listener
// now delivers to the trial's current namespace whatever the headers say:
// an authoring trial's listener does so from its first rotation on, as the
// reference's authoring gateway does.
func (b *Broker) fixedAfterRotation(ctx context.Context, t ledger.Trial) (bool, error) {
	if t.Profile != rpc.ProfileAuthoring {
		return false, nil
	}
	nss, err := b.ledger.Namespaces(ctx, t.ID)
	if err != nil {
		return false, b.storeErr("namespaces", err)
	}
	return len(nss) > 1, nil
}

// checkEnvelope applies the envelope policy: a valid sender (in the
// allowed list when there is one) and 1 to limits.Recipients valid recipients.
func checkEnvelope(from string, to []string, allowed []string) error {
	if !mailmsg.ValidAddress(from) || (len(allowed) > 0 && !slices.Contains(allowed, from)) {
		e := rpc.Errorf(rpc.CodeInvalidEnvelope, "sender not allowed")
		e.Field, e.Allowed = "from", allowed
		return e
	}
	if len(to) == 0 {
		e := rpc.Errorf(rpc.CodeInvalidEnvelope, "no recipient")
		e.Field = "to"
		return e
	}
	for _, r := range to {
		if !mailmsg.ValidAddress(r) {
			e := rpc.Errorf(rpc.CodeInvalidEnvelope, "recipient not allowed")
			e.Field = "to"
			return e
		}
	}
	return nil
}

// Bootstrap trades the trial's bootstrap token for write coordinates:
// the namespace, the capability the trial hands out for it, and the
// trial's own SMTP port where it has one.
func (b *Broker) Bootstrap(_ context.Context, t target, _ *rpc.BootstrapRequest) (rpc.BootstrapResponse, error) {
	return rpc.BootstrapResponse{Namespace: t.ns.Name, Capability: t.ns.BootstrapCapability, SMTPPort: t.trial.SMTPPort}, nil
}

// List answers a list: the namespace's messages, oldest first.
func (b *Broker) List(ctx context.Context, t target, req *rpc.ReadRequest) (rpc.ListResponse, error) {
	msgs, err := b.read(ctx, t, req, false)
	return rpc.ListResponse{Messages: msgs}, err
}

// Latest answers the newest matching message.
func (b *Broker) Latest(ctx context.Context, t target, req *rpc.ReadRequest) (rpc.Message, error) {
	msgs, err := b.read(ctx, t, req, true)
	if err != nil {
		return rpc.Message{}, err
	}
	if len(msgs) == 0 {
		return rpc.Message{}, rpc.Errorf(rpc.CodeNotFound, "no message")
	}
	return msgs[len(msgs)-1], nil
}

// Get answers one message by its id.
func (b *Broker) Get(ctx context.Context, t target, req *rpc.ReadRequest) (rpc.Message, error) {
	e, err := b.ledger.Entry(ctx, t.ns.Name, req.ID)
	if errors.Is(err, ledger.ErrNotFound) {
		return rpc.Message{}, rpc.Errorf(rpc.CodeNotFound, "no such message")
	}
	if err != nil {
		return rpc.Message{}, b.storeErr("entry", err)
	}
	m, err := b.load(ctx, t, e)
	if err != nil {
		return m, err
	}
	return m, b.stillOpen(ctx, t)
}

// read collects the messages a list or latest answers, waiting for one if
// asked to.
func (b *Broker) read(ctx context.Context, t target, req *rpc.ReadRequest, latest bool) ([]rpc.Message, error) {
	if req.WaitMillis < 0 || req.After < 0 {
		return nil, rpc.Errorf(rpc.CodeBadRequest, "wait_ms and after must not be negative")
	}
	if !t.view.recipient {
		req.Recipient = "" // it sees the whole namespace
	}
	ns := t.ns
	wait := boundedWait(req.WaitMillis)
	if wait > 0 {
		markWaits(ctx)
	}
	if req.Recipient != "" && wait <= 0 {
		some, known, err := b.ledger.Learned(ctx, ns.Name, req.Recipient)
		if err != nil {
			return nil, b.storeErr("recipients", err)
		}
		if some && !known {
			return nil, rpc.Errorf(rpc.CodeRecipientForbidden, "nothing was ever delivered to that recipient")
		}
	}
	var msgs []rpc.Message
	err := waitFor(ctx, &b.wake, ns.Name, wait, func() (bool, error) {
		var err error
		if msgs, err = b.collect(ctx, t, req, latest); err != nil {
			return false, err
		}
		// A trial closed while this read ran must show nothing of it.
		if err := b.stillOpen(ctx, t); err != nil {
			return false, err
		}
		return len(msgs) > 0, nil
	})
	if err != nil {
		return nil, err
	}
	if t.view.agent && len(msgs) > 0 {
		if err := b.markUnread(ctx, t, msgs, req.Door == rpc.DoorIMAP); err != nil {
			return nil, err
		}
	}
	if len(msgs) == 0 {
		// An empty answer must not hide an outage.
		if err := b.bodies.ping(ctx, b); err != nil {
			return nil, b.storeErr("ping", err)
		}
	}
	return msgs, nil
}

// markUnread readies the agent's list: each message says whether the
// agent opened it (the ledger's record of its opens), without the HTML,
// its text and inline images that only its message page shows. An IMAP
// list keeps the HTML (imap): a mail client is told each message's size
// and structure before it fetches a body, which is the open; and it
// carries the flags the agent set (Flag).
func (b *Broker) markUnread(ctx context.Context, t target, msgs []rpc.Message, imap bool) error {
	opened, err := b.ledger.Opened(ctx, t.ns.Name)
	if err != nil {
		return b.storeErr("opened", err)
	}
	var flags map[int64][]string
	if imap {
		if flags, err = b.ledger.Flags(ctx, t.ns.Name); err != nil {
			return b.storeErr("flags", err)
		}
	}
	for i := range msgs {
		if !imap {
			msgs[i].HTML = ""
		}
		msgs[i].HTMLText, msgs[i].Inline, msgs[i].Opened, msgs[i].Flags = "", nil, opened[msgs[i].ID], flags[msgs[i].ID]
	}
	return nil
}

// stillOpen refuses, after the fact, a read whose trial was closed while
// it ran: what it loaded must not be answered.
func (b *Broker) stillOpen(ctx context.Context, t target) error {
	ns, err := b.ledger.Namespace(ctx, t.ns.Name)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && ns.TrialID != t.ns.TrialID) {
		return refusal(t.view.closed)
	}
	if err != nil {
		return b.storeErr("namespace", err)
	}
	return nil
}

// collect loads the matching messages, oldest first; for latest only the
// newest one.
func (b *Broker) collect(ctx context.Context, t target, req *rpc.ReadRequest, latest bool) ([]rpc.Message, error) {
	entries, err := b.ledger.Entries(ctx, t.ns.Name, req.After)
	if err != nil {
		return nil, b.storeErr("entries", err)
	}
	if req.Recipient != "" {
		entries = slices.DeleteFunc(entries, func(e ledger.Entry) bool {
			return !slices.ContainsFunc(e.To, func(r string) bool { return mailmsg.SameAddress(r, req.Recipient) })
		})
	}
	if latest && len(entries) > 0 {
		entries = entries[len(entries)-1:]
	}
	// A page ends before the answer could outgrow the client's frame: a
	// message's encoded size is bounded by encodedBound (each field's
	// worst case after JSON escaping), so a reader pages on with After.
	// The newest page is counted back from the newest message instead.
	total := 0
	for n := range entries {
		i := n
		if req.Newest {
			i = len(entries) - 1 - n
		}
		if n > 0 && (n == maxListMessages || total+encodedBound(entries[i].Size) > maxListBytes) {
			if req.Newest {
				entries = entries[i+1:]
			} else {
				entries = entries[:i]
			}
			break
		}
		total += encodedBound(entries[i].Size)
	}
	if err := b.bodies.beforeLoad(ctx, b, len(entries)); err != nil {
		return nil, err
	}
	out := make([]rpc.Message, len(entries))
	errs := make([]error, len(entries))
	sem := make(chan struct{}, b.bodies.loads())
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = b.load(ctx, t, e)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// encodedBound bounds the JSON size of a message of size stored bytes: its
// text and HTML parts together decode to at most size bytes, what the
// index found in them (links and codes, or the agent's HTML text) is at
// most as long again, and each byte escapes to at most six (\u00XX); the
// rest is metadata.
func encodedBound(size int) int { return 12*size + 4096 }

// load reads one message through t's view: its entry and its index
// (index), no parse.
func (b *Broker) load(ctx context.Context, t target, e ledger.Entry) (rpc.Message, error) {
	ns := t.ns
	x, err := b.index(ctx, ns, e)
	if errors.Is(err, errGone) {
		// Purged under this read: its trial was closed, not an outage.
		if cerr := b.stillOpen(ctx, t); cerr != nil {
			return rpc.Message{}, cerr
		}
	}
	if err != nil {
		return rpc.Message{}, b.storeErr("get", err)
	}
	m := rpc.Message{
		ID: e.Seq, UUID: e.UUID, Namespace: ns.Name, EnvelopeFrom: e.From, Recipients: e.To,
		Subject: x.Subject, Text: x.Text, HTML: x.HTML, Size: e.Size, Received: e.Received,
		Attachments: x.Attachments, Inline: x.Inline, Fault: e.Fault, Label: x.Label,
	}
	if mailmsg.SameAddress(x.FromAddress, e.From) {
		m.FromName = x.FromName
	}
	v := t.view
	if v.agent {
		m.HTMLText = x.HTMLText // its MCP tools show it
	} else {
		m.Found = &x.Found // the agent is given no codes
	}
	if !v.html {
		m.HTML = "" // its HTML is not sent
	}
	if !v.agent {
		m.Inline = nil // only the agent's message page shows them
	}
	if !v.faults {
		m.Fault = "" // it is not told what went wrong on purpose
	}
	if !v.labels {
		// Nor the label, which only the trail's event of this read keeps.
		m.Planted, m.Label = m.Label, ""
	}
	return m, nil
}

// notifier wakes readers waiting on a namespace when a message commits.
// Each namespace has one channel, closed (waking every waiter) and
// replaced on each commit: waiters never poll.
type notifier struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
	// version counts notifications; a watcher of anyNamespace wakes on
	// every one (the operator's console, console.go).
	version atomic.Uint64
	// last is when the last notification came (Unix nanoseconds): a
	// woken waiter's wake-up is timed from it, and given to woke if set.
	last atomic.Int64
	woke func(time.Duration)
	// asleep counts the waiters asleep now (waitFor): the parked-waits
	// gauge, which a test also reads to know a wait is held before it
	// sends.
	asleep atomic.Int64
	// touched, if set, is told every namespace notified (the webhook
	// pump's, hookpump.go), outside the lock.
	touched func(ns string)
}

// anyNamespace is the key of watchers of every namespace: no namespace's
// name is empty.
const anyNamespace = ""

func (n *notifier) watch(ns string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch, ok := n.chans[ns]
	if !ok {
		ch = make(chan struct{})
		n.chans[ns] = ch
	}
	return ch
}

func (n *notifier) notify(ns string) {
	if n.touched != nil {
		n.touched(ns)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.version.Add(1)
	n.last.Store(time.Now().UnixNano())
	for _, key := range []string{ns, anyNamespace} {
		if ch, ok := n.chans[key]; ok {
			close(ch)
			delete(n.chans, key)
		}
	}
}
