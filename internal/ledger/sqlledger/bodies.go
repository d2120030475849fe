package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// Message bodies, when no external store keeps them (Offer.Ref), live in
// the ledger, written in the transaction that indexes them: a message and
// the policy that accepted it commit together, and a closed trial's bodies
// go in the transaction that closes it (CloseTrial). A body's ref is its
// seq, in decimal. A message's index (package mailindex, Offer.Index) is
// kept with it, written with the message and deleted with its trial.
//
// A send's body and index are columns of its message's row (body, idx):
// in make profile, the bodies and parsed tables, keyed by namespace and
// ref in index b-trees that hold four or five rows a page, were more than
// half the pages each group commit wrote to the write-ahead log, and two
// of its statements. In the messages table they append to the pages the
// send writes anyway. The tables stay for what is not a send's own row:
// a delayed message's body (under its hold, faults.go) and a duplicate's,
// the index of an external store's body (under that store's ref, which a
// duplicate's copies share), and every message stored before the columns
// (a data directory of any age reads its mail).
const (
	// An upsert: a seq whose earlier write a savepoint undid, or a hold
	// reused, takes the new bytes.
	qPutBody = `INSERT INTO bodies (namespace, seq, raw) VALUES (?, ?, ?) ON CONFLICT (namespace, seq) DO UPDATE SET raw = excluded.raw`
	qBody    = `SELECT raw FROM bodies WHERE namespace = ? AND seq = ?`
	qRowBody = `SELECT body FROM messages WHERE namespace = ? AND seq = ? AND body IS NOT NULL`
	// An upsert for the same reasons; a duplicate's copies in an external
	// store share one ref, and so one index.
	qPutIndex = `INSERT INTO parsed (namespace, ref, data) VALUES (?, ?, ?) ON CONFLICT (namespace, ref) DO UPDATE SET data = excluded.data`
	qIndex    = `SELECT data FROM parsed WHERE namespace = ? AND ref = ?`
	qRowIndex = `SELECT idx FROM messages WHERE namespace = ? AND seq = ? AND ref = ? AND idx IS NOT NULL`
)

// inline returns o's ref, and the body and index its message's row keeps
// (nil: none): the ledger's body and its index, in the row; an external
// store's body's index, in parsed under its ref.
func inline(ctx context.Context, tx txq, o *Offer, seq int64) (ref string, body, idx any, err error) {
	if o.Ref != "" {
		ref, err := putBody(ctx, tx, o, seq)
		return ref, nil, nil, err
	}
	if o.Body == nil {
		return "", nil, nil, errNoBody
	}
	if o.Index != nil {
		idx = o.Index
	}
	return strconv.FormatInt(seq, 10), o.Body, idx, nil
}

// putBody stores o's body as message seq inside tx, unless an external
// store holds it, and its index if it has one, and returns its ref.
func putBody(ctx context.Context, tx txq, o *Offer, seq int64) (string, error) {
	ref := o.Ref
	if ref == "" {
		if o.Body == nil {
			return "", errNoBody
		}
		if _, err := tx.exec(ctx, qPutBody, o.Namespace, seq, o.Body); err != nil {
			return "", err
		}
		ref = strconv.FormatInt(seq, 10)
	}
	if o.Index != nil {
		if _, err := tx.exec(ctx, qPutIndex, o.Namespace, ref, o.Index); err != nil {
			return "", err
		}
	}
	return ref, nil
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
	err = l.rs.queryRow(ctx, qRowBody, ns, seq).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		err = l.rs.queryRow(ctx, qBody, ns, seq).Scan(&raw)
	}
	return raw, notFound(err)
}

// Index returns the index stored under ref for namespace ns, or
// ErrNotFound: a message stored before indexes were (which its reader
// indexes as it reads it), or one of a closed trial.
func (l *DB) Index(ctx context.Context, ns, ref string) ([]byte, error) {
	var data []byte
	err := sql.ErrNoRows
	if seq, perr := strconv.ParseInt(ref, 10, 64); perr == nil {
		err = l.rs.queryRow(ctx, qRowIndex, ns, seq, ref).Scan(&data)
	}
	if errors.Is(err, sql.ErrNoRows) {
		err = l.rs.queryRow(ctx, qIndex, ns, ref).Scan(&data)
	}
	return data, notFound(err)
}

// errNoBody is an offer with neither a body nor a ref: a bug of the
// caller, failed as a write that failed (nothing of it is kept).
var errNoBody = errors.New("ledger: an offer without a body or a ref")
