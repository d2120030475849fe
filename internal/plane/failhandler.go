//go:build planebughook

package plane

import (
	"errors"
	"os"
	"strings"
)

// A plane built with -tags planebughook fails the handlers that
// $MAILPLANE_TEST_FAIL names ("get=panic,list=error"): a panic, or a
// plain error, as a handler's bug would. Tests build it to show what
// every door answers to a bug in the real plane (internal/hardening).
func init() {
	fail := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("MAILPLANE_TEST_FAIL"), ",") {
		if m, how, ok := strings.Cut(kv, "="); ok {
			fail[m] = how
		}
	}
	failHandler = func(method string) error {
		switch fail[method] {
		case "panic":
			var m map[string]int
			m[method] = 1 // a nil map: a runtime error, as a real bug's
		case "error":
			return errors.New("a handler's own failure (planebughook)")
		}
		return nil
	}
}
