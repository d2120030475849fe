// Package mailgun reads Mailgun's messages API (POST
// /v3/{domain}/messages and /v3/{domain}/messages.mime, HTTP Basic auth
// "api:<key>", multipart/form-data or application/x-www-form-urlencoded)
// and answers in Mailgun's shape: 200 with {"id": "<…>", "message":
// "Queued. Thank you."}, 401 with the text "Forbidden", or {"message": …}
// with 400, 403, 413, 429, 500 or 503
// (https://documentation.mailgun.com/docs/mailgun/api-reference/openapi-final/tag/Messages/).
//
// from, to, cc and bcc (each repeatable, each a comma-separated list),
// subject, text, html and attachment and inline files are read. "h:"
// fields are headers; "o:" options are kept as Mailgun's X-Mailgun-*
// headers (o:tag as X-Mailgun-Tag); "v:" variables are kept together as the
// X-Mailgun-Variables JSON header. The {domain} is any name: the key, not
// the domain, selects the trial. Stored templates, recipient-variables
// (one message per recipient) and o:deliverytime are refused: this plane
// renders no templates and delivers at once.
package mailgun

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/sendapi"
)

// Limits on a form.
const (
	maxParts       = 256 // fields and files of one request
	maxAttachments = 32
	// VariablesHeader carries v: variables, as Mailgun stores them.
	VariablesHeader = "X-Mailgun-Variables"
)

// API is Mailgun's messages API.
type API struct{}

// Name implements sendapi.API.
func (API) Name() string { return "mailgun" }

// Match implements sendapi.API: /v3/{domain}/messages(.mime).
func (API) Match(path string) bool {
	_, ok := domain(path)
	return ok
}

// domain is the {domain} of a messages path.
func domain(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/v3/")
	if !ok {
		return "", false
	}
	d, ep, ok := strings.Cut(rest, "/")
	if !ok || d == "" || (ep != "messages" && ep != "messages.mime") {
		return "", false
	}
	return d, true
}

// Batch implements sendapi.API.
func (API) Batch(string) bool { return false }

// Credential implements sendapi.API: Basic auth with the user "api".
func (API) Credential(r *http.Request) (string, bool) {
	user, key, ok := r.BasicAuth()
	return key, ok && user == "api" && key != ""
}

// form is a request's fields and files, in order.
type form struct {
	fields map[string][]string
	order  []string // field names, first appearance
	files  []file
}

type file struct {
	field, name, contentType string
	data                     []byte
}

func (f *form) add(k, v string) {
	if _, seen := f.fields[k]; !seen {
		f.order = append(f.order, k)
	}
	f.fields[k] = append(f.fields[k], v)
}

// fieldNames are the request's names of the fields the writer judges.
var fieldNames = map[string]string{"reply_to": "h:Reply-To"}

// FieldName implements sendapi.API.
func (API) FieldName(field string) string { return sendapi.FieldNames(fieldNames, field) }

// Parse implements sendapi.API.
func (API) Parse(r *http.Request, body []byte) ([]sendapi.Email, *sendapi.Error) {
	f, fail := readForm(r.Header.Get("Content-Type"), body)
	if fail != nil {
		return nil, fail
	}
	e, fail := f.email(strings.HasSuffix(r.URL.EscapedPath(), ".mime"))
	if fail != nil {
		return nil, fail
	}
	return []sendapi.Email{e}, nil
}

func readForm(contentType string, body []byte) (*form, *sendapi.Error) {
	mt, params, err := mime.ParseMediaType(contentType)
	f := &form{fields: map[string][]string{}}
	switch {
	case err != nil:
		return nil, sendapi.Fail(sendapi.MediaType)
	case mt == "application/x-www-form-urlencoded":
		if !utf8.Valid(body) {
			return nil, sendapi.Bad("", "The form is not UTF-8.")
		}
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, sendapi.Bad("", "The form could not be parsed.")
		}
		for _, k := range slices.Sorted(maps.Keys(vals)) {
			for _, v := range vals[k] {
				f.add(k, v)
			}
		}
		return f, nil
	case mt == "multipart/form-data" && params["boundary"] != "":
		return f, f.readMultipart(body, params["boundary"])
	}
	return nil, sendapi.Fail(sendapi.MediaType)
}

func (f *form) readMultipart(body []byte, boundary string) *sendapi.Error {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for n := 0; ; n++ {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return nil
		}
		if err != nil || n >= maxParts {
			return sendapi.Bad("", "The form could not be parsed.")
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return sendapi.Bad("", "The form could not be parsed.")
		}
		name := p.FormName()
		if p.FileName() != "" || name == "attachment" || name == "inline" || name == "message" {
			f.files = append(f.files, file{field: name, name: p.FileName(), contentType: p.Header.Get("Content-Type"), data: data})
			continue
		}
		if !utf8.Valid(data) {
			return sendapi.Bad(name, "The field "+name+" is not UTF-8.")
		}
		f.add(name, string(data))
	}
}

// email checks the form's shape and makes it an Email.
func (f *form) email(raw bool) (sendapi.Email, *sendapi.Error) {
	var e sendapi.Email
	if fail := f.refuseUnsupported(); fail != nil {
		return e, fail
	}
	from := f.fields["from"]
	if len(from) == 0 && !raw {
		return e, sendapi.Bad("from", "from parameter is missing")
	}
	if len(from) > 1 {
		return e, sendapi.Bad("from", "from parameter must be given once")
	}
	if len(from) == 1 {
		if e.From = strings.TrimSpace(from[0]); e.From == "" {
			return e, sendapi.Bad("from", "from parameter is missing")
		}
	}
	e.To, e.Cc, e.Bcc = f.list("to"), f.list("cc"), f.list("bcc")
	if len(e.To) == 0 {
		return e, sendapi.Bad("to", "to parameter is missing")
	}
	if raw {
		return f.rawEmail(e)
	}
	e.Subject = f.one("subject")
	if e.Subject == "" {
		return e, sendapi.Bad("subject", "subject parameter is missing")
	}
	e.Text, e.HTML = sendapi.Text(f.one("text")), sendapi.Text(f.one("html"))
	if e.Text == nil && e.HTML == nil {
		return e, sendapi.Bad("text", "Need at least one of 'text', 'html' or 'template' parameters specified")
	}
	if fail := f.headers(&e); fail != nil {
		return e, fail
	}
	if len(f.files) > maxAttachments {
		return e, sendapi.Bad("attachment", "Too many attachments.")
	}
	for _, fl := range f.files {
		a := sendapi.Attachment{Filename: fl.name, ContentType: fl.contentType, Content: fl.data}
		if mt, _, _ := mime.ParseMediaType(fl.contentType); mt == "application/octet-stream" {
			// Form encoders' default, not the sender's choice: the type
			// comes from the name, as when none is given.
			a.ContentType = ""
		}
		switch fl.field {
		case "inline":
			a.ContentID = fl.name // Mailgun references an inline file as cid:<its name>
		case "attachment":
		default:
			return e, sendapi.Bad(fl.field, "Unexpected file field "+fl.field)
		}
		e.Attachments = append(e.Attachments, a)
	}
	return e, nil
}

// rawEmail is messages.mime: the MIME message in the "message" file.
func (f *form) rawEmail(e sendapi.Email) (sendapi.Email, *sendapi.Error) {
	if len(f.files) != 1 || f.files[0].field != "message" {
		return e, sendapi.Bad("message", "message parameter is missing")
	}
	e.Raw = f.files[0].data
	return e, nil
}

var unsupported = map[string]string{
	"template":            "Stored templates are not supported here: send text or html.",
	"recipient-variables": "recipient-variables (batch sending) is not supported here: send one message per recipient.",
	"o:deliverytime":      "o:deliverytime is not supported here: mail is delivered at once.",
}

func (f *form) refuseUnsupported() *sendapi.Error {
	for _, k := range f.order {
		if msg, ok := unsupported[k]; ok {
			return sendapi.Bad(k, msg)
		}
	}
	return nil
}

// one is a field given at most once (the first, if repeated).
func (f *form) one(k string) string {
	if v := f.fields[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// list is a repeatable address field, each value a comma-separated list.
func (f *form) list(k string) []string {
	var out []string
	for _, v := range f.fields[k] {
		out = append(out, sendapi.SplitList(v)...)
	}
	return out
}

// optionHeaders names the X-Mailgun headers of the o: options that are
// not simply X-Mailgun-<Option>.
var optionHeaders = map[string]string{
	"o:tag":             "X-Mailgun-Tag",
	"o:testmode":        "X-Mailgun-Drop-Message",
	"o:tracking":        "X-Mailgun-Track",
	"o:tracking-clicks": "X-Mailgun-Track-Clicks",
	"o:tracking-opens":  "X-Mailgun-Track-Opens",
	"o:require-tls":     "X-Mailgun-Require-TLS",
}

// headers reads h:, o: and v: fields, in the order given.
func (f *form) headers(e *sendapi.Email) *sendapi.Error {
	vars := map[string]string{}
	for _, k := range f.order {
		for _, v := range f.fields[k] {
			switch {
			case strings.HasPrefix(k, "h:"):
				name := k[2:]
				if strings.EqualFold(name, "Reply-To") {
					e.ReplyTo = append(e.ReplyTo, sendapi.SplitList(v)...)
					continue
				}
				e.Headers = append(e.Headers, sendapi.Header{Name: name, Value: v})
			case strings.HasPrefix(k, "o:"):
				name, ok := optionHeaders[k]
				if !ok {
					name = "X-Mailgun-" + textproto.CanonicalMIMEHeaderKey(k[2:])
				}
				e.Headers = append(e.Headers, sendapi.Header{Name: name, Value: v})
			case strings.HasPrefix(k, "v:"):
				vars[k[2:]] = v
			}
		}
	}
	if len(vars) == 0 {
		return nil
	}
	for i, h := range e.Headers {
		if strings.EqualFold(h.Name, VariablesHeader) {
			// An explicit X-Mailgun-Variables (the SDK's template
			// variables) is merged with the v: fields.
			var given map[string]any
			if json.Unmarshal([]byte(h.Value), &given) != nil {
				return sendapi.Bad("h:"+VariablesHeader, "h:X-Mailgun-Variables must be a JSON object.")
			}
			for k, v := range given {
				if _, set := vars[k]; !set {
					b, _ := json.Marshal(v)
					vars[k] = string(b)
				}
			}
			e.Headers = slices.Delete(e.Headers, i, i+1)
			break
		}
	}
	e.Headers = append(e.Headers, sendapi.Header{Name: VariablesHeader, Value: asciiJSON(vars)})
	return nil
}

// asciiJSON writes m as one line of JSON in key order, with every
// non-ASCII character escaped, so that it stands in a header as given.
func asciiJSON(m map[string]string) string {
	b, _ := json.Marshal(m) // sorted keys
	var out strings.Builder
	for _, r := range string(b) {
		switch {
		case r < 0x80:
			out.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16Pair(r)
			out.WriteString(`\u` + hex4(r1) + `\u` + hex4(r2))
		default:
			out.WriteString(`\u` + hex4(r))
		}
	}
	return out.String()
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

func hex4(r rune) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[r>>12&0xf], digits[r>>8&0xf], digits[r>>4&0xf], digits[r&0xf]})
}

type messageBody struct {
	Message string `json:"message"`
}

type queuedBody struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

var status = map[sendapi.Failure]int{
	sendapi.Invalid:     http.StatusBadRequest,
	sendapi.MediaType:   http.StatusBadRequest,
	sendapi.TooLarge:    http.StatusRequestEntityTooLarge,
	sendapi.Quota:       http.StatusTooManyRequests,
	sendapi.Sealed:      http.StatusForbidden,
	sendapi.Busy:        http.StatusTooManyRequests,
	sendapi.Unavailable: http.StatusServiceUnavailable,
	sendapi.Internal:    http.StatusInternalServerError,
}

// Refuse implements sendapi.API.
func (API) Refuse(w http.ResponseWriter, e *sendapi.Error) {
	if e.Failure == sendapi.Unauthorized {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "Forbidden")
		return
	}
	e.Answer(w, status[e.Failure], messageBody{Message: e.Message})
}

// Accepted implements sendapi.API.
func (a API) Accepted(w http.ResponseWriter, r *http.Request, results []sendapi.Result) {
	switch {
	case len(results) != 1:
		a.Refuse(w, sendapi.Fail(sendapi.Internal))
		return
	case results[0].Err != nil:
		a.Refuse(w, results[0].Err)
		return
	}
	d, _ := domain(r.URL.EscapedPath())
	sendapi.WriteJSON(w, http.StatusOK, queuedBody{ID: "<" + results[0].ID + "@" + d + ">", Message: "Queued. Thank you."})
}
