package faults

import (
	"errors"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	s, err := Parse([]byte(`[
		{"first": 2, "do": "refuse", "status": 429, "retry_after": 2, "smtp_code": 451},
		{"door": "http", "sends": [3, 5], "do": "timeout", "seconds": 4},
		{"door": "smtp", "every": 3, "do": "delay", "seconds": 3},
		{"sends": [7], "do": "duplicate"},
		{"door": "http", "sends": [8], "do": "duplicate", "copies": 3},
		{"sends": [9], "do": "drop"}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 6 || s[0].Door != Any || s[0].Status != 429 || s[0].RetryAfter != 2 || s[0].SMTPCode != 451 {
		t.Fatalf("rule 0: %+v", s)
	}
	if s[3].Copies != 2 || s[4].Copies != 3 {
		t.Fatalf("copies default to 2: %+v %+v", s[3], s[4])
	}
	// The stored text parses back to the same schedule.
	again, err := Parse([]byte(s.JSON()))
	if err != nil || again.JSON() != s.JSON() {
		t.Fatalf("round trip: %v\n%s\n%s", err, s.JSON(), again.JSON())
	}
	for _, empty := range []string{`[]`, `null`} {
		if s, err := Parse([]byte(empty)); err != nil || len(s) != 0 || s.JSON() != "" {
			t.Fatalf("%s: %v %v", empty, s, err)
		}
	}
}

// A schedule that is not valid is refused whole, naming its first bad
// rule.
func TestParseRefused(t *testing.T) {
	good := `{"first": 1, "do": "drop"}`
	for _, c := range []struct {
		in    string
		index int
		says  string
	}{
		{`{}`, -1, "list"},
		{`[1]`, 0, "not a rule"},
		{`[` + good + `, {"first": 1}]`, 1, "do must be"},
		{`[{"first": 1, "do": "explode"}]`, 0, "do must be"},
		{`[{"do": "drop"}]`, 0, "exactly one"},
		{`[{"first": 1, "every": 2, "do": "drop"}]`, 0, "exactly one"},
		{`[{"first": 0, "do": "drop"}]`, 0, "first"},
		{`[{"every": -1, "do": "drop"}]`, 0, "every"},
		{`[{"sends": [], "do": "drop"}]`, 0, "sends"},
		{`[{"sends": [0], "do": "drop"}]`, 0, "send number"},
		{`[{"first": 1.5, "do": "drop"}]`, 0, "first has the wrong type"},
		{`[{"door": "ftp", "first": 1, "do": "drop"}]`, 0, "door"},
		{`[{"first": 1, "do": "drop", "colour": "red"}]`, 0, "not a rule"},
		{`[` + good + `,` + good + `, {"door": "http", "first": 1, "do": "refuse", "status": 404}]`, 2, "status 429"},
		{`[{"door": "http", "first": 1, "do": "refuse"}]`, 0, "status 429"},
		{`[{"first": 1, "do": "refuse", "status": 429}]`, 0, "smtp_code"},
		{`[{"door": "smtp", "first": 1, "do": "refuse", "smtp_code": 250}]`, 0, "smtp_code"},
		{`[{"door": "smtp", "first": 1, "do": "refuse", "smtp_code": 451, "status": 429}]`, 0, "status does not apply"},
		{`[{"door": "http", "first": 1, "do": "refuse", "status": 429, "retry_after": 0}]`, 0, "retry_after"},
		{`[{"first": 1, "do": "timeout"}]`, 0, "seconds"},
		{`[{"first": 1, "do": "timeout", "seconds": 61}]`, 0, "seconds, 1 to 60"},
		{`[{"first": 1, "do": "delay", "seconds": 3601}]`, 0, "seconds, 1 to 3600"},
		{`[{"first": 1, "do": "duplicate", "copies": 1}]`, 0, "copies"},
		{`[{"first": 1, "do": "drop", "seconds": 3}]`, 0, "seconds does not apply"},
		{`[` + good + `] x`, -1, "list"},
		{`[` + strings.Repeat(good+",", 64) + good + `]`, -1, "more than 64"},
	} {
		s, err := Parse([]byte(c.in))
		var fe *Error
		if !errors.As(err, &fe) || fe.Index != c.index || !strings.Contains(err.Error(), c.says) || s != nil {
			t.Errorf("%s: got %v (%v), want rule %d saying %q", c.in, err, s, c.index, c.says)
		}
	}
}

func TestMatch(t *testing.T) {
	s, err := Parse([]byte(`[
		{"door": "http", "first": 2, "do": "refuse", "status": 429},
		{"door": "smtp", "sends": [2], "do": "refuse", "smtp_code": 451},
		{"every": 3, "do": "drop"}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		door Door
		c    Counts
		want int
	}{
		{HTTP, Counts{HTTP: 1}, 0},
		{HTTP, Counts{HTTP: 2, SMTP: 5}, 0},
		{HTTP, Counts{HTTP: 3}, 2}, // the third send of all
		{HTTP, Counts{HTTP: 4}, -1},
		{SMTP, Counts{SMTP: 1}, -1},
		{SMTP, Counts{SMTP: 2}, 1},
		{SMTP, Counts{HTTP: 2, SMTP: 1}, 2}, // the third send of all; smtp send 1
		{SMTP, Counts{HTTP: 3, SMTP: 1}, -1},
	} {
		if i, _ := s.Match(c.door, c.c); i != c.want {
			t.Errorf("%s %+v: rule %d, want %d", c.door, c.c, i, c.want)
		}
	}
	if i, _ := Schedule(nil).Match(HTTP, Counts{HTTP: 1}); i != -1 {
		t.Fatal("an empty schedule matched")
	}
}
