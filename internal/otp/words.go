package otp

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The words that mark a number, in English and in the languages sign-up
// mail commonly uses (German, French, Spanish, Portuguese, Italian, Dutch,
// Chinese, Japanese, Korean, Russian). Latin and Cyrillic words are
// compared whole and lower-cased; Chinese, Japanese and Korean have no
// spaces between words, so their terms are looked for inside a run of
// letters.

// class is what a word says about the number next to it.
type class uint8

const (
	clNone   class = iota
	clCode         // a code word: "code", "PIN", "Bestätigungscode", "验证码"
	clEntry        // asks to type something: "enter", "saisissez", "输入"
	clLabel        // labels another kind of number: order, invoice, account, "#"
	clPhone        // a phone number follows
	clPromo        // a discount code, not a one-time code
	clNew          // "new", "latest": this code replaces another
	clOld          // "expired", "previous": this code no longer works
	clMonth        // a month name: the number is a date
	clPlace        // a street, a post box, a country: the line is an address
	clNumber       // "number", "Nummer", "番号": a label unless a code word precedes it
)

var latinWords = map[string]class{}

func init() {
	add := func(c class, words string) {
		for _, w := range strings.Split(words, "|") {
			latinWords[w] = c
		}
	}
	add(clCode, "code|codes|otp|passcode|pin|verification|mfa|2fa|one-time|onetime|totp|"+
		"código|codigo|códigos|clave|codice|kode|kod|kód|"+
		"код|кода|коду|кодом|коде|коды|пароль|пин")
	add(clEntry, "enter|type|paste|input|use|eingeben|ein|saisissez|saisir|entrez|entrer|utilisez|"+
		"introduce|ingresa|ingrese|introduzca|usa|utiliza|digite|insira|informe|use|inserisci|immetti|inserire|"+
		"voer|gebruik|vul|введите|используйте|укажите")
	add(clLabel, "order|orders|invoice|inv|receipt|account|acct|acc|reference|ref|ticket|case|customer|client|"+
		"member|membership|transaction|txn|booking|reservation|tracking|shipment|parcel|package|id|serial|"+
		"sku|item|product|policy|claim|card|ending|visa|mastercard|amex|iban|bic|swift|routing|vat|tax|"+
		"registered|registration|company|reg|hrb|hra|amtsgericht|ust|siret|siren|rcs|cif|nif|cnpj|cpf|iva|btw|kvk|"+
		"bestellung|auftrag|rechnung|kunde|kunden|konto|referenz|buchung|sendung|vorgang|mitglied|karte|endet|"+
		"commande|facture|compte|référence|réf|dossier|réservation|colis|suivi|carte|"+
		"pedido|factura|cuenta|referencia|cliente|reserva|envío|envio|seguimiento|tarjeta|"+
		"encomenda|fatura|conta|referência|rastreamento|cartão|cartao|"+
		"ordine|fattura|conto|riferimento|prenotazione|spedizione|carta|"+
		"bestelling|factuur|rekening|klant|referentie|boeking|zending|kaart|"+
		"заказ|заказа|заказу|счёт|счет|счета|аккаунт|договор|клиента|бронирование|карта|карты|инн|огрн")
	add(clNumber, "number|no|nr|num|nummer|numéro|numero|número|nº|n°|номер|№")
	add(clPhone, "phone|telephone|tel|call|fax|mobile|cell|whatsapp|sms|hotline|helpline|"+
		"telefon|anruf|anrufen|mobil|téléphone|tél|appelez|teléfono|telefono|llámanos|llame|telefone|ligue|"+
		"cellulare|chiamaci|telefoon|bel|телефон|тел|звоните")
	add(clPromo, "promo|promotional|discount|coupon|voucher|gift|referral|off|sale|"+
		"rabatt|gutschein|aktion|réduction|remise|descuento|cupón|cupon|desconto|cupom|sconto|buono|"+
		"korting|kortingscode|скидка|скидку|промокод|купон")
	add(clNew, "new|newest|latest|fresh|neuer|neue|neuen|nouveau|nouvel|nouvelle|nuevo|nueva|novo|nova|"+
		"nuovo|nuova|nieuwe|nieuw|новый|новая|новый|нового")
	add(clOld, "expired|expire|expires|old|previous|earlier|invalid|replaced|abgelaufen|abgelaufene|alte|alten|vorherige|ungültig|"+
		"expiré|expirée|ancien|précédent|caducado|caducó|expirado|anterior|antiguo|antigo|expirou|scaduto|precedente|"+
		"vecchio|verlopen|oude|vorige|истёк|истек|старый|предыдущий|недействителен")
	add(clMonth, "jan|january|feb|february|mar|march|apr|april|may|jun|june|jul|july|aug|august|sep|sept|september|"+
		"oct|october|nov|november|dec|december|januar|februar|märz|mai|juni|juli|oktober|dezember|"+
		"janvier|février|mars|avril|juin|juillet|août|septembre|octobre|novembre|décembre|"+
		"enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre|"+
		"janeiro|fevereiro|março|maio|junho|julho|setembro|outubro|dezembro|"+
		"gennaio|febbraio|aprile|maggio|giugno|luglio|settembre|ottobre|dicembre|"+
		"januari|februari|maart|mei|augustus|"+
		"января|февраля|марта|апреля|мая|июня|июля|августа|сентября|октября|ноября|декабря|"+
		"since|seit|depuis|desde|dal|sinds|year|jahr|année|año|ano|anno|jaar|года|год")
	add(clPlace, "street|st|avenue|ave|road|rd|boulevard|blvd|lane|ln|drive|dr|suite|ste|floor|fl|plaza|square|"+
		"court|ct|parkway|pkwy|highway|hwy|box|apt|building|bldg|"+
		"straße|strasse|str|platz|weg|gasse|allee|postfach|"+
		"rue|bd|chemin|quai|allée|cedex|étage|bp|"+
		"calle|avenida|av|carrera|paseo|piso|apartado|rua|travessa|praça|andar|bairro|"+
		"viale|piazza|corso|vicolo|straat|laan|gracht|plein|kade|singel|postbus|"+
		"ул|улица|проспект|пр|д|дом|офис|"+
		"usa|america|united|states|kingdom|uk|germany|deutschland|france|spain|españa|brazil|brasil|italy|italia|"+
		"netherlands|nederland|canada|australia|portugal|mexico|méxico|japan|china|korea|switzerland|schweiz|suisse|"+
		"österreich|austria|belgium|belgië|belgique|ireland|singapore|india|sweden|россия|russia")
}

// US state and other region abbreviations collide with English words
// ("in", "or", "me"): they count only as written, in capitals.
var stateAbbrev = map[string]bool{}

func init() {
	for _, s := range strings.Split("AL|AK|AZ|AR|CA|CO|CT|DE|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY|DC|ON|QC|BC|AB|NSW|VIC", "|") {
		stateAbbrev[s] = true
	}
}

// cjkTerms are looked for inside runs of Han, kana and Hangul letters.
// Where two terms end at the same place ("認証番号" and "番号"), the longer
// wins.
var cjkTerms = []struct {
	term string
	cl   class
}{
	{"验证码", clCode}, {"驗證碼", clCode}, {"校验码", clCode}, {"动态码", clCode}, {"安全码", clCode}, {"确认码", clCode},
	{"登录码", clCode}, {"动态密码", clCode}, {"一次性密码", clCode}, {"代码", clCode},
	{"認証コード", clCode}, {"確認コード", clCode}, {"認証番号", clCode}, {"ワンタイムパスワード", clCode}, {"コード", clCode},
	{"인증번호", clCode}, {"인증 번호", clCode}, {"코드", clCode}, {"일회용", clCode},
	{"输入", clEntry}, {"輸入", clEntry}, {"入力", clEntry}, {"입력", clEntry},
	{"订单", clLabel}, {"訂單", clLabel}, {"发票", clLabel}, {"發票", clLabel}, {"账号", clLabel}, {"帳號", clLabel},
	{"账户", clLabel}, {"帐户", clLabel}, {"单号", clLabel}, {"编号", clLabel}, {"邮编", clLabel}, {"会员", clLabel},
	{"注文", clLabel}, {"請求", clLabel}, {"会員", clLabel}, {"アカウント", clLabel}, {"予約", clLabel}, {"郵便", clLabel},
	{"주문", clLabel}, {"청구", clLabel}, {"계정", clLabel}, {"회원", clLabel}, {"예약", clLabel}, {"우편", clLabel},
	{"号码", clNumber}, {"號碼", clNumber}, {"番号", clNumber}, {"번호", clNumber},
	{"电话", clPhone}, {"電話", clPhone}, {"客服", clPhone}, {"전화", clPhone},
	{"优惠", clPromo}, {"折扣", clPromo}, {"クーポン", clPromo}, {"割引", clPromo}, {"할인", clPromo}, {"쿠폰", clPromo},
	{"新的", clNew}, {"新しい", clNew}, {"새", clNew}, {"新", clNew},
	{"过期", clOld}, {"過期", clOld}, {"失效", clOld}, {"期限切れ", clOld}, {"無効", clOld}, {"만료", clOld}, {"이전", clOld},
	{"年", clMonth}, {"月", clMonth}, {"년", clMonth}, {"월", clMonth},
	{"省", clPlace}, {"市", clPlace}, {"区", clPlace}, {"路", clPlace}, {"号", clPlace}, {"街", clPlace},
	{"大厦", clPlace}, {"都", clPlace}, {"県", clPlace}, {"丁目", clPlace}, {"番地", clPlace}, {"ビル", clPlace},
	{"특별시", clPlace}, {"광역시", clPlace}, {"대한민국", clPlace},
}

// codeSuffixes make compound code words ("Bestätigungscode",
// "verificatiecode", "Sicherheitscode"); the prefixes in notCode make
// something else ("barcode", "Postleitcode", "Gutscheincode").
var notCode = []string{"bar", "zip", "post", "postal", "qr", "source", "promo", "gutschein", "rabatt", "aktions",
	"korting", "kortings", "coupon", "voucher", "gift", "discount", "referral", "country", "area", "dial", "color", "colour", "html", "zip-"}

// classify returns what the lower-cased Latin or Cyrillic word w says.
func classify(w []byte) class {
	if latinFilter.may(w) {
		if c, ok := latinWords[string(w)]; ok {
			return c
		}
	}
	if len(w) == 0 || strings.IndexByte("esrtgn", w[len(w)-1]) < 0 && w[0] != 't' && w[0] != "к"[0] {
		return clNone // no rule below can match
	}
	switch {
	case hasSuffix(w, "code") || hasSuffix(w, "codes") || hasSuffix(w, "kode"):
		for _, p := range notCode {
			if hasPrefix(w, p) {
				return clPromo
			}
		}
		return clCode
	case hasPrefix(w, "telefon") || hasPrefix(w, "telefoon"):
		return clPhone
	case hasSuffix(w, "nummer") || hasSuffix(w, "nr"):
		return clLabel
	case hasPrefix(w, "код") && !hasPrefix(w, "кодекс"):
		return clCode
	case hasSuffix(w, "straße") || hasSuffix(w, "strasse") || hasSuffix(w, "straat") ||
		hasSuffix(w, "weg") || hasSuffix(w, "laan") || hasSuffix(w, "gracht"):
		return clPlace
	}
	return clNone
}

// hasPrefix and hasSuffix are strings.HasPrefix and HasSuffix of a word
// in a buffer, without a copy of it.
func hasPrefix(w []byte, p string) bool { return len(w) >= len(p) && string(w[:len(p)]) == p }

func hasSuffix(w []byte, s string) bool { return len(w) >= len(s) && string(w[len(w)-len(s):]) == s }

// latinFilter holds latinWords' words (instruct.go's wordFilter).
var latinFilter wordFilter

func init() {
	for w := range latinWords {
		latinFilter.add(w)
	}
}

// isCJK reports whether r is Han, kana or Hangul: scripts written without
// spaces, where digits stand right next to words.
func isCJK(r rune) bool {
	if r < 0x1100 {
		return false // below Hangul Jamo, the first of the four scripts: no table lookup for Latin and Cyrillic
	}
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) ||
		unicode.Is(unicode.Hangul, r) || r == 'ー'
}

// mark is one word that says something, at a byte offset of a text.
type mark struct {
	cl         class
	start, end int
}

// marks appends to out the words of text[from:to] that say something, in
// order. Callers pass a small array of their own, which most windows fit.
// A word cut by either end of the window is still read: a window is a
// guess at a clause, not a boundary.
func marks(out []mark, text string, from, to int) []mark {
	for i := from; i < to; {
		if c := text[i]; c < utf8.RuneSelf && !isAlpha(c) && c != '#' {
			i++ // most of a text is ASCII between words
			continue
		}
		if c := text[i]; c >= utf8.RuneSelf || c == '#' { // else an ASCII letter, which begins a word
			c, size := runeAt(text, i)
			if c == '#' || c == '№' || c == '©' || c == '〒' {
				cl := clLabel
				if c == '©' {
					cl = clMonth
				}
				out = append(out, mark{cl, i, i + size})
				i += size
				continue
			}
			if !unicode.IsLetter(c) {
				i += size
				continue
			}
		}
		j, cjk := i, false
		for j < to {
			if c := text[j]; isAlpha(c) {
				j++
				continue
			} else if c < utf8.RuneSelf && c != '-' {
				break // ASCII, and no letter: the word's end
			}
			c, size := runeAt(text, j)
			// "one-time", "E-Mail" and "n°" stay one word.
			if !unicode.IsLetter(c) && !(c == '-' && j+1 < to && j > i && isLetterAt(text, j+1)) && c != '°' && c != 'º' {
				break
			}
			cjk = cjk || isCJK(c)
			j += size
		}
		w := text[i:j]
		if cjk {
			out = appendCJK(out, w, i)
		} else if cl := classifyWord(w); cl != clNone {
			out = append(out, mark{cl, i, j})
		}
		i = j
	}
	return out
}

// classifyWord classifies a word as written, also by its hyphenated
// parts ("PIN-Code", "E-Mail-Bestätigungscode").
func classifyWord(w string) class {
	if len(w) <= 3 && 'A' <= w[0] && w[0] <= 'Z' && stateAbbrev[w] {
		return clPlace
	}
	var buf [32]byte
	l, _ := lower(&buf, w)
	if cl := classify(l); cl != clNone {
		return cl
	}
	if bytes.IndexByte(l, '-') < 0 {
		return clNone
	}
	last := clNone
	for len(l) > 0 {
		p := l
		if k := bytes.IndexByte(l, '-'); k >= 0 {
			p, l = l[:k], l[k+1:]
		} else {
			l = l[len(l):]
		}
		if cl := classify(p); cl != clNone && cl != clPlace {
			last = cl
		}
	}
	return last
}

func isLetterAt(text string, i int) bool {
	c, _ := runeAt(text, i)
	return isLetter(c)
}

// runeAt decodes the rune at text[i], ASCII without a call.
func runeAt(text string, i int) (rune, int) {
	if c := text[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(text[i:])
}

// isLetter is unicode.IsLetter, ASCII without a table.
func isLetter(r rune) bool {
	if r < utf8.RuneSelf {
		return isAlpha(byte(r))
	}
	return unicode.IsLetter(r)
}

// lower returns w in lower case, as strings.ToLower does, in buf when w
// is ASCII and fits; changed says whether it differs from w.
func lower(buf *[32]byte, w string) (l []byte, changed bool) {
	if len(w) > len(buf) {
		l := strings.ToLower(w)
		return []byte(l), l != w
	}
	b := buf[:len(w)]
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= utf8.RuneSelf {
			l := strings.ToLower(w)
			return []byte(l), l != w
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
			changed = true
		}
		b[i] = c
	}
	return b, changed
}

// appendCJK appends the terms found in a run of letters that holds
// Chinese, Japanese or Korean, in order of where they end.
func appendCJK(out []mark, w string, at int) []mark {
	for i := 0; i < len(w); {
		best := -1
		for k, t := range cjkTerms {
			if strings.HasPrefix(w[i:], t.term) && (best < 0 || len(t.term) > len(cjkTerms[best].term)) {
				best = k
			}
		}
		if best < 0 {
			_, size := utf8.DecodeRuneInString(w[i:])
			i += size
			continue
		}
		t := cjkTerms[best]
		out = append(out, mark{t.cl, at + i, at + i + len(t.term)})
		i += len(t.term)
	}
	return out
}
