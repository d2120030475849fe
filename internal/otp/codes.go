package otp

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A candidate is a run of characters that could be typed as a code: plain
// digits ("731904"), equal digit groups ("884 213", "402-118"), digits in
// separate cells or spaced out ("7 3 1 9 0 4"), digits behind a service
// prefix ("G-583920"), or capitals and digits ("K7P2QX", "XQM-4R7").
//
// Each is weighed by what stands around it, within a bounded window (a
// line, at most a few dozen bytes either side), so the cost of a message
// is linear in its length.

// kind is the shape of a candidate.
type kind uint8

const (
	kDigits  kind = iota // 731904
	kGrouped             // 884 213, 402-118
	kSingles             // 7 3 1 9 0 4, or one digit per cell
	kPrefix              // G-583920
	kLetters             // K7P2QX, XQM-4R7
)

// Sizes of a code, and the reach of the windows read around it.
const (
	minDigits   = 4
	maxDigits   = 8
	minLetters  = 4
	maxLetters  = 10
	reachBefore = 80  // bytes of the same line read before a candidate
	reachAfter  = 48  // bytes of the same line read after it
	reachLine   = 160 // bytes of the previous line read for a label
	labelReach  = 40  // how far a label (order, account…) may stand before its number
)

// Weights. A candidate is the message's code when its score reaches
// threshold; the others stay in Codes, best first.
const (
	threshold      = 4
	wCodeWord      = 6 // "Your code is 731904"
	wCodeWordFar   = 3 // a code word, but another number stands between
	wCodeAfter     = 5 // "731904 is your code"
	wCodeLineAbove = 5 // "Your code:" on the line above a line that holds only the candidate
	wEntry         = 2 // "Enter 731904"
	wInSubject     = 3 // the body's candidate is also in the subject
	wSubject       = 1 // a candidate of the subject itself
	wMailSaysCode  = 1 // the subject or another candidate names a code
	wLarge         = 3
	wSpaced        = 3
	wBold          = 2
	wMono          = 2
	wCells         = 3 // one character per cell
	wAlone         = 2 // alone on its line or in its cell
	maxLayout      = 5
	wNew           = 2
	wOld           = -7
	wLettersBase   = -1 // capitals and digits need a mark more than digits do
	wYear          = -2 // 1900–2099 with no code word: more often a year than a code
)

// cand is one occurrence of a candidate.
type cand struct {
	code       string // as typed: separators and prefix removed
	start, end int    // in the doc's text
	kind       kind
	score      int
	codeWord   bool // a code word marks it
	layout     bool // HTML emphasis marks it
	alone      bool // alone on its line or in its cell
	dropped    bool // never a code: a date, a phone number, an address…
}

// atom is a maximal run of ASCII letters and digits.
type atom struct {
	start, end     int
	digits, upper  bool // only digits; only capitals and digits
	hasLetter, low bool
}

func atoms(text string) []atom {
	out := make([]atom, 0, len(text)/5+1) // about a word's length apart: mostly one allocation
	for i := 0; i < len(text); {
		if !isAlnum(text[i]) {
			i++
			continue
		}
		a := atom{start: i, digits: true, upper: true}
		for i < len(text) && isAlnum(text[i]) {
			c := text[i]
			switch {
			case 'a' <= c && c <= 'z':
				a.digits, a.upper, a.low, a.hasLetter = false, false, true, true
			case 'A' <= c && c <= 'Z':
				a.digits, a.hasLetter = false, true
			}
			i++
		}
		a.end = i
		out = append(out, a)
	}
	return out
}

func isAlnum(c byte) bool { return isDigit(c) || isAlpha(c) }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// candidates finds the candidates of one doc, in order.
func candidates(d *doc) []cand {
	text := d.text
	as := atoms(text)
	spans := d.urlSpans()
	var out []cand
	si := 0
	for k := 0; k < len(as); {
		if as[k].low {
			k++ // lower case and not all digits: no shape starts here
			continue
		}
		c, n := shape(text, as, k)
		if n == 0 {
			k++
			continue
		}
		k += n
		if c.code == "" {
			continue // atoms that make something longer than a code
		}
		for si < len(spans) && spans[si].End <= c.start {
			si++
		}
		if si < len(spans) && spans[si].Start < c.end {
			continue // inside a URL
		}
		if !cleanEdges(text, c) {
			continue
		}
		if out == nil {
			out = make([]cand, 0, 8) // a mail's few candidates in one allocation, none for a doc without
		}
		out = append(out, c)
	}
	return out
}

// sepBetween returns the text between atoms a and b.
func sepBetween(text string, a, b atom) string { return text[a.end:b.start] }

// isSpaceSep reports whether s separates the characters of a spaced or
// celled code: spaces and tabs only, a few of them.
func isSpaceSep(s string) bool {
	if s == "" || len(s) > 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' && s[i] != '\t' {
			return false
		}
	}
	return true
}

// isGroupSep reports whether s joins the groups of a grouped code.
func isGroupSep(s string) bool { return s == " " || s == "-" || s == "\t" || s == " - " || s == " \t" }

// shape matches the longest candidate starting at atom k and returns it
// with the number of atoms it uses (0: none). It looks at no more than
// maxDigits+1 atoms ahead.
func shape(text string, as []atom, k int) (cand, int) {
	a := as[k]
	alen := a.end - a.start
	// Single characters, one per cell or spaced out.
	if alen == 1 && (a.digits || a.upper) {
		m, digits := 1, a.digits
		for k+m < len(as) && m <= maxDigits && as[k+m].end-as[k+m].start == 1 && (as[k+m].digits || as[k+m].upper) &&
			isSpaceSep(sepBetween(text, as[k+m-1], as[k+m])) {
			digits = digits || as[k+m].digits
			m++
		}
		if m >= minDigits && m <= maxDigits && digits {
			var b strings.Builder
			for i := k; i < k+m; i++ {
				b.WriteByte(text[as[i].start])
			}
			return cand{code: b.String(), start: a.start, end: as[k+m-1].end, kind: kSingles}, m
		}
		if m > maxDigits {
			return cand{}, m // a long spaced run is not a code, nor any part of it
		}
	}
	// Equal digit groups.
	if a.digits && alen >= 2 && alen <= 4 && k+1 < len(as) {
		sep := sepBetween(text, a, as[k+1])
		m := 1
		for k+m < len(as) && as[k+m].digits && as[k+m].end-as[k+m].start == alen && sepBetween(text, as[k+m-1], as[k+m]) == sep && isGroupSep(sep) {
			m++
		}
		if m >= 2 && m*alen >= minDigits && m*alen <= maxDigits && !(sep == " " && alen == 2 && m == 2) {
			var b strings.Builder
			for i := k; i < k+m; i++ {
				b.WriteString(text[as[i].start:as[i].end])
			}
			c := cand{code: b.String(), start: a.start, end: as[k+m-1].end, kind: kGrouped}
			// More digits joined the same way make a longer number.
			if k+m < len(as) && as[k+m].digits && sepBetween(text, as[k+m-1], as[k+m]) == sep {
				return cand{}, m + 1
			}
			return c, m
		}
	}
	// A service prefix: "G-583920".
	if a.hasLetter && a.upper && !hasDigit(text[a.start:a.end]) && alen <= 4 && k+1 < len(as) {
		b := as[k+1]
		if sepBetween(text, a, b) == "-" && b.digits && b.end-b.start >= minDigits && b.end-b.start <= maxDigits &&
			!(k+2 < len(as) && isJoin(sepBetween(text, b, as[k+2])) && as[k+2].digits) {
			return cand{code: text[b.start:b.end], start: a.start, end: b.end, kind: kPrefix}, 2
		}
	}
	// Capitals and digits, perhaps in hyphenated (or equal, spaced) groups.
	if a.upper && !a.low {
		m, total := 1, alen
		for k+m < len(as) && m < 3 && as[k+m].upper && !as[k+m].low {
			sep := sepBetween(text, as[k+m-1], as[k+m])
			next := as[k+m].end - as[k+m].start
			if !(sep == "-" || sep == " " && next == alen && alen >= 3) || total+next > maxLetters {
				break
			}
			total += next
			m++
		}
		for ; m >= 1; m-- {
			s := text[as[k].start:as[k+m-1].end]
			code := unseparate(s)
			if len(code) >= minLetters && len(code) <= maxLetters && hasDigit(code) && hasUpper(code) && (m == 1 || mixedGroups(text, as[k:k+m])) {
				return cand{code: code, start: a.start, end: as[k+m-1].end, kind: kLetters}, m
			}
		}
	}
	if a.digits && alen >= minDigits && alen <= maxDigits {
		return cand{code: text[a.start:a.end], start: a.start, end: a.end, kind: kDigits}, 1
	}
	return cand{}, 0
}

// mixedGroups reports whether grouped atoms make a letter code rather than
// words and numbers side by side ("ABC 123" is a code only with letters in
// the digits' group or digits in the letters').
func mixedGroups(text string, as []atom) bool {
	for _, a := range as {
		if a.digits && a.end-a.start >= minDigits {
			return false // "INV-2024" is a label and a number
		}
	}
	return true
}

// unseparate returns s without the hyphens and spaces between its groups.
func unseparate(s string) string {
	if strings.IndexAny(s, "- ") < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '-' && s[i] != ' ' {
			b = append(b, s[i])
		}
	}
	return string(b)
}

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			return true
		}
	}
	return false
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

func isJoin(s string) bool {
	return s == "-" || s == "." || s == "/" || s == ":" || s == ","
}

// cleanEdges rejects a candidate glued to what makes it something else: a
// letter ("v2024x", "código123"; Chinese, Japanese and Korean text stands
// right next to digits, so those letters do not count), another number
// joined by punctuation (dates, times, 1,234.56, versions), an e-mail
// address, a URL-like path, a currency, a percentage, a masked card
// number.
func cleanEdges(text string, c cand) bool {
	before, bsize := utf8.DecodeLastRuneInString(text[:c.start])
	after, asize := utf8.DecodeRuneInString(text[c.end:])
	if c.start == 0 {
		before = ' '
	}
	if c.end == len(text) {
		after = ' '
	}
	glued := func(r rune) bool { return unicode.IsLetter(r) && !isCJK(r) || r == '_' }
	if glued(before) || glued(after) {
		return false
	}
	if strings.ContainsRune("/=&?%@#$€£¥₩₽*+~\\|<>_^`", before) || strings.ContainsRune("/=%@€£¥₩₽*_\\|<>^`", after) {
		return false
	}
	if strings.ContainsRune("〒", before) {
		return false
	}
	// Joined to another number: 2024-01-02, 12:30, 1,234.56, 10.0.0.1.
	if strings.ContainsRune("-.,/:", before) && c.start-bsize > 0 {
		if p, _ := utf8.DecodeLastRuneInString(text[:c.start-bsize]); isDigitRune(p) {
			return false
		}
	}
	if strings.ContainsRune("-.,/:", after) && c.end+asize < len(text) {
		if n, _ := utf8.DecodeRuneInString(text[c.end+asize:]); isDigitRune(n) {
			return false
		}
	}
	// A digit group joined by one space or hyphen to more digits is part of
	// a longer number (a phone, a card): "030 1234 5678".
	if c.kind == kDigits || c.kind == kGrouped {
		if (before == ' ' || before == '-') && c.start-bsize > 0 {
			if p, _ := utf8.DecodeLastRuneInString(text[:c.start-bsize]); isDigitRune(p) {
				return false
			}
		}
		if (after == ' ' || after == '-') && c.end+asize < len(text) {
			if n, _ := utf8.DecodeRuneInString(text[c.end+asize:]); isDigitRune(n) && digitRunLen(text, c.end+asize) >= 2 {
				return false
			}
		}
	}
	// Inside a word that is a path, an address or a host: "x/1234/y",
	// "www.site1234.com" (the URL finder only finds URLs with a scheme).
	if c.kind == kDigits && (before == '.' || after == '.' && c.end+1 < len(text) && isAlnum(text[c.end+1])) {
		return false
	}
	return true
}

func isDigitRune(r rune) bool { return '0' <= r && r <= '9' }

func digitRunLen(text string, i int) int {
	n := 0
	for i+n < len(text) && isDigit(text[i+n]) {
		n++
	}
	return n
}

// lineBounds returns the start and end of the line around [start,end),
// read no further than reach bytes either way.
func lineBounds(text string, start, end, reach int) (int, int) {
	from := max(0, start-reach)
	if k := strings.LastIndexByte(text[from:start], '\n'); k >= 0 {
		from += k + 1
	}
	to := min(len(text), end+reach)
	if k := strings.IndexByte(text[end:to], '\n'); k >= 0 {
		to = end + k
	}
	return from, to
}

// clauseStart moves from forward past the last sentence end before to:
// ". ", "! ", "? ", and the CJK full stops.
func clauseStart(text string, from, to int) int {
	for i := to - 1; i >= from; i-- {
		switch text[i] {
		case '!', '?', ';':
			return i + 1
		case '.':
			if i+1 < to && (text[i+1] == ' ' || text[i+1] == '\t') && !abbrevBefore(text, i) {
				return i + 1
			}
		case 0x82: // 。(E3 80 82) ！(EF BC 81) ？(EF BC 9F)
			if i >= 2 && text[i-2] == 0xE3 && text[i-1] == 0x80 {
				return i + 1
			}
		case 0x81, 0x9F:
			if i >= 2 && text[i-2] == 0xEF && text[i-1] == 0xBC {
				return i + 1
			}
		}
	}
	return from
}

// abbrevBefore reports whether the '.' at i ends an abbreviation that
// labels a number ("No.", "Nr.", "Ref.", "Tel.", "St.").
func abbrevBefore(text string, i int) bool {
	j := i
	for j > 0 && j > i-5 && isAlpha(text[j-1]) {
		j--
	}
	switch strings.ToLower(text[j:i]) {
	case "no", "nr", "ref", "tel", "st", "inv", "acct", "ph", "fax", "apt", "ste", "mob", "tél":
		return true
	}
	return false
}

// lastClass returns the class of the mark nearest the end of ms that is
// one of cls, and its index; clNone, -1 when there is none.
func nearest(ms []mark, from int, want func(class) bool) (int, bool) {
	for k := len(ms) - 1; k >= from; k-- {
		if want(ms[k].cl) {
			return k, true
		}
	}
	return -1, false
}

// weigh scores one candidate of doc d. subjectCodes are the codes found
// in the subject (for a body's candidates).
func weigh(d *doc, c *cand, ea *emphasisAt, cells *int) {
	text := d.text
	lineFrom, lineTo := lineBounds(text, c.start, c.end, reachBefore)
	// Before: the clause on the same line.
	from := clauseStart(text, max(lineFrom, c.start-reachBefore), c.start)
	if weighBefore(text, c, from) || weighAfter(text, c, lineTo) {
		c.dropped = true
		return
	}
	// The whole line: a copyright line, or an address.
	line := text[lineFrom:lineTo]
	if strings.Contains(line, "©") || containsLower(line, "copyright") || strings.Contains(line, "(c) ") {
		c.dropped = true
		return
	}
	if !c.codeWord && postal(text, lineFrom, lineTo, c) {
		c.dropped = true
		return
	}
	// Alone on its line, and the line above names a code.
	alone := strings.TrimSpace(strings.Trim(text[lineFrom:c.start], " \t:[(「【")) == "" &&
		strings.TrimSpace(strings.Trim(text[c.end:lineTo], " \t.)]」】")) == ""
	if strings.TrimSpace(strings.Trim(text[lineFrom:c.start], " \t:[(「【-–—•*")) == "" && lineFrom > 0 && weighAbove(text, c, lineFrom) {
		c.dropped = true
		return
	}
	weighLayout(d, c, ea, cells, alone)
}

// weighBefore scores c by the clause before it on its line, from from;
// drop reports a mark there that makes c no code (a label, a promotion,
// a month before a year, a place).
func weighBefore(text string, c *cand, from int) (drop bool) {
	var buf [8]mark
	before := marks(buf[:0], text, from, c.start)
	// A number of four or more digits between a mark and the candidate
	// takes the mark for itself.
	lastNumber := -1
	for i := c.start - 1; i >= from; i-- {
		if isDigit(text[i]) && digitRunLen(text, i) >= minDigits-1 && (i == 0 || !isDigit(text[i-1])) {
			lastNumber = i
			break
		}
	}
	var numberAfter bool
	if lastNumber >= 0 {
		numberAfter = true
	}
	codeInClause := false
	for _, m := range before {
		codeInClause = codeInClause || m.cl == clCode
	}
	isCode := false
	for k := len(before) - 1; k >= 0; k-- {
		m := before[k]
		beyond := numberAfter && m.end <= lastNumber
		// A label right before its number ("Order 12345", "Order #12345")
		// always labels it; one followed by a colon labels it unless the
		// clause is about a code ("…to confirm your account: 731904").
		gap := text[m.end:c.start]
		labels := !isCode && !beyond && c.start-m.end <= labelReach &&
			(!codeInClause || !strings.Contains(gap, ":") && !strings.Contains(gap, "："))
		switch m.cl {
		case clCode:
			if !isCode {
				isCode = true
				c.codeWord = true
				if beyond {
					c.score += wCodeWordFar
				} else {
					c.score += wCodeWord
				}
			}
		case clNumber:
			// "PIN number", "인증번호" are code words; "order number" is a
			// label, and "number" alone labels too.
			if k > 0 && before[k-1].cl == clCode && m.start-before[k-1].end <= 2 {
				continue
			}
			if labels {
				return true
			}
		case clLabel, clPhone:
			if labels {
				return true
			}
		case clPromo:
			return true
		case clMonth:
			if isYear(text[c.start:c.end]) && c.start-m.end <= 24 {
				return true
			}
		case clPlace:
			if !codeInClause && c.kind != kLetters {
				return true
			}
		}
	}
	if k, ok := nearest(before, 0, func(cl class) bool { return cl == clNew || cl == clOld }); ok {
		if before[k].cl == clNew {
			c.score += wNew
		} else {
			c.score += wOld
		}
	}
	if !isCode {
		if _, ok := nearest(before, 0, func(cl class) bool { return cl == clEntry }); ok {
			c.score += wEntry
		}
	}
	return false
}

// weighAfter scores c by the rest of its clause after it, on its line
// (ending at lineTo); drop reports a mark or unit there that makes c no
// code.
func weighAfter(text string, c *cand, lineTo int) (drop bool) {
	to := min(lineTo, c.end+reachAfter)
	if k := indexClauseEnd(text[c.end:to]); k >= 0 {
		to = c.end + k
	}
	if k := strings.Index(text[c.end:to], ". "); k >= 0 {
		to = c.end + k
	}
	var buf [8]mark
	after := marks(buf[:0], text, c.end, to)
	afterCode := false
	for _, m := range after {
		afterCode = afterCode || m.cl == clCode
	}
	for k, m := range after {
		if hasDigit(text[c.end:m.start]) && digitRunLen(text, c.end+strings.IndexAny(text[c.end:m.start], "0123456789")) >= minDigits-1 {
			break // a later number owns what follows it
		}
		switch m.cl {
		case clCode:
			if !c.codeWord {
				c.codeWord = true
				c.score += wCodeAfter
			}
		case clOld:
			if m.start-c.end <= 12 {
				c.score += wOld // "731904 has expired"
			}
		case clPromo:
			return true
		case clMonth:
			if isYear(text[c.start:c.end]) && m.start-c.end <= 8 {
				return true
			}
			if isCJKDate(text, c.end, m) {
				return true
			}
		case clPlace:
			if !c.codeWord && m.start-c.end <= 24 && c.kind != kLetters {
				return true
			}
		case clLabel, clNumber:
			if k == 0 && m.start-c.end <= 24 && !c.codeWord && !afterCode && !strings.ContainsAny(text[c.end:m.start], ",.") {
				// "12345 is your order number" — but not "731904, valid for your account"
				return true
			}
		}
	}
	if afterUnit(text, c.end, to) {
		return true
	}
	return false
}

// weighAbove scores c, first on its line, by the line above it (the
// line starts at lineFrom); drop reports a label or promotion there.
func weighAbove(text string, c *cand, lineFrom int) (drop bool) {
	above := prevLine(text, lineFrom)
	var buf [8]mark
	ms := marks(buf[:0], text, above, lineFrom)
	// The line above labels the candidate: as a code when it names one
	// ("Here is the code you need to sign in to account sam:"), as
	// something else when it ends with another label ("Order number:")
	// or offers a discount.
	codeK, labelK, promo := -1, -1, false
	for k, m := range ms {
		switch {
		case m.cl == clCode || m.cl == clNumber && k > 0 && ms[k-1].cl == clCode && m.start-ms[k-1].end <= 2:
			codeK = k
		case m.cl == clLabel || m.cl == clNumber || m.cl == clPhone:
			labelK = k
		case m.cl == clPromo:
			promo = true
		}
	}
	switch {
	case promo && !c.codeWord:
		return true
	case codeK >= 0 && (labelK < codeK || alnumIn(text[ms[labelK].end:lineFrom])):
		if !c.codeWord {
			c.codeWord = true
			c.score += wCodeLineAbove
		}
	case labelK >= 0 && !c.codeWord:
		return true
	}
	if k, ok := nearest(ms, 0, func(cl class) bool { return cl == clNew || cl == clOld }); ok {
		if ms[k].cl == clNew {
			c.score += wNew
		} else {
			c.score += wOld
		}
	}
	return false
}

// weighLayout scores c by how it is set out: emphasis and table cells in
// HTML (cells is the index of the cell reached so far), alone on its
// line or in its cell.
func weighLayout(d *doc, c *cand, ea *emphasisAt, cells *int, alone bool) {
	text := d.text
	layout := 0
	if d.html {
		f := ea.at(text, c.start, c.end)
		if f&emLarge != 0 {
			layout += wLarge
		}
		if f&emSpaced != 0 {
			layout += wSpaced
		}
		if f&emBold != 0 {
			layout += wBold
		}
		if f&emMono != 0 {
			layout += wMono
		}
		if c.kind == kSingles && strings.Contains(text[c.start:c.end], "\t") {
			layout += wCells
		}
		for *cells < len(d.cells) && d.cells[*cells].end < c.end {
			*cells++
		}
		if *cells < len(d.cells) {
			cl := d.cells[*cells]
			if cl.start <= c.start && strings.TrimSpace(text[cl.start:c.start]) == "" && strings.TrimSpace(text[c.end:cl.end]) == "" {
				alone = true
			}
		}
	}
	if layout > 0 {
		c.layout = true
	}
	if alone {
		layout += wAlone
		c.alone = true
	}
	c.score += min(layout, maxLayout)
	if c.kind == kLetters {
		c.score += wLettersBase
	}
	if isYear(c.code) && !c.codeWord {
		c.score += wYear
	}
}

// prevLine returns where the line before the one starting at lineFrom
// begins, skipping blank lines, read no further than reachLine bytes.
func prevLine(text string, lineFrom int) int {
	end := lineFrom - 1
	for end > 0 && (text[end-1] == '\n' || text[end-1] == ' ' || text[end-1] == '\t' || text[end-1] == '\r') && lineFrom-end < reachLine {
		end--
	}
	from := max(0, end-reachLine)
	if k := strings.LastIndexByte(text[from:end], '\n'); k >= 0 {
		from += k + 1
	}
	return from
}

// indexClauseEnd is strings.IndexAny(s, "!?;。！？") without its search
// of the set for every rune.
func indexClauseEnd(s string) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '!' || c == '?' || c == ';':
			return i
		case c >= utf8.RuneSelf:
			if r, _ := utf8.DecodeRuneInString(s[i:]); r == '。' || r == '！' || r == '？' {
				return i
			}
		}
	}
	return -1
}

// containsLower reports whether strings.ToLower(s) contains word, an
// ASCII word in lower case, without making it: ToLower maps each rune by
// unicode.ToLower, which takes a few other runes to ASCII letters too
// ('İ' to 'i', the Kelvin sign to 'k').
func containsLower(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if c := s[i]; c < utf8.RuneSelf && c|0x20 != word[0] {
			continue // an ASCII byte that does not begin the word
		}
		j, k := i, 0
		for ; k < len(word) && j < len(s); k++ {
			r, size := runeAt(s, j)
			if r < utf8.RuneSelf && 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			} else if r >= utf8.RuneSelf {
				r = unicode.ToLower(r)
			}
			if r != rune(word[k]) {
				break
			}
			j += size
		}
		if k == len(word) {
			return true
		}
	}
	return false
}

// isYear reports whether s is a year from 1900 to 2099.
func isYear(s string) bool {
	return len(s) == 4 && (s[:2] == "19" || s[:2] == "20")
}

// isCJKDate reports whether the candidate is followed right away by 年,
// 月, 년, 월: "2024年", "2024년".
func isCJKDate(text string, end int, m mark) bool {
	return strings.TrimSpace(text[end:m.start]) == ""
}

// units are words after a number that make it an amount.
var units = map[string]bool{
	"points": true, "pts": true, "users": true, "members": true, "people": true, "subscribers": true, "followers": true,
	"items": true, "words": true, "steps": true, "miles": true, "km": true, "kg": true, "mb": true, "gb": true, "kb": true,
	"tb": true, "dollars": true, "euros": true, "credits": true, "tokens": true, "requests": true, "emails": true,
	"messages": true, "times": true, "stars": true, "reviews": true, "downloads": true, "views": true, "hours": true,
	"minutes": true, "days": true, "years": true, "usd": true, "eur": true, "gbp": true, "jpy": true, "cny": true,
	"rmb": true, "krw": true, "rub": true, "chf": true, "brl": true, "cad": true, "aud": true, "kr": true,
	"punkte": true, "puntos": true, "pontos": true, "punti": true, "punten": true, "euro": true, "reais": true,
	"руб": true, "рублей": true, "баллов": true, "ft": true, "m": true, "mi": true, "lb": true, "lbs": true,
}

// currencyBefore are currency codes written before an amount.
var currencyBefore = map[string]bool{
	"usd": true, "eur": true, "gbp": true, "jpy": true, "cny": true, "rmb": true, "krw": true, "rub": true, "chf": true,
	"brl": true, "cad": true, "aud": true, "r": true, "us": true, "kr": true, "inr": true, "rs": true, "mxn": true,
}

// afterUnit reports whether a unit or currency follows the number.
func afterUnit(text string, end, to int) bool {
	rest := strings.TrimLeft(text[end:to], " ")
	if rest == "" {
		return false
	}
	r, _ := utf8.DecodeRuneInString(rest)
	if strings.ContainsRune("%€£¥₩₽円元원$", r) {
		return true
	}
	w := rest
	if k := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsLetter(r) }); k >= 0 {
		w = rest[:k]
	}
	return units[strings.ToLower(w)]
}

// postal reports whether the candidate is part of an address: a line with
// a currency before the number ("USD 1234"), a postal code next to a
// city ("10115 Berlin", "Springfield, IL 62704", "1012 AB Amsterdam").
func postal(text string, lineFrom, lineTo int, c *cand) bool {
	// The word right before: a currency or a region.
	j := c.start
	for j > lineFrom && (text[j-1] == ' ' || text[j-1] == ',') {
		j--
	}
	w := j
	for w > lineFrom && isAlpha(text[w-1]) {
		w--
	}
	prev := text[w:j]
	if currencyBefore[strings.ToLower(prev)] && j < c.start {
		return true
	}
	if stateAbbrev[prev] {
		return true
	}
	if c.kind != kDigits || c.end-c.start > 6 {
		return false
	}
	// "10115 Berlin", "75002 Paris, France", "1012 AB Amsterdam".
	rest := text[c.end:lineTo]
	if strings.HasPrefix(rest, " ") {
		r := rest[1:]
		if len(r) >= 3 && 'A' <= r[0] && r[0] <= 'Z' && 'A' <= r[1] && r[1] <= 'Z' && r[2] == ' ' {
			r = r[3:]
		}
		if capitalizedWord(r) {
			return true
		}
	}
	// "Springfield 55555", "Springfield, 55555": a capitalized word before,
	// on a line with a comma (a street, a city, a country).
	if j > w && j < c.start && strings.ContainsRune(text[lineFrom:lineTo], ',') && 'A' <= text[w] && text[w] <= 'Z' {
		return true
	}
	return false
}

// capitalizedWord reports whether s begins with a word in capitals and
// lower case ("Berlin", "São"), which after a number is a place.
func capitalizedWord(s string) bool {
	r, size := utf8.DecodeRuneInString(s)
	if !unicode.IsUpper(r) {
		return false
	}
	n, _ := utf8.DecodeRuneInString(s[size:])
	return unicode.IsLower(n)
}
