package evidence

import (
	"bytes"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
)

// lineReps is how many times the one-line case verifies its line: a line
// is capped at MaxLine, so a single Verify of it takes well under
// complexity.MinBase at every size below the cap.
const lineReps = 192

// TestVerifyLinear checks that Verify's time grows linearly with the
// trail: on trails of n to 8n lines, and on one hostile line (deep in a
// string, far from valid) of growing size below MaxLine.
func TestVerifyLinear(t *testing.T) {
	lines := join(trail(t, 8*1000))
	// The first n lines of the same trail.
	byLines := func(n int) []byte {
		idx := 0
		for range n {
			idx += bytes.IndexByte(lines[idx:], '\n') + 1
		}
		return lines[:idx]
	}
	byLine := func(n int) []byte {
		return []byte(`{"seq":1,"time":"` + strings.Repeat(`\u0041`, n) + `"}` + "\n")
	}
	for _, c := range []struct {
		name  string
		input func(int) []byte
		reps  int
		base  int
	}{
		{"lines", byLines, 1, 1000},
		{"one line", byLine, lineReps, MaxLine / 6 / 8 / 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "Verify/"+c.name, func(n int) func() {
				in := c.input(n)
				return complexity.Repeat(c.reps, func() { Verify(bytes.NewReader(in)) })
			}, c.base)
		})
	}
}
