package otp

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// Codes a mail marks by what it tells the reader to do with them, where no
// code word does ("Type 482913 into the app to continue", "Gib 482913 in
// der App ein, um fortzufahren"), and codes a mail says no longer stand
// ("that code no longer works; use 222222 instead", "ignore 111111").
//
// The rules are general: an instruction is a verb of typing or copying
// and a place the text goes (an app, a page, a field) or a purpose
// (continue, verify, sign in), in the sentence of the number or on the
// line above or below a number that stands alone. A code is void when its
// sentence says so after it, when a word before it says not to use it,
// or when a later sentence that names a code but holds none says a code
// no longer works. Each window read is bounded (reachSentence), so the
// cost stays linear in the text.

// cue is what a word says about a number in an instruction.
type cue uint8

const (
	cueNone          cue = iota
	cueVerb              // type, copy, paste, enter: do something with it
	cuePlace             // where it goes: an app, a page, a field
	cuePurpose           // why: continue, verify, sign in
	cueVoid              // it no longer works: void, revoked, "no longer"
	cueIgnore            // do not use it: ignore, disregard, "do not use", "instead of"
	cueInstead           // it is the replacement: instead, stattdessen
	cueBackVoid          // cueVoid strong enough to void an earlier code from another sentence
	cueAfterIgnore       // an ignore word that follows what it voids: "111111 … replaced by"
	cueSentenceBreak     // not a word: a sentence ends
)

// Weights of the rules here (see codes.go for the others).
const (
	wInstructed = 5 // an instruction marks it, as a code word would
	wVoid       = wOld
	wInstead    = wNew
	// reachSentence bounds the bytes of a sentence read either side of a
	// candidate; reachBack how far before a voiding sentence its code may
	// stand.
	reachSentence = 160
	reachBack     = 400
)

// cueWords are the words that are cues, and the first words of pairs
// (cuePairs): one lookup tells both.
var cueWords = map[string]cueWord{}

type cueWord struct {
	cu   cue  // the word's own cue, or cueNone
	head bool // it begins a pair
}

// cuePairs are two-word cues: the first word, then the second.
var cuePairs = map[[2]string]cue{}

// cueFilter holds cueWords' words: most words of a text are none of them,
// and the filter says so without a map lookup.
var cueFilter wordFilter

// wordFilter is a Bloom filter of one hash: a word added is always in it,
// and a word not added seldom is.
type wordFilter [64]uint64

func (f *wordFilter) add(w string) {
	h := wordHash([]byte(w))
	f[h>>6%64] |= 1 << (h % 64)
}

// may reports whether w may have been added.
func (f *wordFilter) may(w []byte) bool {
	h := wordHash(w)
	return f[h>>6%64]&(1<<(h%64)) != 0
}

func wordHash(w []byte) uint32 {
	h := uint32(len(w))
	for _, c := range w {
		h = h*31 + uint32(c)
	}
	return h ^ h>>12
}

func init() {
	add := func(c cue, words string) {
		for _, w := range strings.Split(words, "|") {
			if a, b, two := strings.Cut(w, " "); two {
				cuePairs[[2]string{a, b}] = c
				e := cueWords[a]
				e.head = true
				cueWords[a] = e
			} else {
				e := cueWords[w]
				e.cu = c
				cueWords[w] = e
			}
		}
	}
	add(cueVerb, "type|enter|paste|copy|input|use|key|tippe|tippen|gib|geben|kopiere|kopieren|füge|einfügen|verwende|nutze|"+
		"saisissez|saisir|entrez|tapez|copiez|collez|utilisez|introduce|ingresa|ingrese|escribe|copia|pega|usa|utiliza|"+
		"digite|insira|copie|cole|use|informe|inserisci|digita|copia|incolla|usa|voer|typ|kopieer|plak|gebruik|vul|"+
		"введите|скопируйте|вставьте|используйте|укажите")
	add(cuePlace, "app|apps|application|page|screen|field|box|form|window|browser|site|website|tab|prompt|device|"+
		"seite|anmeldeseite|feld|fenster|bildschirm|formular|webseite|application|appli|écran|champ|fenêtre|navigateur|formulaire|"+
		"aplicación|página|pantalla|campo|ventana|navegador|sitio|formulario|aplicativo|aplicação|tela|ecrã|janela|formulário|"+
		"applicazione|pagina|schermata|schermo|finestra|sito|modulo|inlogpagina|scherm|veld|venster|formulier|"+
		"приложение|приложении|странице|страницу|поле|экране|окне|браузере|сайте|форме")
	add(cuePurpose, "continue|proceed|verify|confirm|finish|complete|activate|authenticate|unlock|login|signin|"+
		"log in|sign in|signing in|logging in|"+
		"fortzufahren|fortfahren|bestätigen|verifizieren|abzuschließen|anzumelden|anmelden|aktivieren|"+
		"continuer|poursuivre|confirmer|vérifier|terminer|finaliser|activer|connecter|"+
		"continuar|confirmar|verificar|completar|finalizar|activar|acceder|concluir|ativar|acessar|entrar|"+
		"continuare|proseguire|confermare|verificare|completare|accedere|attivare|"+
		"doorgaan|bevestigen|verifiëren|voltooien|inloggen|activeren|"+
		"продолжить|подтвердить|войти|завершить|активировать")
	add(cueBackVoid, "void|voided|revoked|cancelled|canceled|invalidated|deactivated|superseded|replaced|"+
		"no longer|not valid|storniert|widerrufen|ersetzt|nicht mehr|annulé|annulée|révoqué|remplacé|plus valide|"+
		"anulado|anulada|revocado|reemplazado|ya no|cancelado|revogado|substituído|mais válido|annullato|revocato|sostituito|più valido|"+
		"ingetrokken|geannuleerd|vervangen|niet meer|аннулирован|отменён|отменен|заменён|заменен|больше не")
	add(cueVoid, "invalid|ungültig|invalide|inválido|non valido|ongeldig|недействителен")
	add(cueIgnore, "ignore|disregard|ignorieren|ignoriere|ignorez|ignora|ignore|negeer|игнорируйте|"+
		"not use|t use|nicht verwenden|pas utiliser|no uses|não use|non usare|niet gebruiken|не используйте|"+
		"instead of|statt|anstelle|au lieu|en lugar|em vez|invece di|in plaats|вместо")
	add(cueAfterIgnore, "replaces|replacing|ersetzt|remplace|reemplaza|substitui|sostituisce|vervangt|заменяет")
	add(cueInstead, "instead|stattdessen|la place|en cambio|em vez disso|invece|plaats daarvan|вместо этого")
	for w := range cueWords {
		cueFilter.add(w)
	}
}

// cjkCues are looked for inside runs of Han, kana and Hangul letters.
var cjkCues = []struct {
	term string
	cu   cue
}{
	{"输入", cueVerb}, {"輸入", cueVerb}, {"复制", cueVerb}, {"粘贴", cueVerb}, {"入力", cueVerb}, {"コピー", cueVerb}, {"입력", cueVerb}, {"복사", cueVerb},
	{"应用", cuePlace}, {"页面", cuePlace}, {"网页", cuePlace}, {"窗口", cuePlace}, {"アプリ", cuePlace}, {"画面", cuePlace}, {"ページ", cuePlace},
	{"앱", cuePlace}, {"화면", cuePlace}, {"페이지", cuePlace},
	{"继续", cuePurpose}, {"繼續", cuePurpose}, {"验证", cuePurpose}, {"确认", cuePurpose}, {"登录", cuePurpose}, {"続行", cuePurpose},
	{"確認", cuePurpose}, {"ログイン", cuePurpose}, {"계속", cuePurpose}, {"확인", cuePurpose}, {"로그인", cuePurpose},
	{"作废", cueBackVoid}, {"作廢", cueBackVoid}, {"已失效", cueBackVoid}, {"無効になりました", cueBackVoid}, {"무효", cueBackVoid},
	{"忽略", cueIgnore}, {"無視", cueIgnore}, {"무시", cueIgnore},
}

// cueMark is one cue, at a byte range of a text.
type cueMark struct {
	cu         cue
	start, end int
}

// cuesIn returns the cues of text in order, and the offsets of the runes
// that end its sentences (none of which is a letter or a hyphen, so none
// stands inside a word). A pair does not reach across a sentence's end.
func cuesIn(text string) ([]cueMark, []int) {
	out := make([]cueMark, 0, len(text)/16+1) // cues are a few words in a sentence: mostly one allocation
	ends := make([]int, 0, len(text)/64+1)    // a sentence every few dozen bytes: mostly one allocation
	var buf, nohy [32]byte
	prev, prevStart := "", -1
	for i := 0; i < len(text); {
		if c := text[i]; c < utf8.RuneSelf && !isAlpha(c) {
			// Most of a text is ASCII between words: no decoding, no call.
			if (c == '.' || c == '!' || c == '?' || c == ';' || c == '\n') && sentenceEnd(text, i, rune(c), 1) {
				ends = append(ends, i)
				prev = ""
			}
			i++
			continue
		}
		if text[i] >= utf8.RuneSelf { // an ASCII letter ends no sentence and begins a word
			r, size := runeAt(text, i)
			if sentenceEnd(text, i, r, size) {
				ends = append(ends, i)
				prev = ""
			}
			if !isLetter(r) {
				i += size
				continue
			}
		}
		j, cjk, hyphen := i, false, false
		for j < len(text) {
			if c := text[j]; isAlpha(c) {
				j++
				continue
			} else if c < utf8.RuneSelf && c != '-' {
				break // ASCII, and no letter: the word's end
			}
			c, n := runeAt(text, j)
			if !isLetter(c) && !(c == '-' && j > i && j+1 < len(text) && isLetterAt(text, j+1)) {
				break
			}
			cjk = cjk || isCJK(c)
			hyphen = hyphen || c == '-'
			j += n
		}
		if cjk {
			out = appendCJKCues(out, text[i:j], i)
			prev, i = "", j
			continue
		}
		// The word in lower case, and without its hyphens, in buffers:
		// the maps are read with string(bytes), which copies nothing.
		w, changed := lower(&buf, text[i:j])
		var e cueWord
		if cueFilter.may(w) {
			e = cueWords[string(w)]
		}
		cu := e.cu
		if hyphen {
			bare := nohy[:0]
			for _, c := range w {
				if c != '-' {
					bare = append(bare, c)
				}
			}
			cu = cueNone
			if cueFilter.may(bare) {
				cu = cueWords[string(bare)].cu
			}
		}
		pair, paired := cueNone, false
		if prev != "" {
			word := text[i:j] // the text's own bytes, unless lowering changed them
			if changed {
				word = string(w)
			}
			pair, paired = cuePairs[[2]string{prev, word}]
		}
		if paired {
			// The pair wins over its first word's own cue.
			if n := len(out); n > 0 && out[n-1].start == prevStart {
				out = out[:n-1]
			}
			out = append(out, cueMark{pair, prevStart, j})
		} else if cu != cueNone {
			out = append(out, cueMark{cu, i, j})
		}
		prev, prevStart = "", i
		if e.head {
			// Only a pair's first word is remembered: the text's own
			// bytes, unless lowering changed them.
			prev = text[i:j]
			if changed {
				prev = string(w)
			}
		}
		i = j
	}
	return out, ends
}

func appendCJKCues(out []cueMark, w string, at int) []cueMark {
	for i := 0; i < len(w); {
		found := false
		for _, t := range cjkCues {
			if strings.HasPrefix(w[i:], t.term) {
				out = append(out, cueMark{t.cu, at + i, at + i + len(t.term)})
				i += len(t.term)
				found = true
				break
			}
		}
		if !found {
			_, size := utf8.DecodeRuneInString(w[i:])
			i += size
		}
	}
	return out
}

// sentenceEnd reports whether the rune r at i ends a sentence: a full
// stop, question or exclamation mark followed by white space or the end,
// or a blank line.
func sentenceEnd(text string, i int, r rune, size int) bool {
	switch r {
	case '。', '！', '？':
		return true
	case '.', '!', '?', ';':
		return i+size >= len(text) || text[i+size] == ' ' || text[i+size] == '\n' || text[i+size] == '\r'
	case '\n':
		k := i + 1
		for k < len(text) && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r') {
			k++
		}
		return k < len(text) && text[k] == '\n'
	}
	return false
}

// cueIndex is what instruct reads of one doc, found in one pass: where
// its sentences end and its cues, both in order, so that the window of
// each candidate is a search, not a scan.
type cueIndex struct {
	text string
	ends []int // offsets of the runes that end a sentence
	cues []cueMark
}

func newCueIndex(text string) *cueIndex {
	ci := &cueIndex{text: text}
	ci.cues, ci.ends = cuesIn(text)
	return ci
}

// sentence returns the bounds of the sentence around [start, end), read
// no further than reachSentence bytes either side.
func (ci *cueIndex) sentence(start, end int) (int, int) {
	from, to := max(0, start-reachSentence), min(len(ci.text), end+reachSentence)
	k := sort.SearchInts(ci.ends, start) // the first end at or after start
	if k > 0 && ci.ends[k-1]+1 > from {
		from = ci.ends[k-1] + 1
	}
	if k < len(ci.ends) && ci.ends[k] < to && ci.ends[k] >= end {
		to = ci.ends[k]
	}
	return from, to
}

// within returns the cues that lie inside [from, to).
func (ci *cueIndex) within(from, to int) []cueMark {
	i := sort.Search(len(ci.cues), func(i int) bool { return ci.cues[i].start >= from })
	j := i
	for j < len(ci.cues) && ci.cues[j].end <= to {
		j++
	}
	return ci.cues[i:j]
}

// instruct weighs what the text tells its reader to do with c, after
// weigh: an instruction marks it (and outweighs words after it that
// weigh read as a unit or a label: "482913 in der App"); a sentence that
// voids it, or a word before it that says not to use it, counts against
// it; "instead" after it counts for it.
func instruct(ci *cueIndex, c *cand) {
	from, to := ci.sentence(c.start, c.end)
	cs := ci.within(from, to)
	var last *cueMark // the last cue before c
	for k := range cs {
		m := &cs[k]
		switch {
		case m.end <= c.start:
			last = m
		case m.start < c.end:
		case m.cu == cueVoid || m.cu == cueBackVoid:
			c.score += wVoid
			return
		case m.cu == cueInstead:
			c.score += wInstead
		}
	}
	if last != nil && (last.cu == cueIgnore && c.start-last.end <= 24 || last.cu == cueAfterIgnore && c.start-last.end <= 16) {
		c.score += wVoid // "ignore 111111", "instead of 111111", "replaces 111111"
		return
	}
	if c.codeWord || !instructed(ci, c, cs, from, to) {
		return
	}
	c.dropped = false
	c.codeWord = true
	c.score += wInstructed
}

// instructed reports whether the sentence of c (cues cs, bounds from and
// to), or for a number alone on its line the line above or below, tells
// the reader to type or copy it somewhere or for a purpose, with nothing
// before it in its sentence that labels it as another kind of number.
func instructed(ci *cueIndex, c *cand, cs []cueMark, from, to int) bool {
	text := ci.text
	if !says(cs, c.kind) && !aloneAndTold(ci, c) {
		return false
	}
	var buf [8]mark
	for _, m := range marks(buf[:0], text, from, c.start) {
		switch m.cl {
		case clLabel, clPhone, clPromo, clPlace, clMonth, clNumber:
			return false
		}
	}
	return !strings.ContainsRune(text[from:to], '©') && !afterSymbol(text, c.end, to) && !isYear(c.code)
}

// aloneAndTold reports whether c stands alone on its line and the line
// above or below it holds an instruction.
func aloneAndTold(ci *cueIndex, c *cand) bool {
	text := ci.text
	lineFrom, lineTo := lineBounds(text, c.start, c.end, reachSentence)
	alone := strings.TrimSpace(strings.Trim(text[lineFrom:c.start], " \t:-–—•*([")) == "" &&
		strings.TrimSpace(strings.Trim(text[c.end:lineTo], " \t.)]")) == ""
	if !alone {
		return false
	}
	if lineFrom > 0 && says(ci.within(prevLine(text, lineFrom), lineFrom), c.kind) {
		return true
	}
	next := lineTo
	for next < len(text) && (text[next] == '\n' || text[next] == '\r' || text[next] == ' ') && next-lineTo < reachSentence {
		next++
	}
	end := min(len(text), next+reachSentence)
	if k := strings.IndexByte(text[next:end], '\n'); k >= 0 {
		end = next + k
	}
	return next < len(text) && says(ci.within(next, end), c.kind)
}

// says reports whether cues hold an instruction for a candidate of kind
// k: a verb, and a place or a purpose ("instead" is one: it says what the
// code is for). Capitals and digits, which are more often something else,
// need a purpose.
func says(cs []cueMark, k kind) bool {
	verb, place, purpose := false, false, false
	for _, m := range cs {
		switch m.cu {
		case cueVerb:
			verb = true
		case cuePlace:
			place = true
		case cuePurpose, cueInstead:
			purpose = true
		}
	}
	if k == kLetters {
		return verb && purpose
	}
	return verb && (place || purpose)
}

// afterSymbol reports whether a currency or percent sign follows the
// candidate: an amount, whatever the sentence asks.
func afterSymbol(text string, end, to int) bool {
	rest := strings.TrimLeft(text[end:to], " ")
	r, _ := utf8.DecodeRuneInString(rest)
	return rest != "" && strings.ContainsRune("%€£¥₩₽円元원$", r)
}

// voidBack lowers the candidates cs of ci's doc (in order) that a later sentence
// voids without naming them: a sentence that names a code, holds no
// candidate, and says a code no longer works ("Sorry, that code no longer
// works.") voids the nearest candidate before it, within reachBack bytes.
func voidBack(ci *cueIndex, cs []cand) {
	if len(cs) == 0 {
		return
	}
	text := ci.text
	starts := make([]int, len(cs))
	for i := range cs {
		starts[i] = cs[i].start
	}
	var buf [8]mark
	last := -1 // the end of the last sentence read: each is read once
	for _, m := range ci.within(cs[0].end, len(text)) {
		if m.cu != cueBackVoid || m.start < last {
			continue
		}
		from, to := ci.sentence(m.start, m.end)
		last = to
		k := sort.SearchInts(starts, from) // the first candidate at or after the sentence
		if k < len(cs) && cs[k].start < to || k == 0 || from-cs[k-1].end > reachBack {
			continue
		}
		named := false
		for _, w := range marks(buf[:0], text, from, to) {
			named = named || w.cl == clCode
		}
		if named {
			cs[k-1].score += wVoid
		}
	}
}
