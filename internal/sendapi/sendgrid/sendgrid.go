// Package sendgrid reads SendGrid's v3 Mail Send request (POST
// /v3/mail/send, "Authorization: Bearer <key>") and answers in SendGrid's
// shape: 202 with an empty body and an X-Message-Id header, or
// {"errors": [{"message", "field", "help"}]} with 400, 401, 413, 415, 429
// or 503 (https://www.twilio.com/docs/sendgrid/api-reference/mail-send).
//
// Each personalization is one message, as SendGrid sends it: its to, cc,
// bcc, subject and headers over the request's, the request's from,
// reply_to, content and attachments. dynamic_template_data is kept as
// given, in an X-SendGrid-Dynamic-Template-Data header, and with a
// template_id and no content it is also the text body ("{}" when there is
// none): this plane renders no templates. send_at is refused: mail is delivered at once.
package sendgrid

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/websitebench/mailplane/internal/sendapi"
)

// Path is the route.
const Path = "/v3/mail/send"

// Limits SendGrid states.
const (
	maxPersonalizations = 1000
	maxContent          = 2
	maxAttachments      = 32
	// DataHeader carries a personalization's dynamic_template_data.
	DataHeader = "X-SendGrid-Dynamic-Template-Data"
	// TemplateHeader carries template_id.
	TemplateHeader = "X-SendGrid-Template-Id"
)

// API is SendGrid's Mail Send.
type API struct{}

// Name implements sendapi.API.
func (API) Name() string { return "sendgrid" }

// Match implements sendapi.API.
func (API) Match(path string) bool { return path == Path }

// Batch implements sendapi.API: a request's personalizations are judged
// together (one invalid one refuses the request before any is sent).
func (API) Batch(string) bool { return false }

// Credential implements sendapi.API.
func (API) Credential(r *http.Request) (string, bool) {
	cred, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return cred, ok && cred != ""
}

type address struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

type personalization struct {
	To                  []address         `json:"to"`
	From                *address          `json:"from"`
	Cc                  []address         `json:"cc"`
	Bcc                 []address         `json:"bcc"`
	Subject             *string           `json:"subject"`
	Headers             map[string]string `json:"headers"`
	DynamicTemplateData json.RawMessage   `json:"dynamic_template_data"`
	SendAt              int64             `json:"send_at"`
}

type content struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

type attachment struct {
	Content     string `json:"content"`
	Type        string `json:"type"`
	Filename    string `json:"filename"`
	Disposition string `json:"disposition"`
	ContentID   string `json:"content_id"`
}

type request struct {
	Personalizations []personalization `json:"personalizations"`
	From             *address          `json:"from"`
	ReplyTo          *address          `json:"reply_to"`
	ReplyToList      []address         `json:"reply_to_list"`
	Subject          string            `json:"subject"`
	Content          []content         `json:"content"`
	Attachments      []attachment      `json:"attachments"`
	TemplateID       string            `json:"template_id"`
	Headers          map[string]string `json:"headers"`
	SendAt           int64             `json:"send_at"`
}

// fieldNames are the request's names of the fields the writer judges.
var fieldNames = map[string]string{"from": "from.email", "to": "personalizations.to", "cc": "personalizations.cc", "bcc": "personalizations.bcc"}

// FieldName implements sendapi.API.
func (API) FieldName(field string) string { return sendapi.FieldNames(fieldNames, field) }

// Parse implements sendapi.API.
func (API) Parse(r *http.Request, body []byte) ([]sendapi.Email, *sendapi.Error) {
	if !isJSON(r) {
		return nil, sendapi.Fail(sendapi.MediaType)
	}
	var req request
	if fail := sendapi.DecodeJSON(body, &req); fail != nil {
		return nil, fail
	}
	return req.emails()
}

func isJSON(r *http.Request) bool {
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// emails checks the request's shape and makes one Email per
// personalization.
func (req *request) emails() ([]sendapi.Email, *sendapi.Error) {
	switch n := len(req.Personalizations); {
	case n == 0:
		return nil, sendapi.Bad("personalizations", "You must have at least one personalization.")
	case n > maxPersonalizations:
		return nil, sendapi.Bad("personalizations", fmt.Sprintf("The personalization block is limited to %d personalizations per API request.", maxPersonalizations))
	}
	if req.SendAt != 0 {
		return nil, sendapi.Bad("send_at", "Scheduled sends are not supported here: mail is delivered at once.")
	}
	base, fail := req.common()
	if fail != nil {
		return nil, fail
	}
	out := make([]sendapi.Email, 0, len(req.Personalizations))
	for i, p := range req.Personalizations {
		e, fail := p.email(base, req, "personalizations."+strconv.Itoa(i))
		if fail != nil {
			return nil, fail
		}
		out = append(out, e)
	}
	return out, nil
}

// common reads what every personalization shares.
func (req *request) common() (sendapi.Email, *sendapi.Error) {
	var e sendapi.Email
	if req.ReplyTo != nil {
		e.ReplyTo = append(e.ReplyTo, sendapi.NameAddr(req.ReplyTo.Name, req.ReplyTo.Email))
	}
	for _, a := range req.ReplyToList {
		e.ReplyTo = append(e.ReplyTo, sendapi.NameAddr(a.Name, a.Email))
	}
	if len(req.Content) > maxContent {
		return e, sendapi.Bad("content", "Only text/plain and text/html content are supported.")
	}
	for i, c := range req.Content {
		field := "content." + strconv.Itoa(i)
		if c.Value == "" {
			return e, sendapi.Bad(field+".value", "The content value must be a string at least one character in length.")
		}
		v := c.Value
		switch mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(c.Type)), ";"); mt {
		case "text/plain":
			if e.Text != nil {
				return e, sendapi.Bad(field+".type", "Each content type may appear only once.")
			}
			e.Text = &v
		case "text/html":
			if e.HTML != nil {
				return e, sendapi.Bad(field+".type", "Each content type may appear only once.")
			}
			e.HTML = &v
		default:
			return e, sendapi.Bad(field+".type", "Only text/plain and text/html content are supported.")
		}
	}
	if len(req.Attachments) > maxAttachments {
		return e, sendapi.Bad("attachments", "Too many attachments.")
	}
	for i, a := range req.Attachments {
		att, fail := a.read("attachments." + strconv.Itoa(i))
		if fail != nil {
			return e, fail
		}
		e.Attachments = append(e.Attachments, att)
	}
	if req.TemplateID != "" {
		if !printable(req.TemplateID) {
			return e, sendapi.Bad("template_id", "The template_id is invalid.")
		}
		e.Headers = append(e.Headers, sendapi.Header{Name: TemplateHeader, Value: req.TemplateID})
	} else if e.Text == nil && e.HTML == nil {
		return e, sendapi.Bad("content", "Unless a valid template_id is provided, the content parameter is required.")
	}
	return e, nil
}

func (a attachment) read(field string) (sendapi.Attachment, *sendapi.Error) {
	if a.Filename == "" {
		return sendapi.Attachment{}, sendapi.Bad(field+".filename", "The attachment filename parameter is required.")
	}
	data, ok := sendapi.DecodeBase64(a.Content)
	if !ok || a.Content == "" {
		return sendapi.Attachment{}, sendapi.Bad(field+".content", "The attachment content must be base64 encoded.")
	}
	att := sendapi.Attachment{Filename: a.Filename, ContentType: a.Type, Content: data}
	switch a.Disposition {
	case "", "attachment":
	case "inline":
		if a.ContentID == "" {
			return att, sendapi.Bad(field+".content_id", "The content_id parameter is required for inline attachments.")
		}
		att.ContentID = a.ContentID
	default:
		return att, sendapi.Bad(field+".disposition", "The disposition must be inline or attachment.")
	}
	return att, nil
}

// email is personalization p over base and the request.
func (p *personalization) email(base sendapi.Email, req *request, field string) (sendapi.Email, *sendapi.Error) {
	e := base
	from := req.From
	if p.From != nil {
		from = p.From
	}
	if from == nil || from.Email == "" {
		return e, sendapi.Bad("from.email", "The from object must be provided for every email send.")
	}
	e.From = sendapi.NameAddr(from.Name, from.Email)
	if len(p.To) == 0 {
		return e, sendapi.Bad(field+".to", "The to array is required for all personalization objects, and must have at least one email object with a valid email address.")
	}
	e.To, e.Cc, e.Bcc = names(p.To), names(p.Cc), names(p.Bcc)
	e.Subject = req.Subject
	if p.Subject != nil {
		e.Subject = *p.Subject
	}
	if e.Subject == "" {
		return e, sendapi.Bad("subject", "The subject is required. You can get around this requirement if you use a template with a subject defined or if every personalization has a subject defined.")
	}
	if p.SendAt != 0 {
		return e, sendapi.Bad(field+".send_at", "Scheduled sends are not supported here: mail is delivered at once.")
	}
	e.Headers = headers(base.Headers, req.Headers, p.Headers)
	data := "{}"
	if len(p.DynamicTemplateData) > 0 && !bytes.Equal(p.DynamicTemplateData, []byte("null")) {
		var b bytes.Buffer
		if json.Compact(&b, p.DynamicTemplateData) != nil || !printable(b.String()) {
			return e, sendapi.Bad(field+".dynamic_template_data", "The dynamic_template_data must be ASCII JSON.")
		}
		data = b.String()
		e.Headers = append(e.Headers, sendapi.Header{Name: DataHeader, Value: data})
	}
	if base.Text == nil && base.HTML == nil {
		e.Text = &data // a template this plane does not render: its data is the body
	}
	return e, nil
}

func names(list []address) []string {
	out := make([]string, 0, len(list))
	for _, a := range list {
		out = append(out, sendapi.NameAddr(a.Name, a.Email))
	}
	return out
}

// headers merges the request's headers and a personalization's (which win),
// in name order, after fixed ones.
func headers(fixed []sendapi.Header, top, own map[string]string) []sendapi.Header {
	merged := make(map[string]string, len(top)+len(own))
	for k, v := range top {
		merged[k] = v
	}
	for k, v := range own {
		merged[k] = v
	}
	out := slices.Clone(fixed)
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		out = append(out, sendapi.Header{Name: k, Value: merged[k]})
	}
	return out
}

// printable: printable ASCII, as a header value must be.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// errorItem is one of SendGrid's errors.
type errorItem struct {
	Message string  `json:"message"`
	Field   *string `json:"field"`
	Help    *string `json:"help"`
}

type errorBody struct {
	Errors []errorItem `json:"errors"`
}

var status = map[sendapi.Failure]int{
	sendapi.Unauthorized: http.StatusUnauthorized,
	sendapi.Invalid:      http.StatusBadRequest,
	sendapi.MediaType:    http.StatusUnsupportedMediaType,
	sendapi.TooLarge:     http.StatusRequestEntityTooLarge,
	sendapi.Quota:        http.StatusTooManyRequests,
	sendapi.Sealed:       http.StatusForbidden,
	sendapi.Busy:         http.StatusTooManyRequests,
	sendapi.Unavailable:  http.StatusServiceUnavailable,
	sendapi.Internal:     http.StatusInternalServerError,
}

// Refuse implements sendapi.API.
func (API) Refuse(w http.ResponseWriter, e *sendapi.Error) {
	item := errorItem{Message: e.Message}
	switch e.Failure {
	case sendapi.Unauthorized:
		item.Message = "The provided authorization grant is invalid, expired, or revoked"
	case sendapi.TooLarge:
		item.Message = "The JSON payload you have included in your request is too large."
	}
	if e.Field != "" {
		item.Field = &e.Field
	}
	e.Answer(w, status[e.Failure], errorBody{Errors: []errorItem{item}})
}

// Accepted implements sendapi.API: SendGrid accepts a request as a whole,
// so the first refusal of a personalization by the plane (the quota) is
// the answer; the personalizations before it are stored, as a provider
// that had queued them would have sent them.
func (a API) Accepted(w http.ResponseWriter, _ *http.Request, results []sendapi.Result) {
	for _, res := range results {
		if res.Err != nil {
			a.Refuse(w, res.Err)
			return
		}
	}
	if len(results) > 0 {
		w.Header().Set("X-Message-Id", results[0].ID)
	}
	w.WriteHeader(http.StatusAccepted)
}
