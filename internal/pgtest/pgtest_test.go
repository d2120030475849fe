package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/websitebench/mailplane/internal/pgtest"
)

// The server takes connections, two databases are apart, and it comes
// back with its data after a stop and after a kill.
func TestServer(t *testing.T) {
	s := pgtest.Start(t)
	a, b := s.DSN(), s.DSN()
	if a == b {
		t.Fatal("two DSNs name one database")
	}
	exec := func(dsn, q string) error {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		_, err = c.Exec(context.Background(), q)
		return err
	}
	if err := exec(a, `CREATE TABLE kept (x BIGINT); INSERT INTO kept VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if err := exec(b, `SELECT x FROM kept`); err == nil {
		t.Fatal("a table of one database is seen in another")
	}
	s.Stop()
	if err := exec(a, `SELECT 1`); err == nil {
		t.Fatal("a stopped server answered")
	}
	s.Restart()
	s.Kill()
	s.Restart()
	if err := exec(a, `SELECT x FROM kept`); err != nil {
		t.Fatalf("after a stop and a kill: %v", err)
	}
}
