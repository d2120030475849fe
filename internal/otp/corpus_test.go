package otp

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/mailmsg"
)

// corpusMail is one file of testdata/corpus: a header block (subject, the
// expected otp and action_link, "-" for none, kind and language), then a
// text part after "--- text" and an HTML part after "--- html".
type corpusMail struct {
	name, subject, text, html string
	otp, link, kind, lang     string
}

func readCorpus(t testing.TB) []corpusMail {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.mail"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	sort.Strings(paths)
	var out []corpusMail
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m := corpusMail{name: filepath.Base(p)}
		part := ""
		var text, html []string
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case line == "--- text" || line == "--- html":
				part = line[4:]
				continue
			case part == "text":
				text = append(text, line)
				continue
			case part == "html":
				html = append(html, line)
				continue
			}
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				continue
			}
			switch k {
			case "subject":
				m.subject = v
			case "otp":
				m.otp = v
			case "action_link":
				m.link = v
			case "kind":
				m.kind = v
			case "lang":
				m.lang = v
			}
		}
		m.text = strings.TrimSuffix(strings.Join(text, "\r\n"), "\r\n")
		m.html = strings.TrimSuffix(strings.Join(html, "\n"), "\n")
		if m.otp == "" || m.link == "" || m.text == "" && m.html == "" {
			t.Fatalf("%s: a corpus mail needs otp, action_link and a part", m.name)
		}
		if m.otp == "-" {
			m.otp = ""
		}
		if m.link == "-" {
			m.link = ""
		}
		// What the gateway reads: a message sent with only HTML is stored
		// with text derived from it (the writer does this), as mail clients
		// send a text part along.
		if m.text == "" {
			m.text = mailmsg.HTMLText(m.html)
		}
		out = append(out, m)
	}
	return out
}

// TestCorpus runs every mail of testdata/corpus through Extract: each must
// yield exactly its expected otp and action_link. There is no list of
// expected failures.
func TestCorpus(t *testing.T) {
	mails := readCorpus(t)
	otpOK, linkOK := 0, 0
	for _, m := range mails {
		r := Extract(m.subject, m.text, m.html)
		if r.OTP == m.otp {
			otpOK++
		} else {
			t.Errorf("%s: otp %q, want %q (codes %q)", m.name, r.OTP, m.otp, r.Codes)
		}
		if r.ActionLink == m.link {
			linkOK++
		} else {
			t.Errorf("%s: action_link %q, want %q", m.name, r.ActionLink, m.link)
		}
		if r.OTP != "" && (len(r.Codes) == 0 || r.Codes[0] != r.OTP) {
			t.Errorf("%s: otp %q is not codes[0] of %q", m.name, r.OTP, r.Codes)
		}
	}
	t.Logf("corpus: %d mails; otp %d/%d, action_link %d/%d", len(mails), otpOK, len(mails), linkOK, len(mails))
}

// TestCorpusShape holds the corpus to what it claims to cover.
func TestCorpusShape(t *testing.T) {
	mails := readCorpus(t)
	kinds := map[string]int{}
	foreign, footers, htmls, texts := 0, 0, 0, 0
	for _, m := range mails {
		kinds[m.kind]++
		if m.lang != "en" {
			foreign++
		}
		if m.html != "" {
			htmls++
		} else {
			texts++
		}
		// A footer with a postal address, a phone number and social links.
		all := m.text + m.html
		if (strings.Contains(all, "twitter.com") || strings.Contains(all, "facebook.com")) && strings.ContainsAny(all, "+(") {
			footers++
		}
	}
	if len(mails) < 120 || foreign < 15 || footers*3 < len(mails) || htmls < 40 || texts < 40 {
		t.Errorf("corpus: %d mails, %d not in English, %d with full footers, %d HTML, %d text only", len(mails), foreign, footers, htmls, texts)
	}
	for _, k := range []string{"sign-up", "sign-in", "2fa", "magic-link", "password-reset", "invitation", "email-change", "welcome", "receipt", "newsletter"} {
		if kinds[k] == 0 {
			t.Errorf("corpus has no %s mail", k)
		}
	}
	t.Logf("corpus: %d mails, %d not in English, %d with address/phone/social footers, %d with HTML, %d text only, kinds %v",
		len(mails), foreign, footers, htmls, texts, kinds)
}
