package mailmsg

import (
	"html"
	"regexp"
	"strings"
)

var (
	htmlHidden = regexp.MustCompile(`(?is)<(script|style|head|title)\b[^>]*>.*?</(script|style|head|title)\s*>|<!--.*?-->`)
	htmlLink   = regexp.MustCompile(`(?is)<a\b[^>]*?\bhref\s*=\s*("([^"]*)"|'([^']*)'|([^\s>]+))[^>]*>(.*?)</a\s*>`)
	htmlBreak  = regexp.MustCompile(`(?i)<br\s*/?>|</?(p|div|tr|li|h[1-6]|table|ul|ol|blockquote|pre|hr)\b[^>]*>`)
	htmlTag    = regexp.MustCompile(`(?s)<[^>]*>`)
	blankRuns  = regexp.MustCompile(`\n[ \t]*\n(?:[ \t]*\n)+`)
	spaceRuns  = regexp.MustCompile(`[ \t]+`)
)

// HTMLText derives readable text from an HTML body, for mail that has no
// text part: block elements become line breaks, a link keeps its URL next
// to its words (so a reader can still follow it), scripts and styles are
// dropped, entities are decoded.
func HTMLText(h string) string {
	s := htmlHidden.ReplaceAllString(h, "")
	s = htmlLink.ReplaceAllStringFunc(s, func(m string) string {
		g := htmlLink.FindStringSubmatch(m)
		href := g[2] + g[3] + g[4]
		words := strings.TrimSpace(htmlTag.ReplaceAllString(g[5], ""))
		if words == "" || html.UnescapeString(words) == html.UnescapeString(href) {
			return " " + href + " "
		}
		return words + " (" + href + ")"
	})
	s = htmlBreak.ReplaceAllString(s, "\n")
	s = htmlTag.ReplaceAllString(s, "")
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
