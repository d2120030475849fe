// Package otp finds what an evaluator looks for in a message: the one-time
// code a person would type, the link a person is asked to click, and every
// link.
//
// The reference took the first run of 4–8 Unicode digits of the text
// (docs/reference.md §8.7), so a ZIP code, a date or an order number above the
// code won, and mail with no code got one anyway. Here (docs/reference.md §13,
// quirk 26) a code is what a code word, the subject or the HTML layout
// marks as one, in the typed form ("884 213" → "884213", "G-583920" →
// "583920", "XQM-4R7" → "XQM4R7"); postal codes, phone numbers, dates,
// years, prices, order, invoice, account and reference numbers, numbers in
// URLs and the © line never are; and a message without a marked code has
// none.
//
// The package is pure: no I/O, nothing fetched (fetching a one-time link
// could use it up), and its input is untrusted mail. Every step reads its
// input once, or a window of bounded size around one candidate, so the
// cost of a message is linear in its length.
package otp

// Limits on what one message yields; a body of a megabyte of numbers must
// not turn into a megabyte of JSON array.
const (
	MaxCodes = 32
	MaxLinks = 256
)

// Result is what a message yields.
type Result struct {
	// OTP is the code a person would type, as typed, or "" when the
	// message has none. When set it is Codes[0].
	OTP string
	// Codes are the candidate codes, best first, in the same typed form:
	// the ones marked as a code, then numbers that nothing rules out.
	// No code appears twice.
	Codes []string
	// ActionLink is the one link a person is asked to click (verify,
	// confirm, sign in, reset, accept an invitation, a magic link), as
	// written in the message, or "" when there is none.
	ActionLink string
	// Links are the http and https URLs of the text, then those of the HTML
	// part's hrefs, in order, without repeats.
	Links []string
}

// Extract reads a message: its subject, its text part and its HTML part
// (either may be empty).
func Extract(subject, text, html string) Result {
	docs := make([]doc, 0, 3)
	docs = append(docs, textDoc(subject), textDoc(text))
	if html != "" {
		docs = append(docs, htmlDoc(html))
	}
	otp, codes := bestCodes(docs)
	return Result{OTP: otp, Codes: codes, ActionLink: actionLink(docs[1:]), Links: links(text, docs[1].urlSpans(), html)}
}

// scored is one distinct code and its best score.
type scored struct {
	code   string
	score  int
	marked bool // a code word, the layout or a line of its own marks it
	order  int
}

// bestCodes weighs every candidate of the docs (docs[0] is the subject)
// and returns the code and the candidates, best first.
func bestCodes(docs []doc) (string, []string) {
	byCode := map[string]*scored{}
	var list []*scored
	inSubject := map[string]bool{}
	mailSaysCode := subjectNamesCode(docs[0].text)
	for di := range docs {
		d := &docs[di]
		cs := candidates(d)
		ea := emphasisAt{spans: d.emph}
		cells := 0
		var ci *cueIndex // read only for candidates
		if len(cs) > 0 {
			ci = newCueIndex(d.text)
		}
		for i := range cs {
			weigh(d, &cs[i], &ea, &cells)
			instruct(ci, &cs[i])
		}
		voidBack(ci, cs)
		for i := range cs {
			c := &cs[i]
			if c.dropped {
				continue
			}
			if c.kind == kLetters && !c.codeWord && !c.layout {
				continue // capitals and digits are a code only where something marks them
			}
			mailSaysCode = mailSaysCode || c.codeWord
			if di == 0 {
				inSubject[c.code] = true
				c.score += wSubject
			} else if inSubject[c.code] {
				c.score += wInSubject
			}
			s := byCode[c.code]
			if s == nil {
				if len(list) >= 4*MaxCodes && !c.codeWord && !c.layout {
					continue // past the limit, only marked codes may still win
				}
				s = &scored{code: c.code, score: c.score, order: len(list)}
				byCode[c.code] = s
				list = append(list, s)
			}
			s.score = max(s.score, c.score)
			s.marked = s.marked || c.codeWord || c.layout || c.alone || di == 0 && c.score > wSubject
		}
	}
	if mailSaysCode {
		for _, s := range list {
			s.score += wMailSaysCode
		}
	}
	// Best first: a bucket per score keeps this linear; within a score,
	// the first seen first.
	const lo, hi = -40, 60
	var buckets [hi - lo + 1][]*scored
	for _, s := range list {
		b := min(max(s.score, lo), hi) - lo
		buckets[b] = append(buckets[b], s)
	}
	codes := []string{}
	for b := len(buckets) - 1; b >= 0 && len(codes) < MaxCodes; b-- {
		for _, s := range buckets[b] {
			if len(codes) == MaxCodes {
				break
			}
			codes = append(codes, s.code)
		}
	}
	if len(codes) > 0 {
		if s := byCode[codes[0]]; s.score >= threshold && s.marked {
			return s.code, codes
		}
	}
	return "", codes
}

// subjectNamesCode reports whether a subject speaks of a code.
func subjectNamesCode(s string) bool {
	var buf [8]mark
	for _, m := range marks(buf[:0], s, 0, len(s)) {
		if m.cl == clCode {
			return true
		}
	}
	return false
}
