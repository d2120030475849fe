package otp

import (
	"slices"
	"strings"
	"testing"
)

// Rows of docs/reference.md §8.7, then ours. docs/reference.md §13, quirk 26 answers
// several of §8.7 differently on purpose: a number that nothing marks as
// a code is no otp (it stays among codes), a number glued to letters or
// labelled as a reference is no code, Arabic-Indic digits do not count,
// and a date or a phone fragment before the code no longer beats it.
func TestOTP(t *testing.T) {
	for _, tc := range []struct {
		subject, text, html string
		otp                 string
		note                string
	}{
		// §8.7
		{"", "code 123456", "", "123456", "§8.7"},
		{"", "1234", "", "", "§8.7 changed: unmarked"},
		{"", "123", "", "", "§8.7"},
		{"", "123456789", "", "", "§8.7"},
		{"", "a1234b", "", "", "§8.7 changed: glued to letters"},
		{"", "ref#00001234", "", "", "§8.7 changed: a reference number"},
		{"", "2024-01-02 code 778899", "", "778899", "§8.7 changed: a date is not a code"},
		{"", "phone 555-0100 code 4321", "", "4321", "§8.7 changed: a phone fragment is not a code"},
		{"", "١٢٣٤ arabic", "", "", "§8.7 changed: ASCII digits only"},

		// The shapes.
		{"", "Your code: 884 213", "", "884213", "grouped by a space"},
		{"", "Your code: 402-118", "", "402118", "grouped by a hyphen"},
		{"", "G-583920 is your verification code.", "", "583920", "service prefix"},
		{"", "Your confirmation code: XQM-4R7", "", "XQM4R7", "letters and digits"},
		{"", "Confirmation code:\n\nK7P2QX\n", "", "K7P2QX", "letters on the line below the code word"},
		{"731904 is your code", "Use the code in the subject.", "", "731904", "subject"},
		{"", "Your previous code 111111 has expired. Your new code is 222222.", "", "222222", "new beats expired"},
		{"", "Your new code 222222 replaces the expired code 111111.", "", "222222", "new beats expired, one sentence"},
		{"", "Verify your email", `<p>Verify your email</p><table><tr><td style="font-size:30px;letter-spacing:6px">884 213</td></tr></table><p>Acme, 1 Example Way, Springfield 55555</p>`, "884213", "the issue's mail"},
		{"", "", `<p>Enter it:</p><table><tr><td>4</td><td>8</td><td>3</td><td>9</td><td>2</td><td>0</td></tr></table><p>Sign-in code</p>`, "483920", "digits in separate cells"},

		// Never a code.
		{"", "Acme Inc., 1 Example Way, Springfield 55555", "", "", "ZIP"},
		{"", "Order 88776655 shipped", "", "", "order number"},
		{"", "Your invoice INV-2026-00042, account 12345678", "", "", "invoice and account"},
		{"", "Call +1 555 010 0100 or (555) 123 4567", "", "", "phones"},
		{"", "Total $1234.56 paid on January 2, 2024 at 10:30", "", "", "price, date, time"},
		{"", "© 2026 Acme. 548 Market St, San Francisco, CA 94104", "", "", "© line and address"},
		{"", "Open https://x.example/verify/483920 now", "", "", "number inside a URL"},
		{"", "Use code WINTER25 for 25% off", "", "", "a promo code"},
		{"", "Booking reference: K7P2QX", "", "", "letters with a label"},

		// Ours.
		{"", "Order 88776655. Your verification code is 246810.", "", "246810", "keyword beats an order number"},
		{"", "Tu código es 8642", "", "8642", "Spanish"},
		{"", "Ваш код 5757", "", "5757", "Russian"},
		{"", "您的验证码是483920，10分钟内有效。", "", "483920", "Chinese"},
		{"", "認証コード：483920", "", "483920", "Japanese"},
		{"", "인증번호 [483920]", "", "483920", "Korean"},
		{"", "Ihr Bestätigungscode lautet 483920", "", "483920", "German compound"},
		{"", "", `<p>Your PIN is <b>1357</b></p>`, "1357", "HTML"},
	} {
		r := Extract(tc.subject, tc.text, tc.html)
		if r.OTP != tc.otp {
			t.Errorf("%s: OTP(%q, %q, %q) = %q, want %q (codes %q)", tc.note, tc.subject, tc.text, tc.html, r.OTP, tc.otp, r.Codes)
		}
	}
}

func TestCodesLimit(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		b.WriteString(" code 1")
		b.WriteString(strings.Repeat(string(rune('0'+i%10)), 3))
		b.WriteString(string(rune('0' + i/10)))
	}
	if got := Extract("", b.String(), "").Codes; len(got) != MaxCodes {
		t.Fatalf("got %d codes, want the limit %d", len(got), MaxCodes)
	}
}

func TestActionLink(t *testing.T) {
	for _, tc := range []struct {
		text, html, want, note string
	}{
		{"Confirm your email:\nhttps://a.example/x/1\n", "", "https://a.example/x/1", "text, context above"},
		{"Read our blog: https://a.example/blog/1\nUnsubscribe: https://a.example/u", "", "", "nothing to do"},
		{"", `<a href="https://a.example/"><img src="logo.png"></a><p>Hi</p><a href="https://t.example/c?u=9" style="padding:10px">Verify email</a> <a href="https://twitter.com/a">Verify on Twitter</a>`, "https://t.example/c?u=9", "button, tracked"},
		{"", `<p>If this wasn't you, <a href="https://a.example/reset">reset your password</a>.</p>`, "", "conditional"},
		{"", `<p><a href="https://a.example/login">Log in</a> <a href="https://a.example/p">Pricing</a> <a href="https://a.example/b">Blog</a></p>`, "", "a menu"},
		{"", `<a href="https://a.example/i/1">Accept invitation</a>`, "https://a.example/i/1", "invitation"},
		{"", `<a href="https://a.example/i/1?a=1&amp;b=2">Passwort zurücksetzen</a>`, "https://a.example/i/1?a=1&b=2", "German, entity"},
	} {
		if got := Extract("", tc.text, tc.html).ActionLink; got != tc.want {
			t.Errorf("%s: action link %q, want %q", tc.note, got, tc.want)
		}
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

// The HTML reader: what a mail client shows, cells apart, emphasis kept.
func TestHTMLDoc(t *testing.T) {
	d := htmlDoc(`<html><head><title>T 1234</title><style>p{x:1}</style></head><body><!-- 5678 -->` +
		`<p>Code&nbsp;is</p><table><tr><td>4</td><td><b>2</b></td></tr></table><script>9999</script>` +
		`<p style="font-size:30px;letter-spacing:4px">77 88</p><a href="https://a.example/x?a=1&amp;b=2"><img src=x></a>`)
	if d.text != "Code is\n4\t2\n77 88\n" {
		t.Errorf("text %q", d.text)
	}
	ea := emphasisAt{spans: d.emph}
	if i := strings.Index(d.text, "77 88"); ea.at(d.text, i, i+5) != emLarge|emSpaced {
		t.Errorf("emphasis of 77 88: %b", ea.at(d.text, i, i+5))
	}
	if len(d.anchors) != 1 || d.anchors[0].href != "https://a.example/x?a=1&b=2" || !d.anchors[0].image {
		t.Errorf("anchors %+v", d.anchors)
	}
	if len(d.cells) != 2 {
		t.Errorf("cells %+v", d.cells)
	}
}
