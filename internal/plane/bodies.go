package plane

import (
	"context"
	"database/sql"

	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/msgstore"
)

// bodies is how the plane moves message bodies in and out of its store,
// decided once, from whether the store writes inside the ledger's
// transaction (the embedded store) or beside it (Mailpit). Every place
// where the two differ asks it; nothing else reads Transactional.
type bodies interface {
	// stage arranges for offer's message, stored, to be written. The
	// embedded store writes it inside the ledger's Accept. An external
	// store is written before, so that its writes run concurrently
	// instead of one at a time inside the ledger's single writer; a
	// second precheck, now with the size, spares it mail the byte quota
	// refuses. decided is true when that precheck already answered the
	// send (e, replayed, err).
	stage(ctx context.Context, b *Broker, offer *ledger.Offer, ns msgstore.Namespace, env msgstore.Envelope, stored []byte) (e ledger.Entry, replayed, decided bool, err error)
	// loads is how many messages of one read load at once.
	loads() int
	// beforeLoad runs before a read loads n messages.
	beforeLoad(ctx context.Context, b *Broker, n int) error
	// purge is what deletes a closed namespace's bodies inside the
	// ledger's CloseTrial, or nil when they are queued for purgeQueued.
	purge(ctx context.Context, b *Broker) func(*sql.Tx, ledger.Namespace) error
	// purgeQueued deletes what closed trials left queued, if anything.
	purgeQueued(ctx context.Context, b *Broker)
}

// bodiesFor is the strategy of store s.
func bodiesFor(s msgstore.Store) bodies {
	if s.Transactional() {
		return embeddedBodies{}
	}
	return externalBodies{}
}

// embeddedBodies writes and deletes bodies in the ledger's own
// transactions.
type embeddedBodies struct{}

func (embeddedBodies) stage(ctx context.Context, b *Broker, offer *ledger.Offer, ns msgstore.Namespace, env msgstore.Envelope, stored []byte) (ledger.Entry, bool, bool, error) {
	offer.Put = func(tx *sql.Tx, seq int64) (string, error) { return b.store.Put(ctx, tx, ns, seq, env, stored) }
	return ledger.Entry{}, false, false, nil
}

// loads: messages load in turn, which is as fast from the embedded store
// and keeps the plane's memory per trial low.
func (embeddedBodies) loads() int { return 1 }

func (embeddedBodies) beforeLoad(context.Context, *Broker, int) error { return nil }

func (embeddedBodies) purge(ctx context.Context, b *Broker) func(*sql.Tx, ledger.Namespace) error {
	return func(tx *sql.Tx, ns ledger.Namespace) error {
		return b.store.Purge(ctx, tx, msgstore.Namespace{Name: ns.Name, Tag: ns.Tag})
	}
}

func (embeddedBodies) purgeQueued(context.Context, *Broker) {}

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
	ref, err := b.store.Put(ctx, nil, ns, 0, env, stored)
	if err != nil {
		return ledger.Entry{}, false, true, err
	}
	offer.Put = func(*sql.Tx, int64) (string, error) { return ref, nil }
	return ledger.Entry{}, false, false, nil
}

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

func (externalBodies) purge(context.Context, *Broker) func(*sql.Tx, ledger.Namespace) error {
	return nil
}

// purgeQueued asks the store to delete what closed trials left in it;
// what fails stays queued for the next round.
func (externalBodies) purgeQueued(ctx context.Context, b *Broker) {
	nss, err := b.ledger.Purges(ctx)
	if err != nil {
		b.log.Warn().Err(err).Msg("purge queue unreadable")
		return
	}
	for _, ns := range nss {
		if err := b.store.Purge(ctx, nil, msgstore.Namespace{Name: ns.Name, Tag: ns.Tag}); err != nil {
			b.log.Warn().Err(err).Str("namespace", ns.Name).Msg("purge failed; will retry")
			return
		}
		if err := b.ledger.Purged(ctx, ns.Tag); err != nil {
			b.log.Warn().Err(err).Msg("purge not recorded; will retry")
			return
		}
	}
}
