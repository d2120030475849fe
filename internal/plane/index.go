package plane

import (
	"context"
	"errors"

	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/mailindex"
)

// index returns message e's index (package mailindex): from the plane's
// cache, or as the ledger stored it when the message was accepted. A
// message stored before the plane indexed mail has none; it is indexed
// from its body here, the old way, and kept in the cache only: the
// ledger's rows are written by accepts, and such a message goes with its
// trial. errGone is a message whose trial was closed under the read.
func (b *Broker) index(ctx context.Context, ns ledger.Namespace, e ledger.Entry) (mailindex.Index, error) {
	key := messageKey{namespace: ns.Name, seq: e.Seq, uuid: e.UUID, ref: e.Ref}
	if x, ok := b.messages.get(key); ok {
		return x, nil
	}
	data, err := b.ledger.Index(ctx, ns.Name, e.Ref)
	var x mailindex.Index
	if err == nil {
		x, err = mailindex.Decode(data)
	}
	if errors.Is(err, ledger.ErrNotFound) || errors.Is(err, mailindex.ErrStale) {
		var raw []byte
		if raw, err = b.bodies.get(ctx, b, ns, e); err == nil {
			x = mailindex.Of(raw)
		}
	}
	if err != nil {
		return mailindex.Index{}, err
	}
	b.messages.put(key, x)
	return x, nil
}
