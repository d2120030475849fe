package plane

import (
	"context"
	"errors"

	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/msgstore"
)

// bodies is how the plane moves message bodies in and out of storage,
// decided once, from whether an external store (Mailpit) keeps them or
// the ledger does, in its own database and transactions. Every place
// where the two differ asks it.
type bodies interface {
	// stage puts offer's message, stored, where it will be written. The
	// ledger writes it inside its Accept. An external store is written
	// before, so that its writes run concurrently instead of one at a
	// time inside the ledger's single writer; a second precheck, now with
	// the size, spares it mail the byte quota refuses. decided is true
	// when that precheck already answered the send (e, replayed, err).
	stage(ctx context.Context, b *Broker, offer *ledger.Offer, ns msgstore.Namespace, env msgstore.Envelope, stored []byte) (e ledger.Entry, replayed, decided bool, err error)
	// get returns the body of e in ns, or errGone if it is no longer
	// kept (its trial was closed under the read).
	get(ctx context.Context, b *Broker, ns ledger.Namespace, e ledger.Entry) ([]byte, error)
	// ping reports whether bodies can be stored and read now, beyond
	// what the ledger's own ping says.
	ping(ctx context.Context, b *Broker) error
	// loads is how many messages of one read load at once.
	loads() int
	// beforeLoad runs before a read loads n messages.
	beforeLoad(ctx context.Context, b *Broker, n int) error
	// queued reports whether a closed trial's bodies are queued for
	// purgeQueued, rather than deleted inside the ledger's close.
	queued() bool
	// purgeQueued deletes what closed trials left queued, if anything.
	purgeQueued(ctx context.Context, b *Broker)
}

// errGone is a body no longer kept.
var errGone = errors.New("plane: message body no longer stored")

// bodiesFor is the strategy for store s, nil when the ledger keeps the
// bodies.
func bodiesFor(s msgstore.Store) bodies {
	if s == nil {
		return ledgerBodies{}
	}
	return externalBodies{}
}

// ledgerBodies are kept by the ledger, written and deleted in its own
// transactions.
type ledgerBodies struct{}

func (ledgerBodies) stage(_ context.Context, _ *Broker, offer *ledger.Offer, _ msgstore.Namespace, _ msgstore.Envelope, stored []byte) (ledger.Entry, bool, bool, error) {
	offer.Body = stored
	return ledger.Entry{}, false, false, nil
}

func (ledgerBodies) get(ctx context.Context, b *Broker, ns ledger.Namespace, e ledger.Entry) ([]byte, error) {
	raw, err := b.ledger.Body(ctx, ns.Name, e.Ref)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, errGone
	}
	return raw, err
}

// ping: the ledger's ping is the bodies' too.
func (ledgerBodies) ping(context.Context, *Broker) error { return nil }

// loads: messages load in turn, which is as fast from the ledger and
// keeps the plane's memory per trial low.
func (ledgerBodies) loads() int { return 1 }

func (ledgerBodies) beforeLoad(context.Context, *Broker, int) error { return nil }

func (ledgerBodies) queued() bool { return false }

func (ledgerBodies) purgeQueued(context.Context, *Broker) {}

// externalBodies writes bodies before the ledger's transaction, loads
// them in parallel and deletes them from a queue.
type externalBodies struct{}

// externalLoads bounds the loads of one read from an external store
// running at once: each is a round trip.
const externalLoads = 8

func (externalBodies) stage(ctx context.Context, b *Broker, offer *ledger.Offer, ns msgstore.Namespace, env msgstore.Envelope, stored []byte) (ledger.Entry, bool, bool, error) {
	// A send that loses a race at the quota's edge leaves an unindexed
	// copy in the store, which nothing reads and the trial's purge deletes.
	e, replayed, err := b.ledger.Precheck(ctx, offer)
	if err != nil || replayed {
		return e, replayed, true, err
	}
	ref, err := b.store.Put(ctx, ns, env, stored)
	if err != nil {
		return ledger.Entry{}, false, true, err
	}
	offer.Ref = ref
	return ledger.Entry{}, false, false, nil
}

func (externalBodies) get(ctx context.Context, b *Broker, ns ledger.Namespace, e ledger.Entry) ([]byte, error) {
	raw, err := b.store.Get(ctx, msgstore.Namespace{Name: ns.Name, Tag: ns.Tag}, e.Ref, msgstore.Envelope{From: e.From, To: e.To})
	if errors.Is(err, msgstore.ErrNotFound) {
		return nil, errGone
	}
	return raw, err
}

func (externalBodies) ping(ctx context.Context, b *Broker) error { return b.store.Ping(ctx) }

func (externalBodies) loads() int { return externalLoads }

// beforeLoad: messages may come from the plane's cache (msgcache.go); a
// read still finds out that the store is down, and answers an outage.
func (externalBodies) beforeLoad(ctx context.Context, b *Broker, n int) error {
	if n == 0 {
		return nil
	}
	if err := b.store.Ping(ctx); err != nil {
		return b.storeErr("ping", err)
	}
	return nil
}

func (externalBodies) queued() bool { return true }

// purgeQueued asks the store to delete what closed trials left in it;
// what fails stays queued for the next round.
func (externalBodies) purgeQueued(ctx context.Context, b *Broker) {
	nss, err := b.ledger.Purges(ctx)
	if err != nil {
		b.log.Warn().Err(err).Msg("purge queue unreadable")
		return
	}
	for _, ns := range nss {
		if err := b.store.Purge(ctx, msgstore.Namespace{Name: ns.Name, Tag: ns.Tag}); err != nil {
			b.log.Warn().Err(err).Str("namespace", ns.Name).Msg("purge failed; will retry")
			return
		}
		if err := b.ledger.Purged(ctx, ns.Tag); err != nil {
			b.log.Warn().Err(err).Msg("purge not recorded; will retry")
			return
		}
	}
}
