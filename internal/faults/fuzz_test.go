package faults

import (
	"errors"
	"testing"
)

// FuzzParse: any bytes either parse to a schedule whose stored text parses
// back to itself and whose every rule matches only as its kind says, or
// are refused with an *Error; never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`[{"first": 2, "do": "refuse", "status": 429, "retry_after": 2, "smtp_code": 451}]`,
		`[{"door": "smtp", "every": 3, "do": "delay", "seconds": 3}]`,
		`[{"door": "http", "sends": [1, 3], "do": "duplicate", "copies": 3}, {"first": 1, "do": "drop"}]`,
		`[{"first": 1, "do": "timeout", "seconds": 60}]`,
		`null`, `[]`, `[{}]`, `{"a":1}`, `[[[[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) || s != nil {
				t.Fatalf("refusal %v (%T) with schedule %v", err, err, s)
			}
			return
		}
		again, err := Parse([]byte(s.JSON()))
		if len(s) > 0 && (err != nil || again.JSON() != s.JSON()) {
			t.Fatalf("stored text %s does not parse back: %v", s.JSON(), err)
		}
		for n := int64(1); n <= 8; n++ {
			i, r := s.Match(HTTP, Counts{HTTP: n})
			if i >= 0 && (r.Door == SMTP || !r.matches(n)) {
				t.Fatalf("rule %d %+v matched http send %d", i, r, n)
			}
		}
	})
}
