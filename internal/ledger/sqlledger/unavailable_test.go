package sqlledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/ledger"
)

// testUnavailable: the engine's own errors, classified. A statement the
// database rejects is a bug; a call out of time, a closed ledger and a
// stopped server are outages.
func testUnavailable(t *testing.T) {
	l := open(t)
	ctx := context.Background()
	_, err := l.write.ExecContext(ctx, `SELEKT 1`)
	if err == nil || l.Unavailable(err) {
		t.Errorf("a statement the database rejects: %v, Unavailable %t; want a bug", err, l.Unavailable(err))
	}
	if l.Unavailable(ledger.ErrNotFound) || l.Unavailable(errors.New("x")) {
		t.Error("the ledger's sentinels or a plain error called an outage")
	}
	late, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if err := l.Ping(late); err == nil || !l.Unavailable(err) {
		t.Errorf("a ping out of time: %v, Unavailable %t", err, l.Unavailable(err))
	}
	if pg != nil {
		pg.Stop()
		err := l.Ping(ctx)
		pg.Restart()
		if err == nil || !l.Unavailable(err) {
			t.Errorf("a ping with PostgreSQL stopped: %v, Unavailable %t", err, l.Unavailable(err))
		}
	}
	closed := openAt(t, target(t))
	closed.Close()
	if err := closed.Ping(ctx); err == nil || !closed.Unavailable(err) {
		t.Errorf("a ping of a closed ledger: %v, Unavailable %t", err, closed.Unavailable(err))
	}
}
