package sqlledger

import (
	"context"
	"database/sql"
	"errors"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// insertDoor stores t's doors, if it has any, in CreateTrial's
// transaction. Many trials' agent doors may share a namespace: each has a
// port of its own, and takes its own trial's token only.
func (l *DB) insertDoor(ctx context.Context, tx *sql.Tx, t *Trial) error {
	if a := t.AgentDoor; a != nil {
		a.TrialID = t.ID
		if _, err := tx.ExecContext(ctx, `INSERT INTO agent_doors (trial_id, door, netns, imap_port, http_port, netns_dev, netns_ino) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			a.TrialID, a.Key, a.Netns, a.IMAPPort, a.HTTPPort, int64(a.Dev), int64(a.Ino)); err != nil {
			return err
		}
	}
	d := t.Door
	if d == nil {
		return nil
	}
	d.TrialID = t.ID
	if d.Ino != 0 {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM netns_doors d JOIN trials t ON t.id = d.trial_id
WHERE t.destroyed = 0 AND t.plane = ? AND d.netns_dev = ? AND d.netns_ino = ?`, l.plane, int64(d.Dev), int64(d.Ino)).Scan(&one)
		switch {
		case err == nil:
			return ErrNetnsTaken
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO netns_doors (door, trial_id, netns, http_port, smtp_port, smtp_tls_port, netns_dev, netns_ino) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		d.Key, d.TrialID, d.Netns, d.HTTPPort, d.SMTPPort, d.SMTPTLSPort, int64(d.Dev), int64(d.Ino))
	return err
}

// TrialByDoor returns the trial whose netns door has key.
func (l *DB) TrialByDoor(ctx context.Context, key string) (Trial, error) {
	if key == "" {
		return Trial{}, ErrNotFound
	}
	return l.oneTrial(ctx, qTrialByDoor, l.plane, key)
}

// NetnsDoors returns the doors of this plane's open trials, the
// candidates' and then the agents': on a shared PostgreSQL, another
// plane's are bound by that plane's supervisor, on its host, never here.
func (l *DB) NetnsDoors(ctx context.Context) ([]NetnsDoor, error) {
	rows, err := l.read.QueryContext(ctx, `SELECT d.door, d.trial_id, t.namespace, d.netns, d.http_port, d.smtp_port, d.smtp_tls_port, d.netns_dev, d.netns_ino
FROM netns_doors d JOIN trials t ON t.id = d.trial_id WHERE t.destroyed = 0 AND t.plane = ? ORDER BY d.trial_id`, l.plane)
	out, err := scanAll(rows, err, func(r *sql.Rows, d *NetnsDoor) error {
		var dev, ino int64
		err := r.Scan(&d.Key, &d.TrialID, &d.Namespace, &d.Netns, &d.HTTPPort, &d.SMTPPort, &d.SMTPTLSPort, &dev, &ino)
		d.Dev, d.Ino = uint64(dev), uint64(ino)
		return err
	})
	if err != nil {
		return nil, err
	}
	rows, err = l.read.QueryContext(ctx, `SELECT d.door, d.trial_id, t.namespace, d.netns, d.imap_port, d.http_port, d.netns_dev, d.netns_ino
FROM agent_doors d JOIN trials t ON t.id = d.trial_id WHERE t.destroyed = 0 AND t.plane = ? ORDER BY d.trial_id`, l.plane)
	agents, err := scanAll(rows, err, func(r *sql.Rows, d *NetnsDoor) error {
		var dev, ino int64
		err := r.Scan(&d.Key, &d.TrialID, &d.Namespace, &d.Netns, &d.IMAPPort, &d.HTTPPort, &dev, &ino)
		d.Dev, d.Ino, d.Agent = uint64(dev), uint64(ino), true
		return err
	})
	return append(out, agents...), err
}
