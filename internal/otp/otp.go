// Package otp finds what an evaluator looks for in a message body: the
// one-time code and the links.
//
// The reference took the first run of 4–8 Unicode digits (BEHAVIOR.md §8.7),
// so a date or a phone number above the code won, and Arabic-Indic digits
// counted. Here (ARCHITECTURE.md, quirk 26) only ASCII digits count; a run
// next to a word such as "code", "OTP", "passcode", "PIN" or "verification"
// beats a run that is not; and runs that are part of a date, a time, a phone
// number or any other number joined by separators (1,234.56, 10.0.0.1,
// 2024-01-02, 555-0100) are not codes at all.
//
// The package is pure: no I/O, and its input is untrusted mail.
package otp

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what one message yields; a body of a megabyte of numbers must
// not turn into a megabyte of JSON array.
const (
	MaxCodes = 32
	MaxLinks = 256
	minRun   = 4
	maxRun   = 8
	// keywordBefore and keywordAfter are how far (in bytes) a keyword may
	// end before a run, or start after it, and still be "next to" it, with
	// no other digit between them: "Your verification code is: 123456",
	// "123456 is your code".
	keywordBefore = 40
	keywordAfter  = 24
	// phoneReach is how far after "phone", "call"... a run is taken to be
	// part of the number.
	phoneReach = 24
	// dateReach is how much text before a four-digit run is read to tell
	// a year of a written-out date ("January 2, 2024") or a copyright.
	dateReach = 32
)

// Every check below reads only a small window around one run of digits,
// so the cost of a message grows with its length, never with its length
// times the number of patterns.

// keywords mark a code. They are compared as whole words, ignoring case.
var keywords = map[string]bool{
	"code": true, "codes": true, "otp": true, "passcode": true, "pin": true, "verification": true,
	"verify": true, "mfa": true, "código": true, "codigo": true, "codice": true, "kód": true, "kod": true, "код": true,
}

// phoneWords are words after which digits are a phone number, and
// phoneFiller the words that may stand between ("call us at").
var (
	phoneWords  = map[string]bool{"phone": true, "telephone": true, "tel": true, "call": true, "fax": true, "mobile": true, "whatsapp": true, "sms": true}
	phoneFiller = map[string]bool{"us": true, "at": true, "on": true, "me": true, "number": true, "no": true, "is": true, "or": true}
)

// yearBefore matches what stands before a year that is part of a date
// written with a month name, or of a copyright line.
var yearBefore = regexp.MustCompile(`(?i)(?:` +
	`\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s+(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?` + // January 2, 2024 / January 2024
	`|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s+` + // 2 January 2024
	`|(?:©|\(c\)|copyright)\s*(?:©\s*)?` + // © 2024
	`)$`)

// Result is what a message body yields.
type Result struct {
	// Codes are the candidate one-time codes, best first: runs next to a
	// keyword (keyword before the run first), then the others, each group
	// in the order they appear. No code appears twice.
	Codes []string
	// Links are the http and https URLs of the text, then those of the HTML
	// part's hrefs, in order, without repeats.
	Links []string
}

// OTP is the best code, or "" when there is none.
func (r Result) OTP() string {
	if len(r.Codes) == 0 {
		return ""
	}
	return r.Codes[0]
}

// Extract reads codes from text and links from text and html.
func Extract(text, html string) Result {
	return Result{Codes: Codes(text), Links: Links(text, html)}
}

type run struct {
	start, end int // byte offsets of the digits
	tier       int // 0: keyword before, 1: keyword after, 2: plain
}

// Codes returns the candidate codes of text, best first.
func Codes(text string) []string {
	var tiers [3][]run
	for _, r := range digitRuns(text) {
		if n := r.end - r.start; n < minRun || n > maxRun || joined(text, r) || phoneNumber(text, r) || year(text, r) || afterPhoneWord(text, r) {
			continue
		}
		r.tier = 2
		if keywordPrecedes(text, r) {
			r.tier = 0
		} else if keywordFollows(text, r) {
			r.tier = 1
		}
		tiers[r.tier] = append(tiers[r.tier], r)
	}
	codes := []string{}
	seen := map[string]bool{}
	for _, tier := range tiers {
		for _, r := range tier {
			c := text[r.start:r.end]
			if seen[c] {
				continue
			}
			if len(codes) == MaxCodes {
				return codes
			}
			seen[c] = true
			codes = append(codes, c)
		}
	}
	return codes
}

// digitRuns returns every maximal run of ASCII digits.
func digitRuns(text string) []run {
	var runs []run
	for i := 0; i < len(text); {
		if !isDigit(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isDigit(text[j]) {
			j++
		}
		runs = append(runs, run{start: i, end: j})
		i = j
	}
	return runs
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// joined reports whether r is joined to another number by punctuation:
// 2024-01-02, 12:30:45, 1,234.56, 10.0.0.1, 555-0100, 1/2/2024.
func joined(text string, r run) bool {
	isJoin := func(b byte) bool { return b == '-' || b == '.' || b == '/' || b == ':' || b == ',' }
	if r.start >= 2 && isJoin(text[r.start-1]) && isDigit(text[r.start-2]) {
		return true
	}
	return r.end+1 < len(text) && isJoin(text[r.end]) && isDigit(text[r.end+1])
}

// phoneNumber reports whether r is part of an international number
// ("+1 555 010 0100") or one with a bracketed area code ("(555) 123 4567",
// "(0800) 1234").
func phoneNumber(text string, r run) bool {
	isPhone := func(b byte) bool { return isDigit(b) || b == ' ' || b == '-' || b == '.' || b == '(' || b == ')' }
	i := r.start
	for i > 0 && r.start-i < phoneReach && isPhone(text[i-1]) {
		i--
	}
	if i > 0 && text[i-1] == '+' && isDigit(text[i]) {
		return true
	}
	// A bracketed group of digits before the run, or the run itself in
	// brackets followed by more digits.
	if j := strings.LastIndexByte(text[i:r.start], ')'); j >= 0 {
		k := i + j
		d := k
		for d > i && isDigit(text[d-1]) {
			d--
		}
		if d < k && d > i && text[d-1] == '(' {
			return true
		}
	}
	if r.start > 0 && text[r.start-1] == '(' && r.end < len(text) && text[r.end] == ')' {
		rest := strings.TrimPrefix(text[r.end+1:], " ")
		return rest != "" && isDigit(rest[0])
	}
	return false
}

// year reports whether a four-digit r is the year of a date written with a
// month name, or of a copyright line.
func year(text string, r run) bool {
	if r.end-r.start != 4 {
		return false
	}
	return yearBefore.MatchString(text[max(0, r.start-dateReach):r.start])
}

// afterPhoneWord reports whether r follows "phone", "call"... closely,
// with nothing but punctuation, other digits and filler words ("call us
// at", "phone number:") in between.
func afterPhoneWord(text string, r run) bool {
	ws := words(text, max(0, r.start-phoneReach), r.start)
	for i := len(ws) - 1; i >= 0; i-- {
		w := strings.ToLower(ws[i].s)
		switch {
		case phoneWords[w]:
			return true
		case !phoneFiller[w]:
			return false
		}
	}
	return false
}

// keywordPrecedes reports whether a keyword ends at most keywordBefore bytes
// before r, with no digit in between.
func keywordPrecedes(text string, r run) bool {
	from := max(0, r.start-keywordBefore)
	if d := strings.LastIndexAny(text[from:r.start], "0123456789"); d >= 0 {
		from += d + 1
	}
	// A keyword may begin before the window as long as it ends inside it.
	for from > 0 && from > r.start-keywordBefore-16 && !isBoundary(text, from) {
		from--
	}
	return hasKeyword(words(text, from, r.start))
}

// keywordFollows reports whether a keyword starts at most keywordAfter bytes
// after r, with no digit in between.
func keywordFollows(text string, r run) bool {
	to := min(len(text), r.end+keywordAfter)
	if d := strings.IndexAny(text[r.end:to], "0123456789"); d >= 0 {
		to = r.end + d
	}
	for to < len(text) && to < r.end+keywordAfter+16 && !isBoundary(text, to) {
		to++
	}
	return hasKeyword(words(text, r.end, to))
}

func hasKeyword(ws []word) bool {
	for i, w := range ws {
		l := strings.ToLower(w.s)
		if keywords[l] {
			return true
		}
		// "one-time" and "one time"
		if l == "one" && i+1 < len(ws) && strings.EqualFold(ws[i+1].s, "time") && ws[i+1].start-w.end == 1 {
			return true
		}
	}
	return false
}

// word is a run of letters in a text.
type word struct {
	s          string
	start, end int
}

// words returns the whole words of text[from:to]: a word cut by either
// end of the window is left out.
func words(text string, from, to int) []word {
	var out []word
	for i := from; i < to; {
		c, size := utf8.DecodeRuneInString(text[i:])
		if !unicode.IsLetter(c) {
			i += size
			continue
		}
		j := i
		for j < to {
			c, size := utf8.DecodeRuneInString(text[j:])
			if !unicode.IsLetter(c) {
				break
			}
			j += size
		}
		if isBoundary(text, i) && isBoundary(text, j) {
			out = append(out, word{s: text[i:j], start: i, end: j})
		}
		i = j
	}
	return out
}

// isBoundary reports whether offset i of text is not inside a word.
func isBoundary(text string, i int) bool {
	if i <= 0 || i >= len(text) {
		return true
	}
	before, _ := utf8.DecodeLastRuneInString(text[:i])
	after, _ := utf8.DecodeRuneInString(text[i:])
	return !unicode.IsLetter(before) || !unicode.IsLetter(after)
}
