package otp

import (
	"html"
	"regexp"
	"strings"

	"github.com/websitebench/mailplane/internal/otp/urls"
)

// href finds the targets of href attributes in an HTML part.
var href = regexp.MustCompile(`(?i)\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+))`)

// Links returns the URLs of text, then the http(s) href targets of html,
// in order and without repeats, at most MaxLinks.
func Links(text, htmlPart string) []string {
	return links(text, urls.Spans(text), htmlPart)
}

// links is Links with the URLs of text already found.
func links(text string, spans []urls.Span, htmlPart string) []string {
	links := []string{}
	seen := map[string]bool{}
	add := func(u string) bool {
		if seen[u] {
			return true
		}
		if len(links) == MaxLinks {
			return false
		}
		seen[u] = true
		links = append(links, u)
		return true
	}
	for _, s := range spans {
		if !add(text[s.Start:s.End]) {
			return links
		}
	}
	for _, m := range href.FindAllStringSubmatch(htmlPart, -1) {
		u := strings.TrimSpace(html.UnescapeString(m[1] + m[2] + m[3]))
		if u == "" || strings.IndexFunc(u, func(c rune) bool { return !urls.Rune(c) }) >= 0 || !urls.Valid(u) {
			continue
		}
		if !add(u) {
			return links
		}
	}
	return links
}
