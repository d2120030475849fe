package plane

import "github.com/websitebench/mailplane/internal/ledger"

// Changed applies a change committed through any plane on a shared
// database (ledger.Watch): the readers waiting on its namespace re-check,
// and after a policy change the plane's caches forget (the ledger's
// policy generation ends). A plane alone on its
// database hears only its own commits, which already did this. While the
// plane's LISTEN connection is down (Down, until All), the ledger itself
// keeps every cache from serving (ledger.PolicyGen).
func (b *Broker) Changed(c ledger.Change) {
	switch {
	case c.Down:
		b.log.Warn().Msg("the LISTEN connection to PostgreSQL is lost: no policy cache serves until it is back")
	case c.All:
		b.log.Info().Msg("the LISTEN connection to PostgreSQL is back: caches start empty")
		b.wake.notifyAll()
		b.trails.notifyAll()
		b.ledger.ForgetPolicy()
	default:
		if c.Policy {
			b.ledger.ForgetPolicy()
		}
		b.wake.notify(c.Namespace)
		b.trails.notify(c.Namespace)
	}
}

// notifyAll wakes every waiter.
func (n *notifier) notifyAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ns, ch := range n.chans {
		close(ch)
		delete(n.chans, ns)
	}
}
