package mailpit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/msgstore"
)

// TestUnavailable: which of the store's errors are outages. Mailpit not
// there (a socket nobody listens on), "try later" answers and timeouts
// are; a reply or record that does not read, a request Mailpit did not
// understand, and a refusal of the message are not.
func TestUnavailable(t *testing.T) {
	s, err := New(Config{HTTPSocket: filepath.Join(t.TempDir(), "http.sock")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	down := s.Ping(ctx) // nobody listens on the socket
	for _, c := range []struct {
		what string
		err  error
		want bool
	}{
		{"ping with no Mailpit", down, true},
		{"a 503", statusErr("API", 503), true},
		{"a 429", statusErr("API", 429), true},
		{"a 400", statusErr("API", 400), false},
		{"SMTP 421", &smtpError{stage: "DATA", r: reply{code: 421}}, true},
		{"SMTP 554", &smtpError{stage: "DATA", r: reply{code: 554}}, false},
		{"a reset connection", fmt.Errorf("mailpit: SMTP read: %w", &net.OpError{Op: "read", Err: errors.New("reset")}), true},
		{"out of time", fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{"a malformed reference", errBadRef, false},
		{"another message's record", errMismatch, false},
		{"a refused message", fmt.Errorf("x: %w", msgstore.ErrRefused), false},
		{"not found", msgstore.ErrNotFound, false},
	} {
		if c.err == nil {
			t.Fatalf("%s: no error", c.what)
		}
		if got := s.Unavailable(c.err); got != c.want {
			t.Errorf("%s (%v): Unavailable %t, want %t", c.what, c.err, got, c.want)
		}
	}
}
