package sqlledger

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Unavailable reports whether err, which the ledger returned, means its
// database cannot answer now: it is closed, cannot be reached or opened,
// is busy, full or out of time. Any other error of the ledger's (a
// constraint the code broke, a corrupt file, a row that does not scan) is
// a bug, which waiting does not mend: the plane answers it 500.
func (l *DB) Unavailable(err error) bool {
	select {
	case <-l.closed:
		return err != nil // closed: whatever failed, the ledger cannot answer
	default:
	}
	return unavailable(err)
}

func unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EIO) ||
		errors.Is(err, errSync) { // the disk failed: an outage until the plane restarts
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary code; extended codes refine it
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL,
			sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_NOMEM:
			return true
		}
		return false // SQLITE_CORRUPT, SQLITE_NOTADB, a constraint, a misuse: bugs
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"),                           // insufficient resources: disk full, out of memory, too many connections
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // the server shuts down or is starting
			pe.Code == "57014",                     // query canceled: a statement timeout
			pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock: the transaction may run again
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
