package otp

import (
	"slices"
	"strings"
	"testing"
)

// Every row of BEHAVIOR.md §8.7, then ours. Rows marked "changed" are the
// ones ARCHITECTURE.md quirk 26 deliberately answers differently from the
// reference: Arabic-Indic digits are not a code (null), and a date or a
// phone fragment before the code no longer beats it.
func TestCodes(t *testing.T) {
	for _, tc := range []struct {
		text  string
		codes []string
		note  string
	}{
		// §8.7, unchanged.
		{"code 123456", []string{"123456"}, "§8.7"},
		{"1234", []string{"1234"}, "§8.7"},
		{"12345678", []string{"12345678"}, "§8.7"},
		{"123", []string{}, "§8.7"},
		{"123456789", []string{}, "§8.7"},
		{"a1234b", []string{"1234"}, "§8.7"},
		{"v12345x", []string{"12345"}, "§8.7"},
		{"ref#00001234", []string{"00001234"}, "§8.7"},
		// §8.7, changed (reference: 2024, 0100, ١٢٣٤).
		{"2024-01-02 code 778899", []string{"778899"}, "§8.7 changed: a date is not a code"},
		{"phone 555-0100 code 4321", []string{"4321"}, "§8.7 changed: a phone fragment is not a code"},
		{"١٢٣٤ arabic", []string{}, "§8.7 changed: ASCII digits only"},

		// A keyword wins over the first run; keyword before beats after.
		{"Order 88776655. Your verification code is 246810.", []string{"246810", "88776655"}, "keyword before"},
		{"Order 88776655\n\n246810 is your one-time code", []string{"246810", "88776655"}, "keyword after"},
		{"Use code 1111 or 2222", []string{"1111", "2222"}, "the run right after the keyword"},
		{"Your OTP: 9090", []string{"9090"}, "OTP"},
		{"PIN 4455, account 99887766", []string{"4455", "99887766"}, "PIN"},
		{"Passcode—3141 (valid 10 min)", []string{"3141"}, "passcode"},
		{"Your code is 1234. Your code is 1234.", []string{"1234"}, "no repeats"},
		{"Tu código es 8642", []string{"8642"}, "non-English keyword"},
		{"Ваш код 5757", []string{"5757"}, "Cyrillic keyword"},
		{"barcode 123456 spin 7777", []string{"123456", "7777"}, "keywords only as whole words"},

		// Dates, times, phone numbers and joined numbers are never codes.
		{"Meeting on 2024/03/05 at 10:30, code 5151", []string{"5151"}, "slashed date"},
		{"Sent 05.03.2024", []string{}, "dotted date"},
		{"Since January 2, 2024 and 3 March 2025 and May 2026", []string{}, "month names"},
		{"© 2024 Example Inc. Your code: 6060", []string{"6060"}, "copyright year"},
		{"Call +1 555 010 0100 or (555) 123 4567. Code 7878", []string{"7878"}, "international and bracketed phones"},
		{"Questions? Call us at 0800 4444. Your PIN 1357", []string{"1357"}, "phone word"},
		{"Total $1234.56, build 2.14.1234", []string{}, "amount and version"},
		{"Server 10.20.3040.50", []string{}, "dotted quad"},
		{"2024-01-02T10:00:00Z", []string{}, "timestamp"},

		{"Hotline (0800) 1234, your code (5678)", []string{"5678"}, "bracketed area code; a code in brackets"},
		{"Your one time passcode\n\n  7373", []string{"7373"}, "one time"},
		{"Your VERIFICATION CODE: 6161", []string{"6161"}, "upper case"},
		{"verification, as requested; see the attached document, then enter 4747", []string{"4747"}, "keyword too far away (plain)"},
		{"Order 1111. This message contains no other numbers and mentions your code later on: 2222", []string{"2222", "1111"}, "the nearer keyword"},
		{"© 2024 Example. Reference 31415926", []string{"31415926"}, "copyright year only"},
		{"1234 Main Street, suite 5678", []string{"1234", "5678"}, "plain runs in order"},

		// Shapes that are not runs of 4 to 8 ASCII digits.
		{"", []string{}, "empty"},
		{"no digits at all", []string{}, "none"},
		{"１２３４", []string{}, "fullwidth digits"},
		{"123 456", []string{}, "spaced groups of three"},
	} {
		got := Codes(tc.text)
		if !slices.Equal(got, tc.codes) {
			t.Errorf("%s: Codes(%q) = %q, want %q", tc.note, tc.text, got, tc.codes)
		}
		want := ""
		if len(tc.codes) > 0 {
			want = tc.codes[0]
		}
		if otp := Extract(tc.text, "").OTP(); otp != want {
			t.Errorf("%s: OTP(%q) = %q, want %q", tc.note, tc.text, otp, want)
		}
	}
}

func TestCodesLimit(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		b.WriteString(" 1")
		b.WriteString(strings.Repeat(string(rune('0'+i%10)), 3))
		b.WriteString(string(rune('0' + i/10)))
	}
	if got := Codes(b.String()); len(got) != MaxCodes {
		t.Fatalf("got %d codes, want the limit %d", len(got), MaxCodes)
	}
}

func TestLinks(t *testing.T) {
	for _, tc := range []struct {
		text, html string
		links      []string
	}{
		{"Confirm: https://site.example/verify?t=abc&u=1 now", "", []string{"https://site.example/verify?t=abc&u=1"}},
		{"See https://a.example/x. Or (https://b.example/y) or [http://c.example/z]!", "", []string{"https://a.example/x", "https://b.example/y", "http://c.example/z"}},
		{"Wiki https://w.example/A_(b) end", "", []string{"https://w.example/A_(b)"}},
		{"HTTPS://UP.EXAMPLE/P", "", []string{"HTTPS://UP.EXAMPLE/P"}},
		{`"https://q.example/a"><script>`, "", []string{"https://q.example/a"}},
		{"javascript:alert(1) data:text/html,x mailto:a@b.example ftp://f.example", "", []string{}},
		{"https:// nothing, http://, xhttps://evil.example", "", []string{}},
		{"twice https://d.example https://d.example", "", []string{"https://d.example"}},
		{"https://ü.example/pfad ok", "", []string{"https://ü.example/pfad"}},
		{"text https://t.example/1",
			`<a href="https://t.example/1">again</a><a href='https://h.example/2?a=1&amp;b=2'>x</a><a href=https://h.example/3>y</a><a href="javascript:alert(1)">no</a><a href="/relative">no</a>`,
			[]string{"https://t.example/1", "https://h.example/2?a=1&b=2", "https://h.example/3"}},
	} {
		got := Links(tc.text, tc.html)
		if !slices.Equal(got, tc.links) {
			t.Errorf("Links(%q, %q) = %q, want %q", tc.text, tc.html, got, tc.links)
		}
	}
}
