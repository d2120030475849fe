package storetest_test

import (
	"context"
	"testing"

	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/internal/msgstore/storetest"
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
