package urls

import (
	"slices"
	"testing"
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
