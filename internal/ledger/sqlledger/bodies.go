package sqlledger

import (
	"context"
	"errors"
	"strconv"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// Message bodies, when no external store keeps them (Offer.Ref), live in
// the ledger's table bodies, written in the transaction that indexes them:
// a message and the policy that accepted it commit together, and a closed
// trial's bodies go in the transaction that closes it (CloseTrial). A
// body's ref is its seq, in decimal.
const (
	// An upsert: a seq whose earlier write a savepoint undid, or a hold
	// reused, takes the new bytes.
	qPutBody = `INSERT INTO bodies (namespace, seq, raw) VALUES (?, ?, ?) ON CONFLICT (namespace, seq) DO UPDATE SET raw = excluded.raw`
	qBody    = `SELECT raw FROM bodies WHERE namespace = ? AND seq = ?`
)

// putBody stores o's body as message seq inside tx, unless an external
// store holds it, and returns its ref.
func putBody(ctx context.Context, tx txq, o *Offer, seq int64) (string, error) {
	if o.Ref != "" {
		return o.Ref, nil
	}
	if o.Body == nil {
		return "", errNoBody
	}
	if _, err := tx.exec(ctx, qPutBody, o.Namespace, seq, o.Body); err != nil {
		return "", err
	}
	return strconv.FormatInt(seq, 10), nil
}

// Body returns the body the ledger keeps under ref for namespace ns, or
// ErrNotFound (a ref of another namespace, or of a closed trial, finds
// nothing).
func (l *DB) Body(ctx context.Context, ns, ref string) ([]byte, error) {
	seq, err := strconv.ParseInt(ref, 10, 64)
	if err != nil {
		return nil, ErrNotFound
	}
	var raw []byte
	err = l.rs.queryRow(ctx, qBody, ns, seq).Scan(&raw)
	return raw, notFound(err)
}

// errNoBody is an offer with neither a body nor a ref: a bug of the
// caller, failed as a write that failed (nothing of it is kept).
var errNoBody = errors.New("ledger: an offer without a body or a ref")
