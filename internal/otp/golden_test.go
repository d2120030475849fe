package otp

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the code as it is")

// goldenCase is one input of the differential check.
type goldenCase struct {
	name                string
	subject, text, html string
}

// goldenCases are the inputs whose answers testdata/golden/extract.jsonl
// holds: the corpus, the instruction cases, the fuzz target's seeds,
// sample newsletters, and mutants of all of them (cut at any byte,
// spliced together, strewn with the shapes and words the rules read),
// made by a seeded generator so that they are the same on every run.
func goldenCases(t testing.TB) []goldenCase {
	var cs []goldenCase
	mails := readCorpus(t)
	for _, m := range mails {
		cs = append(cs, goldenCase{"corpus/" + m.name, m.subject, m.text, m.html})
	}
	for i, c := range instructionCases {
		cs = append(cs, goldenCase{fmt.Sprintf("instruct/%d", i), "", c.text, ""})
	}
	for i, c := range heldOutCases {
		cs = append(cs, goldenCase{fmt.Sprintf("heldout/%d", i), "", c.text, ""})
	}
	for i, s := range goldenSeeds {
		cs = append(cs, goldenCase{fmt.Sprintf("seed/%d", i), "Your code", s, `<a href="https://h.example/1?a=1&amp;b=2" style="padding:4px">Verify</a>`},
			goldenCase{fmt.Sprintf("seed/%d/cells", i), "", s, `<table><tr><td>4</td><td>8</td><td>3</td><td>9</td></tr></table><b>ABC-123</b><!--`},
			goldenCase{fmt.Sprintf("seed/%d/html", i), "", "", "<p>" + s + "</p>"})
	}
	for _, n := range []int{2 << 10, 16 << 10} {
		h, x := SampleHTML(n)
		cs = append(cs, goldenCase{fmt.Sprintf("sample/%d", n), "Your Acme verification code", x, h})
	}
	rng := rand.New(rand.NewPCG(37, 2026))
	pick := func() corpusMail { return mails[rng.IntN(len(mails))] }
	for i := range 3000 {
		a, b := pick(), pick()
		c := goldenCase{name: fmt.Sprintf("mutant/%d", i), subject: a.subject, text: a.text, html: a.html}
		switch rng.IntN(4) {
		case 0: // a window of each part
			c.text, c.html = window(rng, c.text), window(rng, c.html)
		case 1: // two mails spliced
			c.text = window(rng, a.text) + window(rng, b.text)
			c.html = window(rng, a.html) + window(rng, b.html)
			c.subject = window(rng, a.subject) + b.subject
		case 2: // shapes and words strewn in
			c.text, c.html = strew(rng, window(rng, c.text)), strew(rng, window(rng, c.html))
		case 3: // shapes and words only
			c.subject, c.text, c.html = strew(rng, ""), strew(rng, ""), ""
			if rng.IntN(2) == 0 {
				c.html = strew(rng, "<p>")
			}
		}
		cs = append(cs, c)
	}
	return cs
}

// goldenSeeds are FuzzExtract's seeds.
var goldenSeeds = []string{
	"code 123456", "2024-01-02 code 778899", "phone 555-0100 code 4321", "١٢٣٤ arabic", "Code: 884 213",
	"G-583920 is your code", "Your code: XQM-4R7", "4 8 3 9 2 0", "您的验证码是483920", "Springfield 55555",
	"see https://a.example/x.", "(https://b.example/y)", "Verify: https://ü.example/p", "Call +1 555 010 0100",
}

// window returns a piece of s between two bytes chosen at random, which
// may cut a character, a tag or a URL.
func window(rng *rand.Rand, s string) string {
	if s == "" {
		return s
	}
	i, j := rng.IntN(len(s)+1), rng.IntN(len(s)+1)
	return s[min(i, j):max(i, j)]
}

// shapes are what the rules read: codes in every form, numbers that are
// no code, the words and marks around them, links and markup.
var shapes = []string{
	"123456", "884 213", "402-118", "4 8 3 9 2 0", "G-583920", "XQM-4R7", "K7P2QX", "2024", "2024-01-02", "12:30",
	"1,234.56", "$19.99", "555-0100", "+1 (555) 010-4477", "10115 Berlin", "Springfield, IL 62704", "#12345",
	"code", "Code:", "verification code", "PIN", "Bestätigungscode", "código", "код", "验证码", "認証コード", "인증번호",
	"enter", "type it into the app to continue", "order", "invoice", "account", "number", "phone", "promo", "new",
	"expired", "January", "street", "©", "no longer works", "ignore", "instead", "replaces", "void", ".", ". ", "!",
	"\n", "\n\n", "\r\n", "\t", " ", " - ", ":", "(", ")", "。", "年",
	"https://x.example/verify?t=1", "https://x.example/", "http://a.example/a.", "(https://b.example/y)",
	"<b>", "</b>", "<strong>", "<td>", "</td>", "<tr>", "<table>", "</table>", "<p>", "</p>", "<br>", "<h1>",
	`<td style="font-size:32px;letter-spacing:6px">`, `<span style="font-family:monospace">`, `<td bgcolor="#2f6fed">`,
	`<a href="https://x.example/login?t=2">`, `<a href="https://x.example/unsubscribe">`, "</a>", `<a class="btn" href='https://y.example/confirm'>`,
	`<img src="x.png">`, "<!--", "-->", "<style>td{}</style>", "&amp;", "&nbsp;", "&#52;", "\u200b", "\u00a0",
	"Verify email", "Sign in", "Reset password", "click here", "Unsubscribe", "If this wasn't you", "\xff", "é",
}

// strew inserts 1 to 40 shapes at random places of s.
func strew(rng *rand.Rand, s string) string {
	for range 1 + rng.IntN(40) {
		at := rng.IntN(len(s) + 1)
		s = s[:at] + shapes[rng.IntN(len(shapes))] + s[at:]
	}
	return s
}

// goldenLine is one case's answer as testdata/golden/extract.jsonl holds it.
type goldenLine struct {
	Name       string   `json:"name"`
	OTP        string   `json:"otp,omitempty"`
	Codes      []string `json:"codes,omitempty"`
	ActionLink string   `json:"action_link,omitempty"`
	Links      []string `json:"links,omitempty"`
}

const goldenPath = "testdata/golden/extract.jsonl"

// TestExtractGolden compares Extract's answers with those of the code
// the golden file was made from (go test -run Golden -update rewrites
// it): a change that means to keep every answer, such as one for speed,
// must leave it as it is.
func TestExtractGolden(t *testing.T) {
	cs := goldenCases(t)
	var got []goldenLine
	for _, c := range cs {
		r := Extract(c.subject, c.text, c.html)
		got = append(got, goldenLine{c.name, r.OTP, r.Codes, r.ActionLink, r.Links})
	}
	if *update {
		var b strings.Builder
		for _, l := range got {
			j, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(j)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.FromSlash(goldenPath), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(filepath.FromSlash(goldenPath))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	i := 0
	for ; sc.Scan(); i++ {
		want := sc.Text()
		if i >= len(got) {
			break
		}
		j, _ := json.Marshal(got[i])
		if string(j) != want {
			c := cs[i]
			t.Errorf("%s: Extract(%q, %q, %q)\n got %s\nwant %s", c.name, c.subject, c.text, c.html, j, want)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(got) {
		t.Fatalf("the golden file holds %d answers, the cases are %d", i, len(got))
	}
}
