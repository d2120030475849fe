package ledger

import (
	"context"
	"database/sql"
)

// NetnsDoor is a trial's candidate doors inside its network namespace:
// the file that names the namespace, the key the shared writer presents
// for them (rpc.NetnsDoor), and their ports there, kept so that a restart
// binds them again where the trial's bundle says they are.
type NetnsDoor struct {
	Key                             string
	TrialID                         int64
	Namespace                       string // the trial's current one
	Netns                           string
	HTTPPort, SMTPPort, SMTPTLSPort int
}

// insertDoor stores t's door, if it has one, in CreateTrial's transaction.
func insertDoor(ctx context.Context, tx *sql.Tx, t *Trial) error {
	d := t.Door
	if d == nil {
		return nil
	}
	d.TrialID = t.ID
	_, err := tx.ExecContext(ctx, `INSERT INTO netns_doors (door, trial_id, netns, http_port, smtp_port, smtp_tls_port) VALUES (?, ?, ?, ?, ?, ?)`,
		d.Key, d.TrialID, d.Netns, d.HTTPPort, d.SMTPPort, d.SMTPTLSPort)
	return err
}

// TrialByDoor returns the trial whose netns door has key.
func (l *Ledger) TrialByDoor(ctx context.Context, key string) (Trial, error) {
	if key == "" {
		return Trial{}, ErrNotFound
	}
	return l.oneTrial(ctx, qTrialByDoor, l.plane, key)
}

// NetnsDoors returns the doors of this plane's open trials: on a shared
// PostgreSQL, another plane's are bound by that plane's supervisor, on its
// host, never here.
func (l *Ledger) NetnsDoors(ctx context.Context) ([]NetnsDoor, error) {
	rows, err := l.read.QueryContext(ctx, `SELECT d.door, d.trial_id, t.namespace, d.netns, d.http_port, d.smtp_port, d.smtp_tls_port
FROM netns_doors d JOIN trials t ON t.id = d.trial_id WHERE t.destroyed = 0 AND t.plane = ? ORDER BY d.trial_id`, l.plane)
	return scanAll(rows, err, func(r *sql.Rows, d *NetnsDoor) error {
		return r.Scan(&d.Key, &d.TrialID, &d.Namespace, &d.Netns, &d.HTTPPort, &d.SMTPPort, &d.SMTPTLSPort)
	})
}
