package itest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// MailpitVersion is the Mailpit the tests run, as the Makefile builds it.
const MailpitVersion = "v1.33.1"

var (
	mailpitOnce  sync.Once
	mailpitBuilt string
	mailpitErr   error
)

// Mailpit finds Mailpit: $MAILPLANE_MAILPIT (make sets it), the
// Makefile's cache directory, PATH; else it builds it into that cache
// directory as `make deps` does.
func Mailpit(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MAILPLANE_MAILPIT"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cached := filepath.Join(root, ".cache", "bin", "mailpit")
	if _, err := os.Stat(cached); err == nil {
		return cached
	}
	if p, err := exec.LookPath("mailpit"); err == nil {
		return p
	}
	mailpitOnce.Do(func() {
		cmd := exec.Command("go", "install", "github.com/axllent/mailpit@"+MailpitVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(cached), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			mailpitErr = fmt.Errorf("go install mailpit: %v\n%s", err, out)
			return
		}
		mailpitBuilt = cached
	})
	if mailpitErr != nil {
		t.Fatal(mailpitErr)
	}
	return mailpitBuilt
}
