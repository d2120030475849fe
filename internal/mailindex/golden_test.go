package mailindex

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"mime/quotedprintable"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the code as it is")

// goldenMessage is one input of the differential check.
type goldenMessage struct {
	name string
	raw  []byte
}

// goldenMessages are the messages whose indexes testdata/golden/of.jsonl
// holds: package otp's corpus composed as a text, a multipart and an
// HTML-only message, package mailmsg's committed fuzz inputs, FuzzOf's
// seeds, the bench's message, and mutants of all of them (cut at any
// byte, spliced together) made by a seeded generator, the same on every
// run.
func goldenMessages(t testing.TB) []goldenMessage {
	var ms []goldenMessage
	paths, err := filepath.Glob(filepath.Join("..", "otp", "testdata", "corpus", "*.mail"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		subject, text, html := corpusParts(string(b))
		name := "corpus/" + filepath.Base(p)
		head := "From: Acme <no-reply@acme.example>\r\nTo: sam@example.com\r\nSubject: " + subject + "\r\nMIME-Version: 1.0\r\n"
		if text != "" {
			ms = append(ms, goldenMessage{name + "/text", []byte(head + "Content-Type: text/plain; charset=utf-8\r\n\r\n" + text)})
		}
		if html != "" {
			ms = append(ms, goldenMessage{name + "/html", []byte(head + "Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
				base64.StdEncoding.EncodeToString([]byte(html)))})
			var qp strings.Builder
			w := quotedprintable.NewWriter(&qp)
			w.Write([]byte(text))
			w.Close()
			ms = append(ms, goldenMessage{name + "/alternative", []byte(head + "Content-Type: multipart/alternative; boundary=\"=_b\"\r\n\r\n" +
				"--=_b\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" + qp.String() + "\r\n" +
				"--=_b\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + html + "\r\n--=_b--\r\n")})
		}
	}
	fuzz, err := filepath.Glob(filepath.Join("..", "mailmsg", "testdata", "fuzz", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(fuzz)
	for _, p := range fuzz {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := "fuzz/" + filepath.Base(filepath.Dir(p)) + "/" + filepath.Base(p)
		for i, line := range strings.Split(string(b), "\n")[1:] {
			_, lit, ok := strings.Cut(line, "(")
			v, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
			if !ok || err != nil {
				continue
			}
			ms = append(ms, goldenMessage{fmt.Sprintf("%s/%d", name, i), []byte(v)},
				goldenMessage{fmt.Sprintf("%s/%d/html", name, i), []byte("Content-Type: text/html\r\n\r\n" + v)})
		}
	}
	ms = append(ms, goldenMessage{"seed/html", htmlOnly(2)}, goldenMessage{"seed/parts", manyParts(3)},
		goldenMessage{"seed/word", []byte("Subject: =?utf-8?q?x?=\r\n\r\n\xff")},
		goldenMessage{"bench/512", benchMessage(t, 512)}, goldenMessage{"bench/4096", benchMessage(t, 4096)})
	rng := rand.New(rand.NewPCG(37, 2026))
	n := len(ms)
	for i := range 1000 {
		a, b := ms[rng.IntN(n)].raw, ms[rng.IntN(n)].raw
		var raw []byte
		switch rng.IntN(3) {
		case 0:
			raw = window(rng, a)
		case 1:
			raw = append(append([]byte{}, a[:rng.IntN(len(a)+1)]...), window(rng, b)...)
		case 2: // a part's bytes in another's body
			raw = append(append([]byte{}, a...), window(rng, b)...)
		}
		ms = append(ms, goldenMessage{fmt.Sprintf("mutant/%d", i), raw})
	}
	return ms
}

// corpusParts reads one mail of package otp's corpus (its format is
// described there, corpusMail).
func corpusParts(s string) (subject, text, html string) {
	part := ""
	var t, h []string
	for _, line := range strings.Split(s, "\n") {
		switch {
		case line == "--- text" || line == "--- html":
			part = line[4:]
		case part == "text":
			t = append(t, line)
		case part == "html":
			h = append(h, line)
		case strings.HasPrefix(line, "subject: "):
			subject = strings.TrimPrefix(line, "subject: ")
		}
	}
	return subject, strings.TrimSuffix(strings.Join(t, "\r\n"), "\r\n"), strings.TrimSuffix(strings.Join(h, "\n"), "\n")
}

func window(rng *rand.Rand, b []byte) []byte {
	i, j := rng.IntN(len(b)+1), rng.IntN(len(b)+1)
	return b[min(i, j):max(i, j)]
}

// digest is an index as the golden file holds it: its long texts, its
// header fields and its inline images by length and hash.
func digest(x Index) any {
	short := func(s string) string {
		if len(s) <= 64 {
			return s
		}
		h := sha256.Sum256([]byte(s))
		return fmt.Sprintf("%d bytes, sha256 %s", len(s), hex.EncodeToString(h[:8]))
	}
	headers, err := json.Marshal(x.Headers)
	if err != nil {
		panic(err)
	}
	x.Text, x.HTML, x.HTMLText = short(x.Text), short(x.HTML), short(x.HTMLText)
	x.Inline = append(x.Inline[:0:0], x.Inline...)
	for i := range x.Inline {
		x.Inline[i].Data = []byte(short(string(x.Inline[i].Data)))
	}
	x.Headers = nil
	return struct {
		Index
		V       int    `json:"v,omitempty"` // the index's, not Of's: a new version must not change the file
		Headers string `json:"headers"`
	}{x, 0, short(string(headers))}
}

const goldenPath = "testdata/golden/of.jsonl"

// TestOfGolden compares Of's indexes with those of the code the golden
// file was made from (go test -run Golden -update rewrites it): a change
// that means to keep every index, such as one for speed, must leave it as
// it is.
func TestOfGolden(t *testing.T) {
	ms := goldenMessages(t)
	got := make([]string, len(ms))
	for i, m := range ms {
		j, err := json.Marshal([]any{m.name, digest(Of(m.raw))})
		if err != nil {
			t.Fatal(err)
		}
		got[i] = string(j)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(filepath.FromSlash(goldenPath)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.FromSlash(goldenPath), []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
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
	sc.Buffer(nil, 4<<20)
	i := 0
	for ; sc.Scan() && i < len(got); i++ {
		if want := sc.Text(); got[i] != want {
			t.Errorf("%s: Of(%q)\n got %s\nwant %s", ms[i].name, ms[i].raw, got[i], want)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(got) || sc.Scan() {
		t.Fatalf("the golden file and the %d messages differ in number", len(got))
	}
}
