package mailmsg

import (
	"html"
	"regexp"
	"strings"
	"testing"
)

// htmlTextRegexp is HTMLText as it was written with regular expressions,
// kept as the reference that the loops must agree with on ordinary HTML.
func htmlTextRegexp(h string) string {
	var (
		hidden    = regexp.MustCompile(`(?is)<(script|style|head|title)\b[^>]*>.*?</(script|style|head|title)\s*>|<!--.*?-->`)
		link      = regexp.MustCompile(`(?is)<a\b[^>]*?\bhref\s*=\s*("([^"]*)"|'([^']*)'|([^\s>]+))[^>]*>(.*?)</a\s*>`)
		brk       = regexp.MustCompile(`(?i)<br\s*/?>|</?(p|div|tr|li|h[1-6]|table|ul|ol|blockquote|pre|hr)\b[^>]*>`)
		tag       = regexp.MustCompile(`(?s)<[^>]*>`)
		blankRuns = regexp.MustCompile(`\n[ \t]*\n(?:[ \t]*\n)+`)
		spaceRuns = regexp.MustCompile(`[ \t]+`)
	)
	s := hidden.ReplaceAllString(h, "")
	s = link.ReplaceAllStringFunc(s, func(m string) string {
		g := link.FindStringSubmatch(m)
		href := g[2] + g[3] + g[4]
		words := strings.TrimSpace(tag.ReplaceAllString(g[5], ""))
		if words == "" || html.UnescapeString(words) == html.UnescapeString(href) {
			return " " + href + " "
		}
		return words + " (" + href + ")"
	})
	s = brk.ReplaceAllString(s, "\n")
	s = tag.ReplaceAllString(s, "")
	s = html.UnescapeString(s)
	s = strings.ReplaceAll(s, "\u00a0", " ")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(spaceRuns.ReplaceAllString(l, " "))
	}
	s = strings.Join(lines, "\n")
	s = blankRuns.ReplaceAllString(s, "\n\n")
	return strings.TrimSpace(s)
}

func TestHTMLTextAsBefore(t *testing.T) {
	for _, h := range []string{
		`<p>Your code is <b>123456</b></p><a href="https://x.example/v?t=1&amp;u=2">Verify</a>`,
		"<html><head><title>T</title><style>p{color:red}</style></head><body><p>Hi</p></body></html>",
		"<script>alert(1)</script><STYLE type=x>p{}</STYLE ><!-- c -->text<!-- d -->",
		`<a href='https://a.example'>https://a.example</a><br/><div>x</div><br><BR />y`,
		"&lt;not a tag&gt; &amp;amp; &#x41; &nbsp;\u00a0",
		`<a href=https://b.example/x>b<a href="c">c</a></a>`,
		"<table><tr><td>1</td></tr></table>\r\n\r\n\r\n<p>end",
		"<a\nhref\n=\n\"x\"\n>y</a\n>",
		`<A class="btn" HREF="https://c.example/confirm?id=1" target=_blank><span>Confirm</span></A> now`,
		`<a name=top>no link</a><a href="">empty</a><a href=x>x</a>`,
		`<a data-href="d" href="h">both</a>`,
		`<h1>Title</h1><h7>not a block</h7><ul><li>one</li><li>two</li></ul><pre>a   b</pre><hr>`,
		"<p>a\t\t b</p>\n\n\n\n<p> c </p>",
		`<script>never closed <p>text</p>`,
		`<!-- never closed <p>text</p>`,
		`<a href="https://u.example/">unclosed link <p>text</p>`,
		`<a href="x>y">quote past the bracket</a>`,
		"<scripts>not hidden</scripts><titles>x</titles>",
		"a < b > c <br> d",
	} {
		if got, want := HTMLText(h), htmlTextRegexp(h); got != want {
			t.Errorf("HTMLText(%q)\n = %q\nwas %q", h, got, want)
		}
	}
}
