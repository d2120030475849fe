package storetest_test

import (
	"context"
	"testing"

	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/internal/msgstore/storetest"
	"github.com/websitebench/mailplane/internal/pgtest"
)

// The embedded store, through the suite. Its outage is its database
// closing under it; its restart, the ledger reopened on the same files.
func TestSQLite(t *testing.T) {
	storetest.Run(t, storetest.Subject{
		Open: func(t *testing.T, l *ledger.Ledger) msgstore.Store {
			w, r := l.Handles()
			s, err := msgstore.NewSQLite(context.Background(), w, r)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Break: func(t *testing.T, l *ledger.Ledger) {
			w, r := l.Handles()
			w.Close()
			r.Close()
		},
		Mend: func(*testing.T) {},
	})
}

// The store in PostgreSQL, through the suite. Its outage is the server
// stopped; its restart, the server started again and the ledger reopened.
func TestPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	dsn := pg.DSN()
	storetest.Run(t, storetest.Subject{
		Ledger: func(t *testing.T) *ledger.Ledger {
			l, err := ledger.OpenPostgres(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Open: func(t *testing.T, l *ledger.Ledger) msgstore.Store {
			w, r := l.Handles()
			s, err := msgstore.NewPostgres(context.Background(), w, r, ledger.MigrationLock)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Break: func(*testing.T, *ledger.Ledger) { pg.Stop() },
		Mend:  func(*testing.T) { pg.Restart() },
	})
}
