package console

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/redact"
	"github.com/websitebench/mailplane/pkg/rpc"
)

//go:embed assets/console.css assets/console.js assets/pages.html
var assets embed.FS

// ContentSecurityPolicy of every console page: its own stylesheet and
// script only, frames only from itself (a message's HTML, itself
// sandboxed), nothing remote, no inline script, no plugin, no <base>.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// MailContentSecurityPolicy goes with a message's HTML: a sandbox (no
// script, an opaque origin, no form, no popup, no navigation of the
// console) even where the document is opened outside its frame, and no
// load of anything but inline styles and data: images: a remote image, a
// tracking pixel or a font would tell the sender the mail was read.
const MailContentSecurityPolicy = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; " +
	"form-action 'none'; base-uri 'none'; frame-ancestors 'self'"

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"age":  age,
	"when": when,
	"mask": redact.Minted,
	// sender is a message's sender as the agent's inbox shows it: the
	// display name, then the address (a name that looks like an address
	// comes after the real one).
	"sender": func(name, address string) string { return redact.Minted(mailmsg.ShowSender(name, address)) },
}).ParseFS(assets, "assets/pages.html"))

// pageData is what every page template reads.
type pageData struct {
	Title string
	// Base prefixes the page's links: a session's /s/<capability>.
	Base  string
	visit visit
	Next  string
	Error string
	Live  string // the page's live-update stream, empty for none
	// The trials list.
	Trials  *rpc.ConsoleTrialsResponse
	Filter  filter
	Store   string
	PrevURL string
	NextURL string
	From    int
	To      int
	// One trial.
	Trial    *rpc.ConsoleTrialResponse
	Timeline []event
}

// filter is the trials list's query.
type filter struct {
	Namespace, Recipient, Subject string
	Page                          int
}

func (f filter) url(base string, page int) string {
	q := url.Values{}
	for k, v := range map[string]string{"ns": f.Namespace, "rcpt": f.Recipient, "subject": f.Subject} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if page > 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if len(q) == 0 {
		return base + "/"
	}
	return base + "/?" + q.Encode()
}

// render writes a page from its template.
func (c *Console) render(w http.ResponseWriter, status int, name string, d pageData) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, d); err != nil {
		c.log.Error().Err(err).Str("template", name).Msg("page not rendered")
		http.Error(w, "500 the page could not be rendered", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// notice is a page of one sentence.
func (c *Console) notice(w http.ResponseWriter, v visit, status int, title, sentence string) {
	c.render(w, status, "notice", pageData{Title: title, Error: sentence, Base: v.base})
}

// Frame is where the page frames message id of ns from.
func (d pageData) Frame(ns string, id int64) string { return d.visit.frameURL(ns, id) }

// trials is the first screen: what is happening at a glance, then the
// trials, a page at a time.
func (c *Console) trials(w http.ResponseWriter, r *http.Request, v visit) {
	q := r.URL.Query()
	f := filter{Namespace: q.Get("ns"), Recipient: q.Get("rcpt"), Subject: q.Get("subject")}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	f.Page = max(f.Page, 0)
	var ver rpc.ConsoleWaitResponse
	if err := c.call(r.Context(), rpc.MethodConsoleWait, &rpc.ConsoleWaitRequest{Operator: v.op}, &ver); err != nil {
		c.fail(w, r, v, err)
		return
	}
	var list rpc.ConsoleTrialsResponse
	err := c.call(r.Context(), rpc.MethodConsoleTrials, &rpc.ConsoleTrialsRequest{Operator: v.op, Namespace: f.Namespace,
		Recipient: f.Recipient, Subject: f.Subject, Offset: f.Page * pageSize, Limit: pageSize}, &list)
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	var health rpc.HealthResponse
	d := pageData{Title: "Trials", Base: v.base, visit: v, Trials: &list, Filter: f, Store: "unavailable",
		Live: v.base + "/live?v=" + strconv.FormatUint(ver.Version, 10)}
	if c.call(r.Context(), rpc.MethodHealth, &rpc.Empty{}, &health) == nil {
		d.Store = health.Store
	}
	d.From, d.To = f.Page*pageSize+1, f.Page*pageSize+len(list.Rows)
	if f.Page > 0 {
		d.PrevURL = f.url(v.base, f.Page-1)
	}
	if d.To < list.Total {
		d.NextURL = f.url(v.base, f.Page+1)
	}
	c.render(w, http.StatusOK, "trials", d)
}

// trial is one trial: its mail, then its trail as a timeline.
func (c *Console) trial(w http.ResponseWriter, r *http.Request, v visit, ns string) {
	var t rpc.ConsoleTrialResponse
	if err := c.call(r.Context(), rpc.MethodConsoleTrial, &rpc.ConsoleTrialRequest{Operator: v.op, Namespace: ns}, &t); err != nil {
		c.fail(w, r, v, err)
		return
	}
	// Mail and trail newest first: the latest is what an operator looks
	// for.
	sort.SliceStable(t.Messages, func(i, j int) bool { return t.Messages[i].ID > t.Messages[j].ID })
	d := pageData{Title: ns, Base: v.base, visit: v, Trial: &t, Timeline: timeline(t.Events)}
	var last int64
	if len(d.Timeline) > 0 {
		last = d.Timeline[0].Seq
	}
	d.Live = v.base + "/live?" + url.Values{"trial": {ns}, "v": {strconv.FormatInt(last, 10)}}.Encode()
	c.render(w, http.StatusOK, "trial", d)
}

// messageHTML is a message's HTML part, for its sandboxed frame.
func (c *Console) messageHTML(w http.ResponseWriter, r *http.Request, v visit, ns string, id int64) {
	var t rpc.ConsoleTrialResponse
	if err := c.call(r.Context(), rpc.MethodConsoleTrial, &rpc.ConsoleTrialRequest{Operator: v.op, Namespace: ns, MessageID: id}, &t); err != nil {
		c.fail(w, r, v, err)
		return
	}
	for _, m := range t.Messages {
		if m.ID == id && m.HTML != "" {
			h := w.Header()
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("Content-Security-Policy", MailContentSecurityPolicy)
			h.Set("X-Frame-Options", "SAMEORIGIN")
			w.Write([]byte(redact.Minted(m.HTML)))
			return
		}
	}
	c.notice(w, visit{}, http.StatusNotFound, "Not found", "No such message.")
}

// age formats a duration in milliseconds as a person reads it.
func age(ms int64) string {
	if ms <= 0 {
		return "–"
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h" + strconv.Itoa(int(d.Minutes())%60) + "m"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// when formats a time in UTC, or a dash for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// serveAsset serves the stylesheet and the script.
func serveAsset(w http.ResponseWriter, r *http.Request, path string) {
	b, err := assets.ReadFile("assets" + path)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ct := "text/css; charset=utf-8"
	if strings.HasSuffix(path, ".js") {
		ct = "text/javascript; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Write(b)
}
