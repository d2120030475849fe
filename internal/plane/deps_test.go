package plane

import (
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
)

// The broker reaches storage only through the ledger's contract (package
// ledger) and an external store's interface (package msgstore): it links
// no database, so it can hold no handle to one (docs/storage.md). Nor does
// it start processes: the plane's edge (package serve) starts a private
// Mailpit (package mailpitrun) and hands the broker a store over it.
func TestDependencyFence(t *testing.T) {
	const mp = itest.Module
	itest.ForbidDeps(t, "internal/plane", []string{
		"database/sql", "modernc.org", "github.com/jackc/pgx", mp + "internal/ledger/sqlledger",
		"os/exec", mp + "internal/mailpitrun",
	}, nil)
}
