package plane

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Limits the plane enforces on every message, whichever door it came in by
// (BEHAVIOR.md §11).
const (
	MaxMessageBytes = 1 << 20
	MaxRecipients   = 16
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
// ledger and moves bodies in and out of the message store.
type Broker struct {
	ledger *ledger.Ledger
	store  msgstore.Store
	quotas Quotas
	log    zerolog.Logger
	wake   notifier
	// writeFailed is set when a send failed in the store and cleared when
	// one succeeds; while it is set, health probes the write path.
	writeFailed atomic.Bool
}

// NewBroker returns a broker over an open ledger and message store.
func NewBroker(l *ledger.Ledger, s msgstore.Store, q Quotas, log zerolog.Logger) *Broker {
	return &Broker{ledger: l, store: s, quotas: q, log: log, wake: notifier{chans: map[string]chan struct{}{}}}
}

// caller is who is calling, as the server established it.
type caller struct {
	role  rpc.Role
	trial int64 // for roles bound to a trial
	bind  binding
}

// storeErr turns an unexpected ledger or store error into an outage answer;
// the detail goes to the log only.
func (b *Broker) storeErr(op string, err error) *rpc.Error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller went away or ran out of time: not the store's fault.
		b.log.Debug().Err(err).Str("op", op).Msg("call ended before the store answered")
		return rpc.Errorf(rpc.CodeDeadlineExceeded, "the call ended before the store answered")
	}
	b.log.Error().Err(err).Str("op", op).Msg("store failure")
	return rpc.Errorf(rpc.CodeStoreUnavailable, "the plane's store is unavailable")
}

// Health reports the store's state.
func (b *Broker) Health(ctx context.Context, c caller) rpc.HealthResponse {
	h := rpc.HealthResponse{Role: c.role, Store: "ok"}
	if err := b.ping(ctx); err != nil {
		b.log.Warn().Err(err).Msg("health: store unavailable")
		h.Store = "unavailable"
	}
	return h
}

func (b *Broker) ping(ctx context.Context) error {
	if b.writeFailed.Load() {
		if err := b.ledger.PingWrite(ctx, 2*MaxMessageBytes); err != nil {
			return err
		}
	}
	return errors.Join(b.ledger.Ping(ctx), b.store.Ping(ctx))
}

// trialNamespace returns the trial of a trial-bound caller and its current
// namespace.
func (b *Broker) trialNamespace(ctx context.Context, c caller) (ledger.Trial, ledger.Namespace, error) {
	t, err := b.ledger.Trial(ctx, c.trial)
	if err != nil {
		return t, ledger.Namespace{}, b.storeErr("trial", err)
	}
	ns, err := b.ledger.Namespace(ctx, t.Namespace)
	if err != nil {
		return t, ns, b.storeErr("namespace", err)
	}
	return t, ns, nil
}

// Send decides on one message and, if it is accepted, stores it durably
// before answering.
func (b *Broker) Send(ctx context.Context, c caller, req *rpc.SendRequest) (rpc.SendResponse, error) {
	t, ns, err := b.trialNamespace(ctx, c)
	if err != nil {
		return rpc.SendResponse{}, err
	}
	switch req.Via {
	case rpc.ViaHTTP, rpc.ViaSMTPAuth:
		ok := false
		if t.Profile == rpc.ProfileCandidate {
			ok = ident.Equal(req.Credential, t.MailAPIToken) || ident.Equal(req.Credential, ns.WriteCapability)
		} else {
			ok = ident.Equal(req.Credential, t.BootstrapToken)
		}
		if !ok {
			return rpc.SendResponse{}, rpc.Errorf(rpc.CodeUnauthorized, "the credential does not open this trial's mail API")
		}
	case rpc.ViaSMTP:
	case rpc.ViaSMTPSelect:
		fixed, err := b.fixedAfterRotation(ctx, t)
		if err != nil {
			return rpc.SendResponse{}, err
		}
		if fixed {
			break // the headers are ignored (and scrubbed) from now on
		}
		if !ident.ValidNamespace(req.Namespace) {
			return rpc.SendResponse{}, rpc.Errorf(rpc.CodeInvalidCapability, "no valid namespace selected")
		}
		if req.Namespace != ns.Name {
			// Another namespace of this trial (sealed by a rotation) or none
			// of its own: either way it cannot be selected.
			sel, err := b.ledger.Namespace(ctx, req.Namespace)
			if err != nil && !errors.Is(err, ledger.ErrNotFound) {
				return rpc.SendResponse{}, b.storeErr("namespace", err)
			}
			if err != nil || sel.TrialID != t.ID {
				return rpc.SendResponse{}, rpc.Errorf(rpc.CodeInvalidCapability, "namespace or capability does not match")
			}
			ns = sel
		}
		selector := ns.ReadCapability
		if t.Profile == rpc.ProfileCandidate {
			selector = ns.WriteCapability
		}
		if !ident.Equal(req.Credential, selector) {
			return rpc.SendResponse{}, rpc.Errorf(rpc.CodeInvalidCapability, "namespace or capability does not match")
		}
	default:
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeBadRequest, "via must be http, smtp, smtp-select or smtp-auth")
	}
	if req.CredentialOnly {
		return rpc.SendResponse{Namespace: ns.Name}, nil
	}
	if ns.State != ledger.StateActive {
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeSealed, "the namespace no longer takes mail")
	}
	if len(req.Raw) > MaxMessageBytes {
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeMessageTooLarge, "message exceeds %d bytes", MaxMessageBytes)
	}
	if len(req.To) > MaxRecipients {
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeTooManyRecipients, "more than %d recipients", MaxRecipients)
	}
	if err := checkEnvelope(req.From, req.To, ns.AllowedSenders); err != nil {
		return rpc.SendResponse{}, err
	}
	if len(req.IdempotencyKey) > 256 {
		return rpc.SendResponse{}, rpc.Errorf(rpc.CodeBadRequest, "idempotency key longer than 256 bytes")
	}
	stored := mailmsg.Scrub(req.Raw, req.From, req.To)
	env := msgstore.Envelope{From: req.From, To: req.To}
	sns := msgstore.Namespace{Name: ns.Name, Tag: ns.Tag}
	offer := &ledger.Offer{
		Namespace:      ns.Name,
		UUID:           ident.UUID(),
		From:           req.From,
		To:             req.To,
		Size:           len(stored),
		IdempotencyKey: req.IdempotencyKey,
		Fingerprint:    req.Fingerprint,
		MaxMessages:    b.quotas.Messages,
		MaxBytes:       b.quotas.Bytes,
		Put: func(tx *sql.Tx, seq int64) (string, error) {
			return b.store.Put(ctx, tx, sns, seq, env, stored)
		},
	}
	if !b.store.Transactional() {
		// An external store is written before the ledger's transaction, so
		// that its writes run concurrently instead of one at a time inside
		// the ledger's single writer. A read-only precheck spares it mail
		// that would be refused; Accept decides again. A send that loses a
		// race at the quota's edge leaves an unindexed copy in the store,
		// which nothing ever reads.
		e, replayed, err := b.ledger.Precheck(ctx, offer)
		if err != nil || replayed {
			return b.sendAnswer(ns.Name, req.Via, e, replayed, err)
		}
		ref, err := b.store.Put(ctx, nil, sns, 0, env, stored)
		if err != nil {
			return b.sendAnswer(ns.Name, req.Via, ledger.Entry{}, false, err)
		}
		offer.Put = func(*sql.Tx, int64) (string, error) { return ref, nil }
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
	}
	b.log.Debug().Str("namespace", ns).Int64("seq", e.Seq).Str("via", string(via)).Bool("replayed", replayed).Int("bytes", e.Size).Msg("accepted")
	return rpc.SendResponse{ID: e.UUID, Seq: e.Seq, Namespace: ns, Replayed: replayed}, nil
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
// allowed list when there is one) and 1 to MaxRecipients valid recipients.
func checkEnvelope(from string, to []string, allowed []string) error {
	if !mailmsg.ValidAddress(from) || (len(allowed) > 0 && !slices.Contains(allowed, from)) {
		return rpc.Errorf(rpc.CodeInvalidEnvelope, "sender not allowed")
	}
	if len(to) == 0 {
		return rpc.Errorf(rpc.CodeInvalidEnvelope, "no recipient")
	}
	for _, r := range to {
		if !mailmsg.ValidAddress(r) {
			return rpc.Errorf(rpc.CodeInvalidEnvelope, "recipient not allowed")
		}
	}
	return nil
}

// Bootstrap trades the trial's bootstrap token for write coordinates.
func (b *Broker) Bootstrap(ctx context.Context, c caller, req *rpc.BootstrapRequest) (rpc.BootstrapResponse, error) {
	t, ns, err := b.trialNamespace(ctx, c)
	if err != nil {
		return rpc.BootstrapResponse{}, err
	}
	if !ident.Equal(req.Token, t.BootstrapToken) || ns.State == ledger.StateDestroyed {
		return rpc.BootstrapResponse{}, rpc.Errorf(rpc.CodeForbidden, "the token does not open this trial's bootstrap")
	}
	return rpc.BootstrapResponse{Namespace: ns.Name, Capability: ns.BootstrapCapability}, nil
}

// readNamespace resolves the namespace a read is about: the trial's own for
// an inbox, the named one opened by its read capability for a gateway.
func (b *Broker) readNamespace(ctx context.Context, c caller, req *rpc.ReadRequest) (ledger.Namespace, error) {
	if c.bind == bindTrial {
		_, ns, err := b.trialNamespace(ctx, c)
		if err != nil {
			return ns, err
		}
		if req.Namespace != "" && req.Namespace != ns.Name {
			return ns, rpc.Errorf(rpc.CodePermissionDenied, "this grant reads only its own namespace")
		}
		return ns, nil
	}
	if !ident.ValidNamespace(req.Namespace) {
		return ledger.Namespace{}, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	ns, err := b.ledger.Namespace(ctx, req.Namespace)
	if errors.Is(err, ledger.ErrNotFound) {
		return ns, rpc.Errorf(rpc.CodeForbidden, "the capability does not open this namespace")
	}
	if err != nil {
		return ns, b.storeErr("namespace", err)
	}
	if !ident.Equal(req.Capability, ns.ReadCapability) {
		return ns, rpc.Errorf(rpc.CodeForbidden, "the capability does not open this namespace")
	}
	return ns, nil
}

// Read answers list, latest and get.
func (b *Broker) Read(ctx context.Context, c caller, method string, req *rpc.ReadRequest) (any, error) {
	ns, err := b.readNamespace(ctx, c, req)
	if err != nil {
		return nil, err
	}
	if method == rpc.MethodGet {
		return b.get(ctx, ns, req.ID)
	}
	if c.bind == bindTrial {
		req.Recipient = "" // the inbox shows its whole namespace
	}
	wait := min(time.Duration(req.WaitMillis)*time.Millisecond, rpc.MaxWait)
	if req.Recipient != "" && wait <= 0 {
		some, known, err := b.ledger.Learned(ctx, ns.Name, req.Recipient)
		if err != nil {
			return nil, b.storeErr("recipients", err)
		}
		if some && !known {
			return nil, rpc.Errorf(rpc.CodeRecipientForbidden, "nothing was ever delivered to that recipient")
		}
	}
	deadline := time.Now().Add(wait)
	for {
		woken := b.wake.watch(ns.Name)
		msgs, err := b.collect(ctx, ns, req, method == rpc.MethodLatest)
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 || time.Until(deadline) <= 0 {
			if len(msgs) == 0 {
				// An empty answer must not hide an outage.
				if err := b.store.Ping(ctx); err != nil {
					return nil, b.storeErr("ping", err)
				}
			}
			if method == rpc.MethodLatest {
				if len(msgs) == 0 {
					return nil, rpc.Errorf(rpc.CodeNotFound, "no message")
				}
				return msgs[len(msgs)-1], nil
			}
			return rpc.ListResponse{Messages: msgs}, nil
		}
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		if ctx.Err() != nil {
			return nil, rpc.Errorf(rpc.CodeDeadlineExceeded, "the call's deadline passed while waiting")
		}
	}
}

// collect loads the matching messages, oldest first; for latest only the
// newest one.
func (b *Broker) collect(ctx context.Context, ns ledger.Namespace, req *rpc.ReadRequest, latest bool) ([]rpc.Message, error) {
	entries, err := b.ledger.Entries(ctx, ns.Name, req.After)
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
	total := 0
	for i, e := range entries {
		if i == maxListMessages || total+e.Size > maxListBytes {
			entries = entries[:i]
			break
		}
		total += e.Size
	}
	// From an external store, messages load in parallel: each is a round
	// trip. From the embedded one they load in turn, which is as fast and
	// keeps the plane's memory per trial low.
	parallel := 1
	if !b.store.Transactional() {
		parallel = externalLoads
	}
	out := make([]rpc.Message, len(entries))
	errs := make([]error, len(entries))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = b.load(ctx, ns, e)
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

// externalLoads bounds the loads of one read from an external store
// running at once.
const externalLoads = 8

func (b *Broker) get(ctx context.Context, ns ledger.Namespace, seq int64) (rpc.Message, error) {
	e, err := b.ledger.Entry(ctx, ns.Name, seq)
	if errors.Is(err, ledger.ErrNotFound) {
		return rpc.Message{}, rpc.Errorf(rpc.CodeNotFound, "no such message")
	}
	if err != nil {
		return rpc.Message{}, b.storeErr("entry", err)
	}
	return b.load(ctx, ns, e)
}

// load reads one indexed message from the store and parses it.
func (b *Broker) load(ctx context.Context, ns ledger.Namespace, e ledger.Entry) (rpc.Message, error) {
	raw, err := b.store.Get(ctx, msgstore.Namespace{Name: ns.Name, Tag: ns.Tag}, e.Ref, msgstore.Envelope{From: e.From, To: e.To})
	if err != nil {
		return rpc.Message{}, b.storeErr("get", err)
	}
	p := mailmsg.Parse(raw)
	m := rpc.Message{
		ID: e.Seq, UUID: e.UUID, Namespace: ns.Name, EnvelopeFrom: e.From, Recipients: e.To,
		Subject: p.Subject, Text: p.Text, HTML: p.HTML, Size: e.Size, Received: e.Received,
		Attachments: []rpc.Attachment{},
	}
	for _, a := range p.Attachments {
		m.Attachments = append(m.Attachments, rpc.Attachment{
			Checksums: rpc.Checksums{MD5: a.MD5, SHA1: a.SHA1, SHA256: a.SHA256},
			ContentID: a.ContentID, ContentType: a.ContentType, FileName: a.FileName, PartID: a.PartID, Size: a.Size,
		})
	}
	return m, nil
}

// notifier wakes readers waiting on a namespace when a message commits.
// Each namespace has one channel, closed (waking every waiter) and
// replaced on each commit: waiters never poll.
type notifier struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

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
	n.mu.Lock()
	defer n.mu.Unlock()
	if ch, ok := n.chans[ns]; ok {
		close(ch)
		delete(n.chans, ns)
	}
}
