package otp

import (
	"net/url"
	"strings"

	"github.com/websitebench/mailplane/internal/otp/urls"
)

// The action link is the one link a person is asked to click: verify,
// confirm, sign in, reset, accept an invitation, a magic link. It is
// weighed by its words (a button's text), its URL, the clause that leads to
// it, and its looks; links that are never it (unsubscribe, preferences,
// privacy, terms, help, social networks, logos, a menu of links) are left
// out. Nothing is fetched: a tracking link is returned as written.

// Weights of a link; a link is the action link when it reaches
// linkThreshold.
const (
	linkThreshold = 5
	lAnchorAction = 6 // "Verify email", "Passwort zurücksetzen"
	lAnchorWeak   = 1 // "Continue", "Join", "click here"
	lURLAction    = 3 // …/verify?token=…
	lContext      = 5 // "Confirm your address:" then the link
	lButton       = 2
	contextReach  = 160
	anchorReach   = 200
	navLinks      = 3 // this many links on one line are a menu, a footer or a social row
)

// actionWords ask for the action, in lower case; they are looked for
// inside words, so that inflections and compounds count ("bestätigen",
// "E-Mail-Adresse bestätigen", "Confirmar cuenta").
var actionWords = []string{
	"verify", "verificar", "verifique", "vérifier", "verifizieren", "verifiëren", "verifica", "confirm", "conferm", "bestätig", "bevestig", "activate", "activer", "activar", "ativar",
	"aktivier", "attiva", "activeer", "validate", "valider", "validar", "approve",
	"sign in", "sign-in", "signin", "sign me in", "log in", "log-in", "login", "log me in", "anmelden", "einloggen",
	"se connecter", "connexion", "iniciar sesión", "inicia sesión", "entrar", "acessar", "accedi", "inloggen",
	"aanmelden", "magic link",
	"reset", "new password", "set password", "set your password", "create password", "create your password",
	"choose a password", "choose a new password", "zurücksetzen", "neues passwort", "réinitialiser", "restablecer",
	"redefinir", "reimposta", "herstel", "wachtwoord instellen",
	"accept", "annehmen", "accepter", "aceptar", "aceitar", "accetta", "accepteren",
	"complete registration", "complete your registration", "finish signing up", "complete sign",
	"open invitation", "view invitation",
	"验证", "驗證", "确认", "確認", "激活", "登录", "登入", "重置", "重设", "接受", "認証", "有効化", "ログイン",
	"リセット", "再設定", "承認", "인증", "확인", "활성화", "로그인", "재설정", "수락",
	"подтверд", "активир", "войти", "вход", "сброс", "восстанов", "принять",
}

// weakWords name no action by themselves ("Continue", "Join"); the clause
// before them does.
var weakWords = []string{
	"continue", "join", "click here", "here", "this link", "open", "go to", "weiter", "hier", "beitreten", "continuer",
	"ici", "rejoindre", "continuar", "aquí", "aqui", "unirse", "únete", "participar", "continua", "qui", "unisciti",
	"doorgaan", "verder", "deelnemen", "继续", "加入", "続行", "参加", "계속", "참여", "продолжить", "присоединиться", "здесь",
}

// notAction are words of links that are never the action.
var notAction = []string{
	"unsubscribe", "unsub", "opt out", "opt-out", "optout", "preferences", "email settings", "notification settings",
	"manage", "privacy", "terms", "legal", "policy", "help", "support", "faq", "contact", "blog", "pricing", "careers",
	"jobs", "view in browser", "view online", "web version", "view this email", "in your browser", "download the app",
	"app store", "google play", "logo", "feedback", "survey", "report", "learn more", "read more", "docs",
	"abmelden", "abbestellen", "datenschutz", "impressum", "agb", "hilfe", "kontakt", "einstellungen",
	"désinscri", "désabonn", "désinscription", "confidentialité", "conditions", "aide", "préférences",
	"darse de baja", "cancelar suscripción", "privacidad", "términos", "ayuda", "preferencias",
	"descadastr", "cancelar inscrição", "privacidade", "termos", "ajuda", "disiscri", "annulla iscrizione",
	"termini", "aiuto", "preferenze", "afmelden", "uitschrijven", "voorwaarden",
	"退订", "取消订阅", "隐私", "条款", "帮助", "配信停止", "登録解除", "プライバシー", "利用規約", "ヘルプ",
	"수신 거부", "수신거부", "구독 취소", "개인정보", "약관", "도움말", "отписаться", "отписк", "конфиденциальн",
	"условия", "помощь", "настройки",
}

// notMine are clauses that make a link conditional: "If this wasn't you,
// reset your password".
var notMine = []string{
	"didn't", "did not", "wasn't you", "was not you", "not you", "don't recognize", "do not recognize",
	"nicht angefordert", "nicht sie", "nicht von ihnen", "n'avez pas", "n'êtes pas", "no has", "no solicitaste",
	"no fuiste", "no reconoces", "você não", "não foi", "non hai", "non sei stato", "niet aangevraagd", "niet door",
	"不是您", "非本人", "心当たり", "본인이 아닌", "요청하지 않", "не вы", "не запрашивали",
}

// socialHosts are social networks and app stores.
var socialHosts = []string{
	"facebook.com", "fb.com", "fb.me", "twitter.com", "x.com", "instagram.com", "linkedin.com", "youtube.com",
	"youtu.be", "tiktok.com", "pinterest.com", "medium.com", "reddit.com", "t.me", "telegram.me", "wa.me",
	"whatsapp.com", "weibo.com", "vk.com", "line.me", "threads.net", "mastodon.social", "snapchat.com",
	"tumblr.com", "twitch.tv", "discord.gg", "discord.com", "apps.apple.com", "itunes.apple.com", "play.google.com",
	"xing.com", "bsky.app",
}

// urlNot and urlAction are parts of a URL's path or query.
var (
	urlNot = []string{"unsubscribe", "unsub", "optout", "opt-out", "opt_out", "preferences", "email-settings",
		"/privacy", "/terms", "/legal", "/help", "/support", "/faq", "/blog", "/pricing", "/careers", "/jobs",
		"/contact", "/about", "/status", "/docs", "/impressum", "/datenschutz"}
	urlHostNot = []string{"help.", "support.", "blog.", "docs.", "status.", "community.", "careers.", "jobs."}
	urlAction  = []string{"verify", "verification", "confirm", "activate", "activation", "magic", "login", "log-in",
		"signin", "sign-in", "sign_in", "/auth", "reset", "password", "invite", "invitation", "accept", "join",
		"token=", "validate", "passwordless", "otp"}
)

// linkCand is one link of a doc.
type linkCand struct {
	url        string
	score      int
	excluded   bool
	order      int
	fromAnchor bool
}

// actionLink returns the best link of the message's parts, or "".
func actionLink(docs []doc) string {
	var best *linkCand
	order := 0
	consider := func(l linkCand) {
		l.order = order
		order++
		if l.excluded || l.score < linkThreshold {
			return
		}
		if best == nil || l.score > best.score || l.score == best.score && l.fromAnchor && !best.fromAnchor {
			b := l
			best = &b
		}
	}
	// The HTML part first: its buttons are what a person sees.
	for i := len(docs) - 1; i >= 0; i-- {
		d := &docs[i]
		if d.html {
			htmlLinks(d, consider)
		} else {
			textLinks(d, consider)
		}
	}
	if best == nil {
		return ""
	}
	return best.url
}

func htmlLinks(d *doc, consider func(linkCand)) {
	text := d.text
	// Anchors per line, to tell a menu or a footer row.
	perLine := make([]int, len(d.anchors))
	lineOf := make([]int, len(d.anchors))
	for i, a := range d.anchors {
		start := min(a.start, len(text))
		lineOf[i], _ = lineBounds(text, start, start, contextReach)
	}
	for i := 0; i < len(d.anchors); {
		j := i
		for j < len(d.anchors) && lineOf[j] == lineOf[i] {
			j++
		}
		for k := i; k < j; k++ {
			perLine[k] = j - i
		}
		i = j
	}
	for i, a := range d.anchors {
		u := a.href
		if !validLink(u) {
			continue
		}
		start := min(a.start, len(text))
		end := max(start, min(a.end, len(text)))
		words := strings.TrimSpace(text[start:min(end, start+anchorReach)])
		l := linkCand{url: u, fromAnchor: true}
		if a.image && words == "" || perLine[i] >= navLinks {
			l.excluded = true
		}
		bare := words == "" || strings.HasPrefix(strings.ToLower(words), "http") || strings.HasPrefix(strings.ToLower(words), "www.")
		scoreLink(&l, text, start, end, words, bare, a.button)
		consider(l)
	}
}

func textLinks(d *doc, consider func(linkCand)) {
	text := d.text
	spans := d.urlSpans()
	for i, s := range spans {
		l := linkCand{url: text[s.Start:s.End]}
		// Three links on one line are a menu or a footer row.
		n := 1
		for k := i - 1; k >= 0 && !strings.Contains(text[spans[k].End:spans[k+1].Start], "\n") && n < navLinks; k-- {
			n++
		}
		for k := i + 1; k < len(spans) && !strings.Contains(text[spans[k-1].End:spans[k].Start], "\n") && n < navLinks; k++ {
			n++
		}
		if n >= navLinks {
			l.excluded = true
		}
		scoreLink(&l, text, s.Start, s.End, "", true, false)
		consider(l)
	}
}

// scoreLink weighs one link whose words (for an anchor) are words and
// which stands at text[start:end].
func scoreLink(l *linkCand, text string, start, end int, words string, bare, button bool) {
	lw := strings.ToLower(words)
	if containsAny(lw, notActionSet) {
		l.excluded = true
		return
	}
	// The clause that leads to the link: on its line, or, when the link
	// begins its line, the end of the line above.
	lineFrom, _ := lineBounds(text, start, start, contextReach)
	ctxFrom := clauseStart(text, max(lineFrom, start-contextReach), start)
	ctx := text[ctxFrom:start]
	inline := strings.TrimSpace(strings.Trim(ctx, " \t([:-–—•*>")) != ""
	if !inline && lineFrom > 0 {
		above := prevLine(text, lineFrom)
		aboveEnd := lineFrom - 1
		ctx = text[clauseStartEnd(text, above, aboveEnd):aboveEnd]
	}
	lctx := strings.ToLower(ctx)
	if containsAny(lctx, notMineSet) {
		l.excluded = true
		return
	}
	if inline && containsAny(lctx, notActionSet) && !containsAction(lctx) {
		l.excluded = true // "Unsubscribe: https://…"
		return
	}
	weak := containsAny(lw, weakSet)
	switch {
	case containsAction(lw):
		l.score += lAnchorAction
	case weak:
		l.score += lAnchorWeak
	}
	if (bare || weak || inline) && containsAction(lctx) {
		l.score += lContext
	}
	if button {
		l.score += lButton
	}
	// The URL is read last, and only for a link that could still win.
	if l.score+lURLAction < linkThreshold {
		return
	}
	p, err := url.Parse(l.url)
	if err != nil || !urlMayAct(p) {
		l.excluded = true
		return
	}
	if urlActs(p) {
		l.score += lURLAction
	}
}

// clauseStartEnd is the start of the last clause of text[from:to],
// ignoring a sentence end right at to ("Verify your email address." then
// the link on the next line).
func clauseStartEnd(text string, from, to int) int {
	t := to
	for t > from && strings.IndexByte(" \t\r.:!", text[t-1]) >= 0 {
		t--
	}
	return clauseStart(text, from, t)
}

// wordSet finds any of a list of words inside a text in one pass: the
// words are grouped by their first byte, so each byte of the text is
// compared with the few words that begin with it.
type wordSet [256][]string

func newWordSet(words []string) *wordSet {
	var ws wordSet
	for _, w := range words {
		ws[w[0]] = append(ws[w[0]], w)
	}
	return &ws
}

// find calls ok with the text after each word found, until ok says yes.
func (ws *wordSet) find(s string, ok func(rest string) bool) bool {
	for i := 0; i < len(s); i++ {
		for _, w := range ws[s[i]] {
			if strings.HasPrefix(s[i:], w) && ok(s[i+len(w):]) {
				return true
			}
		}
	}
	return false
}

func (ws *wordSet) in(s string) bool { return ws.find(s, func(string) bool { return true }) }

var (
	actionSet    = newWordSet(actionWords)
	weakSet      = newWordSet(weakWords)
	notActionSet = newWordSet(notAction)
	notMineSet   = newWordSet(notMine)
	urlNotSet    = newWordSet(urlNot)
	urlActionSet = newWordSet(urlAction)
)

func containsAny(s string, words *wordSet) bool { return words.in(s) }

// containsAction reports whether s asks for an action: an action word
// that is not the start of a noun ("confirmation code", "activación",
// "verificação" name a thing, they ask nothing).
func containsAction(s string) bool {
	return actionSet.find(s, func(rest string) bool {
		return !(strings.HasPrefix(rest, "ati") || strings.HasPrefix(rest, "aci") || strings.HasPrefix(rest, "açã") ||
			strings.HasPrefix(rest, "azi") || strings.HasPrefix(rest, "ed ") || strings.HasPrefix(rest, "ation"))
	})
}

// validLink reports whether u is an http(s) URL as Links would list it.
func validLink(u string) bool {
	return strings.IndexFunc(u, func(c rune) bool { return !urls.Rune(c) }) < 0 && urls.Valid(u)
}

// urlMayAct reports whether a URL may be the action: not a social network,
// an app store, or a help, privacy or unsubscribe page.
func urlMayAct(p *url.URL) bool {
	if (p.Path == "" || p.Path == "/") && p.RawQuery == "" {
		return false // a site's home page
	}
	host := strings.ToLower(p.Hostname())
	for _, h := range socialHosts {
		if host == h || strings.HasSuffix(host, "."+h) {
			return false
		}
	}
	for _, h := range urlHostNot {
		if strings.HasPrefix(host, h) {
			return false
		}
	}
	rest := strings.ToLower(p.EscapedPath() + "?" + p.RawQuery)
	return !containsAny(rest, urlNotSet)
}

// urlActs reports whether a URL's path or query names the action.
func urlActs(p *url.URL) bool {
	return containsAny(strings.ToLower(p.EscapedPath()+"?"+p.RawQuery), urlActionSet)
}
