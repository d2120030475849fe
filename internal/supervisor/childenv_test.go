package supervisor

import (
	"slices"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/serve"
)

// TestChildEnvDSN: the database's DSN reaches the plane and no surface.
func TestChildEnvDSN(t *testing.T) {
	t.Setenv(serve.DSNEnv, "postgres://mailplane:secret@db.internal/mailplane")
	has := func(name string) bool {
		return slices.ContainsFunc(childEnv(name), func(kv string) bool { return strings.HasPrefix(kv, serve.DSNEnv+"=") })
	}
	if !has("mail-plane") {
		t.Error("the plane's environment lacks the DSN")
	}
	for _, s := range []string{"mail-writer", "mail-inbox", "mail-gateway", "mail-console", "mail-plane route"} {
		if has(s) {
			t.Errorf("%s's environment holds the DSN", s)
		}
	}
}
