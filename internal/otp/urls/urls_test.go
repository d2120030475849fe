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

// FuzzValid: what Valid takes without a parse (plain), url.Parse takes
// too, as an http(s) URL with a host.
func FuzzValid(f *testing.F) {
	for _, s := range []string{"https://site.example/verify?t=abc", "HTTP://a", "http://a.b/c:d@e?f=g&h=(i)", "http://_-.~/", "https://x.example?",
		"http://a:80/", "http://[::1]/", "http://a%41/", "https://a/b#c", "http:///a", "https://ü.example/p", "http://a/%zz", "http://a b/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		if plain(u) && !parsed(u) {
			t.Fatalf("plain(%q), but url.Parse does not take it", u)
		}
	})
}

// Every URL of the alphabet plain reads, up to a few characters after
// the scheme, that plain takes, url.Parse takes.
func TestPlainParses(t *testing.T) {
	const alphabet = "aZ9-._~/?!$&'()*+,;=:@%#[] \x00\xc3"
	var grow func(u string, n int)
	grow = func(u string, n int) {
		if plain(u) != parsed(u) && plain(u) {
			t.Fatalf("plain(%q), but url.Parse does not take it", u)
		}
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			grow(u+alphabet[i:i+1], n-1)
		}
	}
	grow("http://", 4)
	grow("HTTPS://a", 3)
}
