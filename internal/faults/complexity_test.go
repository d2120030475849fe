package faults

import (
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
)

// Parse runs in linear time on any schedule up to its byte limit: many
// rules, a long list of sends, deep nesting, long strings. (Past the
// limit it refuses at once.) A schedule is at most 64 KiB, which Parse
// reads in well under complexity.MinBase: each run parses its input reps
// times.
func TestParseLinear(t *testing.T) {
	const reps = 128
	for _, c := range []struct {
		name  string
		input func(n int) []byte
		base  int
	}{
		{"many rules", func(n int) []byte {
			rule := `{"door":"http","sends":[1,2,3],"do":"refuse","status":429,"retry_after":2},`
			return []byte("[" + strings.Repeat(rule, n) + `{"first":1,"do":"drop"}]`)
		}, 100},
		{"long sends", func(n int) []byte {
			return []byte(`[{"sends":[` + strings.Repeat("12345,", n) + `1],"do":"drop"}]`)
		}, 1_000},
		{"deep nesting", func(n int) []byte {
			return []byte(`[{"first":1,"do":"drop","door":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}]`)
		}, 1_000},
		{"long string", func(n int) []byte {
			return []byte(`[{"first":1,"do":"` + strings.Repeat(`\u0041`, n) + `"}]`)
		}, 1_000},
	} {
		complexity.Linear(t, "Parse/"+c.name, func(n int) func() {
			in := c.input(n)
			return complexity.Repeat(reps, func() { Parse(in) })
		}, c.base)
	}
}
