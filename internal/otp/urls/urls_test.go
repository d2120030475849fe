package urls

import (
	"slices"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/limits"
)

func TestSpans(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"a https://x.example/1 b http://y.example c", []string{"https://x.example/1", "http://y.example"}},
		{"See https://a.example/x. Or (https://b.example/y) or [http://c.example/z]!", []string{"https://a.example/x", "https://b.example/y", "http://c.example/z"}},
		{"Wiki https://w.example/A_(b) end", []string{"https://w.example/A_(b)"}},
		{`"https://q.example/a"><script>`, []string{"https://q.example/a"}},
		{"https://ü.example/pfad ok", []string{"https://ü.example/pfad"}},
		{"javascript:alert(1) data:text/html,x mailto:a@b.example ftp://f.example", nil},
		{"https:// nothing, http://, xhttps://evil.example", nil},
		{"line\nhttps://n.example/a\r\nnext", []string{"https://n.example/a"}},
		// The old scan skipped as far past a refused scheme as that scheme
		// stood from where it had started looking, and missed this one.
		{"00http:// http://y.example", []string{"http://y.example"}},
	} {
		var got []string
		for _, s := range Spans(tc.text) {
			got = append(got, tc.text[s.Start:s.End])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Spans(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// FuzzSpans checks that spans are ordered, disjoint, inside the text, and
// each a valid http(s) URL.
func FuzzSpans(f *testing.F) {
	for _, s := range []string{"see https://a.example/x.", "(https://b.example/y)", "https://ü.example/p", "xhttps://e.example", "https://", "http://[::1]:80/a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		prev := 0
		for _, s := range Spans(text) {
			if s.Start < prev || s.End <= s.Start || s.End > len(text) {
				t.Fatalf("bad span %v after %d in %q", s, prev, text)
			}
			if !Valid(text[s.Start:s.End]) {
				t.Fatalf("span %q is not a valid URL", text[s.Start:s.End])
			}
			prev = s.End
		}
	})
}

// The limits: a URL longer than limits.URLBytes is text; only URLs that
// start within limits.LinkifyBytes are found, each read to its end.
func TestSpansLimits(t *testing.T) {
	long := "https://x.example/" + strings.Repeat("a", limits.URLBytes)
	if s := Spans("see " + long + " and https://y.example/"); len(s) != 1 || s[0].Start != len("see ")+len(long)+len(" and ") {
		t.Fatalf("a URL of %d bytes was linked: %v", len(long), s)
	}
	if Valid(long) {
		t.Fatal("Valid accepts a URL over the limit")
	}
	pad := strings.Repeat(" ", limits.LinkifyBytes-len("https://"))
	text := pad + "https://edge.example/a" + " https://beyond.example/"
	s := Spans(text)
	if len(s) != 1 || text[s[0].Start:s[0].End] != "https://edge.example/a" {
		t.Fatalf("at the edge of the window: %v", s)
	}
}

// Candidates that cost a parse and fail spend a budget of about twice
// the text; past it no more links are found, the same ones every time.
func TestSpansBudget(t *testing.T) {
	bad := strings.Repeat(strings.Repeat("/http://a/%z", 600)+" ", 40)
	text := "https://first.example/ " + bad + " https://last.example/"
	s := Spans(text)
	if len(s) != 1 || text[s[0].Start:s[0].End] != "https://first.example/" {
		t.Fatalf("got %v", s)
	}
	if !slices.Equal(Spans(text), s) {
		t.Fatal("not deterministic")
	}
	// Ordinary text never runs out.
	many := strings.Repeat("see https://x.example/a, ", limits.LinkifyBytes/25)
	if got, want := len(Spans(many)), limits.LinkifyBytes/25; got != want {
		t.Fatalf("%d links of %d", got, want)
	}
}
