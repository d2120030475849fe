package sqlledger

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
)

// SetWebhooks replaces trial id's webhooks (stored is package webhooks'
// JSON, "" to clear them), which ns's trail records (their count, never
// their URLs). ErrNotFound: the trial is closed.
func (l *DB) SetWebhooks(ctx context.Context, trialID int64, ns, stored string) error {
	return l.policyTx(ctx, func(tx *sql.Tx) error {
		if err := l.setWebhooks(ctx, tx, trialID, ns, stored); err != nil {
			return err
		}
		return l.announce(ctx, tx, changePolicy, ns)
	})
}

func (l *DB) setWebhooks(ctx context.Context, tx *sql.Tx, trialID int64, ns, stored string) error {
	var text any
	var n []json.RawMessage
	if stored != "" {
		text = stored
		if err := json.Unmarshal([]byte(stored), &n); err != nil {
			return err
		}
	}
	res, err := tx.ExecContext(ctx, `UPDATE trials SET webhooks = ? WHERE id = ? AND destroyed = 0`, text, trialID)
	if err != nil {
		return err
	}
	if c, _ := res.RowsAffected(); c == 0 {
		return ErrNotFound
	}
	e := &evidence.Event{Namespace: ns, Door: evidence.DoorPlane, Action: evidence.ActionWebhooks, Outcome: evidence.Accepted, Count: int64(len(n))}
	return l.appendEvent(ctx, txq{tx, l.ws}, e, true)
}
