package mailmsg

import (
	"context"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/limits"
)

// A sender's display name is read as mail clients read it: encoded words
// decoded, quoted strings unquoted, and whatever could hide or reorder the
// text removed.
func TestSender(t *testing.T) {
	long := strings.Repeat("é", limits.DisplayNameRunes+40)
	for _, c := range []struct{ from, name, address string }{
		{"Acme <no-reply@acme.example>", "Acme", "no-reply@acme.example"},
		{"=?UTF-8?B?w4lxdWlwZSBBY21l?= <team@acme.example>", "Équipe Acme", "team@acme.example"},
		{"=?iso-8859-1?Q?J=F6rg_M=FCller?= <j@example.com>", "Jörg Müller", "j@example.com"},
		{`"Acme, Inc. (Billing)" <billing@acme.example>`, "Acme, Inc. (Billing)", "billing@acme.example"},
		{`"security@bank.example" <evil@phish.example>`, "security@bank.example", "evil@phish.example"},
		{"\"Pay\u202eLAP\u200b  \t now\" <p@example.com>", "PayLAP now", "p@example.com"},
		{"a@example.com", "", "a@example.com"},
		{`"A@Example.com" <a@example.com>`, "", "a@example.com"},
		{"First <a@example.com>, Second <b@example.com>", "First", "a@example.com"},
		{`"` + long + `" <l@example.com>`, strings.Repeat("é", limits.DisplayNameRunes), "l@example.com"},
		{"not an address", "", ""},
		{"", "", ""},
	} {
		name, addr := Sender(c.from)
		if name != c.name || addr != c.address {
			t.Errorf("Sender(%q) = %q, %q; want %q, %q", c.from, name, addr, c.name, c.address)
		}
	}
}

// The agent always sees the address the mail came from, first when the
// name could pass for an address.
func TestShowSender(t *testing.T) {
	for _, c := range []struct{ name, addr, want string }{
		{"", "a@example.com", "a@example.com"},
		{"Acme", "no-reply@acme.example", "Acme <no-reply@acme.example>"},
		{"Équipe Acme", "t@acme.example", "Équipe Acme <t@acme.example>"},
		{"security@bank.example", "evil@phish.example", `evil@phish.example (name: "security@bank.example")`},
		{"Bank <security@bank.example>", "evil@phish.example", `evil@phish.example (name: "Bank <security@bank.example>")`},
		{"security＠bank.example", "evil@phish.example", `evil@phish.example (name: "security＠bank.example")`},
	} {
		if got := ShowSender(c.name, c.addr); got != c.want {
			t.Errorf("ShowSender(%q, %q) = %q, want %q", c.name, c.addr, got, c.want)
		}
	}
}

// The plane stores the name the sender wrote with the envelope's address,
// whatever address the sender's From named, and reads the same name back.
func TestScrubKeepsDisplayName(t *testing.T) {
	for _, c := range []struct{ from, stored, name string }{
		{"From: Acme <spoof@elsewhere.example>\r\n", `From: "Acme" <s@example.com>` + "\r\n", "Acme"},
		{"From: =?utf-8?q?Caf=C3=A9_Acme?= <s@example.com>\r\n", "From: =?utf-8?q?Caf=C3=A9_Acme?= <s@example.com>\r\n", "Café Acme"},
		{`From: "Acme, Inc." <s@example.com>` + "\r\n", `From: "Acme, Inc." <s@example.com>` + "\r\n", "Acme, Inc."},
		{"From: s@example.com\r\n", "From: s@example.com\r\n", ""},
		{"", "From: s@example.com\r\n", ""},
	} {
		raw := []byte(c.from + "Subject: hi\r\n\r\nbody\r\n")
		out, err := Scrub(context.Background(), raw, "s@example.com", []string{"r@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), c.stored) {
			t.Errorf("%q stored as %q, want %q", c.from, out, c.stored)
		}
		p := Parse(out)
		if p.FromName != c.name || p.FromAddress != "s@example.com" {
			t.Errorf("%q read back as %q <%s>, want %q", c.from, p.FromName, p.FromAddress, c.name)
		}
	}
}

// FuzzSender: whatever a From header holds, the name read from it is
// clean and bounded, and survives being stored and read again.
func FuzzSender(f *testing.F) {
	for _, s := range []string{
		"Acme <a@example.com>", "=?utf-8?b?w4k=?= <a@example.com>", `"x@y" <a@example.com>`,
		"\"\u202e\" <a@example.com>", "=?x?q?=ZZ?= <a@b>", "a@b, c@d", "<>", `"\`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, from string) {
		name, addr := Sender(from)
		if utf8.RuneCountInString(name) > limits.DisplayNameRunes || name != strings.TrimSpace(name) {
			t.Fatalf("name %q of %q is too long or untrimmed", name, from)
		}
		for _, r := range name {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("name %q of %q holds %U", name, from, r)
			}
		}
		if strings.Contains(name, "  ") {
			t.Fatalf("name %q of %q has a run of spaces", name, from)
		}
		if name == "" || addr == "" {
			return
		}
		again, _ := Sender(FromHeader(name, "s@example.com"))
		if again != name {
			t.Fatalf("name %q stored as %q reads back as %q", name, FromHeader(name, "s@example.com"), again)
		}
	})
}

// A From header is at most limits.HeaderBytes, so each run repeats Sender
// (reps) to measure more than noise.
func TestSenderLinear(t *testing.T) {
	for _, c := range []struct {
		name, unit string
		base, reps int
	}{
		{"encoded words", "=?utf-8?q?caf=C3=A9_x?= ", 300, 48},
		{"malformed words", "=?a?q?=Z", 1600, 64},
		{"quoted", `\"`, 3_000, 256},
		{"list", "a@b, ", 1_500, 128},
		{"format characters", "\u202e\u200b", 500, 256},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "Sender/"+c.name, func(n int) func() {
				from := `"` + strings.Repeat(c.unit, n) + `" <a@example.com>`
				return complexity.Repeat(c.reps, func() { Sender(from) })
			}, c.base)
		})
	}
	// Characters CleanName drops never reach its cap on length.
	complexity.Linear(t, "CleanName/dropped", func(n int) func() {
		name := strings.Repeat(" \u200b\u202e", n)
		return complexity.Repeat(16, func() { CleanName(name, "a@example.com") })
	}, 20_000)
}
