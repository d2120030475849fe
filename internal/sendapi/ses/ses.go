// Package ses reads Amazon SES v2's SendEmail (POST
// /v2/email/outbound-emails, signed with AWS Signature Version 4 for the
// service "ses" in any region) and answers in SES's shape: 200 with
// {"MessageId": …}, or an error named by the X-Amzn-ErrorType header with
// {"message": …} (https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html).
//
// Content.Simple (subject, text and html bodies, headers, attachments) and
// Content.Raw (a whole MIME message, its recipients from Destination or
// else from its To, Cc and Bcc headers) are read; Content.Template is
// refused (this plane renders no templates). EmailTags are kept as SES's
// X-SES-MESSAGE-TAGS header and ConfigurationSetName as
// X-SES-CONFIGURATION-SET.
//
// The request carries no bearer credential: package sigv4 turns its
// signature into a proof the plane checks.
package ses

import (
	"bytes"
	"net/http"
	"net/mail"
	"strings"

	"github.com/websitebench/mailplane/internal/sendapi"
)

// Path is the route.
const Path = "/v2/email/outbound-emails"

// Limits SES states.
const (
	maxRecipients  = 50
	maxTags        = 50
	maxAttachments = 32
	// TagsHeader and ConfigurationSetHeader are SES's SMTP headers.
	TagsHeader             = "X-SES-MESSAGE-TAGS"
	ConfigurationSetHeader = "X-SES-CONFIGURATION-SET"
)

// SES's error types.
const (
	TypeSignature      = "SignatureDoesNotMatch"
	TypeMissingAuth    = "MissingAuthenticationTokenException"
	TypeIncompleteAuth = "IncompleteSignatureException"
	typeBadRequest     = "BadRequestException"
	typeRejected       = "MessageRejected"
	typeTooMany        = "TooManyRequestsException"
	typePaused         = "SendingPausedException"
	typeUnavailable    = "ServiceUnavailable"
	typeInternal       = "InternalFailure"
)

// API is SES v2's SendEmail.
type API struct{}

// Name implements sendapi.API.
func (API) Name() string { return "ses" }

// Match implements sendapi.API.
func (API) Match(path string) bool { return path == Path }

// Batch implements sendapi.API.
func (API) Batch(string) bool { return false }

// Credential implements sendapi.API: SES has no bearer credential.
func (API) Credential(*http.Request) (string, bool) { return "", false }

// Unsigned implements sendapi.Signed.
func (API) Unsigned(missing bool) *sendapi.Error {
	if missing {
		return &sendapi.Error{Failure: sendapi.Unauthorized, Code: TypeMissingAuth, Message: "Missing Authentication Token"}
	}
	return &sendapi.Error{Failure: sendapi.Unauthorized, Code: TypeIncompleteAuth, Message: "The request signature is incomplete or malformed."}
}

type content struct {
	Data    string
	Charset string
}

type attachment struct {
	FileName           string
	RawContent         []byte // base64 in JSON
	ContentType        string
	ContentID          string `json:"ContentId"`
	ContentDisposition string
}

type request struct {
	FromEmailAddress string
	Destination      *struct {
		ToAddresses  []string
		CcAddresses  []string
		BccAddresses []string
	}
	ReplyToAddresses []string
	Content          struct {
		Simple *struct {
			Subject *content
			Body    struct {
				Text *content
				HTML *content `json:"Html"`
			}
			Headers     []struct{ Name, Value string }
			Attachments []attachment
		}
		Raw *struct {
			Data []byte // base64 in JSON
		}
		Template *struct{}
	}
	EmailTags            []struct{ Name, Value string }
	ConfigurationSetName string
}

// fieldNames are the request's names of the fields the writer judges.
var fieldNames = map[string]string{"from": "FromEmailAddress", "to": "Destination.ToAddresses", "cc": "Destination.CcAddresses", "bcc": "Destination.BccAddresses",
	"reply_to": "ReplyToAddresses", "subject": "Content.Simple.Subject"}

// FieldName implements sendapi.API.
func (API) FieldName(field string) string { return sendapi.FieldNames(fieldNames, field) }

// Parse implements sendapi.API.
func (API) Parse(r *http.Request, body []byte) ([]sendapi.Email, *sendapi.Error) {
	var req request
	if fail := sendapi.DecodeJSON(body, &req); fail != nil {
		return nil, fail
	}
	e, fail := req.email()
	if fail != nil {
		return nil, fail
	}
	return []sendapi.Email{e}, nil
}

func (req *request) email() (sendapi.Email, *sendapi.Error) {
	e := sendapi.Email{From: req.FromEmailAddress, ReplyTo: req.ReplyToAddresses}
	if d := req.Destination; d != nil {
		e.To, e.Cc, e.Bcc = d.ToAddresses, d.CcAddresses, d.BccAddresses
	}
	if len(e.To)+len(e.Cc)+len(e.Bcc) > maxRecipients {
		return e, sendapi.Bad("Destination", "Recipient count exceeds 50.")
	}
	if fail := req.tags(&e); fail != nil {
		return e, fail
	}
	c := req.Content
	switch {
	case c.Template != nil:
		return e, sendapi.Bad("Content.Template", "Templates are not supported here: send Content.Simple or Content.Raw.")
	case c.Simple != nil && c.Raw != nil, c.Simple == nil && c.Raw == nil:
		return e, sendapi.Bad("Content", "Content must have exactly one of Simple, Raw or Template.")
	case c.Raw != nil:
		return req.raw(e)
	}
	s := c.Simple
	if e.From == "" {
		return e, sendapi.Bad("FromEmailAddress", "Missing required field FromEmailAddress.")
	}
	if len(e.To)+len(e.Cc)+len(e.Bcc) == 0 {
		return e, sendapi.Bad("Destination", "Missing final '@domain'")
	}
	if s.Subject == nil || s.Subject.Data == "" {
		return e, sendapi.Bad("Content.Simple.Subject", "Missing required field Subject.")
	}
	e.Subject = s.Subject.Data
	if s.Body.Text != nil {
		e.Text = sendapi.Text(s.Body.Text.Data)
	}
	if s.Body.HTML != nil {
		e.HTML = sendapi.Text(s.Body.HTML.Data)
	}
	if e.Text == nil && e.HTML == nil {
		return e, sendapi.Bad("Content.Simple.Body", "Missing required field Body.")
	}
	for _, h := range s.Headers {
		e.Headers = append(e.Headers, sendapi.Header{Name: h.Name, Value: h.Value})
	}
	if len(s.Attachments) > maxAttachments {
		return e, sendapi.Bad("Content.Simple.Attachments", "Too many attachments.")
	}
	for _, a := range s.Attachments {
		att := sendapi.Attachment{Filename: a.FileName, ContentType: a.ContentType, Content: a.RawContent}
		switch strings.ToUpper(a.ContentDisposition) {
		case "", "ATTACHMENT":
		case "INLINE":
			att.ContentID = a.ContentID
		default:
			return e, sendapi.Bad("Content.Simple.Attachments", "ContentDisposition must be ATTACHMENT or INLINE.")
		}
		e.Attachments = append(e.Attachments, att)
	}
	return e, nil
}

// tags keeps EmailTags and ConfigurationSetName as SES's headers.
func (req *request) tags(e *sendapi.Email) *sendapi.Error {
	if len(req.EmailTags) > maxTags {
		return sendapi.Bad("EmailTags", "Too many tags.")
	}
	var tags []string
	for _, t := range req.EmailTags {
		if t.Name == "" || strings.ContainsAny(t.Name+t.Value, "=,;") {
			return sendapi.Bad("EmailTags", "A tag's name and value may not contain '=', ',' or ';'.")
		}
		tags = append(tags, t.Name+"="+t.Value)
	}
	if len(tags) > 0 {
		e.Headers = append(e.Headers, sendapi.Header{Name: TagsHeader, Value: strings.Join(tags, ", ")})
	}
	if req.ConfigurationSetName != "" {
		e.Headers = append(e.Headers, sendapi.Header{Name: ConfigurationSetHeader, Value: req.ConfigurationSetName})
	}
	return nil
}

// raw is Content.Raw: the message as sent; the envelope from the request
// or else from the message's headers, as SES takes it.
func (req *request) raw(e sendapi.Email) (sendapi.Email, *sendapi.Error) {
	e.Raw = req.Content.Raw.Data
	if len(e.Raw) == 0 {
		return e, sendapi.Bad("Content.Raw.Data", "Missing required field Data.")
	}
	if len(e.Headers) > 0 || len(e.ReplyTo) > 0 {
		return e, sendapi.Bad("Content.Raw", "EmailTags, ConfigurationSetName and ReplyToAddresses are not supported with Content.Raw here: set them as headers of the message.")
	}
	if e.From != "" && len(e.To)+len(e.Cc)+len(e.Bcc) > 0 {
		return e, nil
	}
	msg, err := mail.ReadMessage(bytes.NewReader(e.Raw))
	if err != nil {
		return e, &sendapi.Error{Failure: sendapi.Invalid, Code: typeRejected, Field: "Content.Raw.Data", Message: "The raw message could not be parsed."}
	}
	if e.From == "" {
		from, err := msg.Header.AddressList("From")
		if err != nil || len(from) != 1 {
			return e, &sendapi.Error{Failure: sendapi.Invalid, Code: typeRejected, Field: "Content.Raw.Data", Message: "The message has no single From address."}
		}
		e.From = from[0].Address
	}
	if len(e.To)+len(e.Cc)+len(e.Bcc) == 0 {
		for _, h := range []string{"To", "Cc", "Bcc"} {
			list, _ := msg.Header.AddressList(h)
			for _, a := range list {
				e.To = append(e.To, a.Address)
			}
		}
		if len(e.To) == 0 || len(e.To) > maxRecipients {
			return e, &sendapi.Error{Failure: sendapi.Invalid, Code: typeRejected, Field: "Content.Raw.Data", Message: "The message needs 1 to 50 recipients."}
		}
	}
	return e, nil
}

type errorBody struct {
	Message string `json:"message"`
}

type sentBody struct {
	MessageID string `json:"MessageId"`
}

// verdict is e's status, SES error type and message.
func verdict(e *sendapi.Error) (int, string, string) {
	switch e.Failure {
	case sendapi.Unauthorized:
		typ := e.Code
		if typ == "" {
			typ = TypeSignature
		}
		msg := "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
		if typ != TypeSignature {
			msg = e.Message
		}
		return http.StatusForbidden, typ, msg
	case sendapi.Invalid, sendapi.MediaType:
		typ := e.Code
		if typ == "" {
			typ = typeBadRequest
		}
		return http.StatusBadRequest, typ, e.Message
	case sendapi.TooLarge:
		return http.StatusBadRequest, typeRejected, "Message length is more than the limit."
	case sendapi.Quota:
		return http.StatusTooManyRequests, typeTooMany, "Daily message quota exceeded."
	case sendapi.Sealed:
		return http.StatusBadRequest, typePaused, "Sending is paused for this account: this mailbox no longer accepts mail."
	case sendapi.Busy:
		return http.StatusTooManyRequests, typeTooMany, "Maximum sending rate exceeded."
	case sendapi.Unavailable:
		return http.StatusServiceUnavailable, typeUnavailable, "Mail storage is unavailable; try again later."
	}
	return http.StatusInternalServerError, typeInternal, "Unexpected error."
}

// Refuse implements sendapi.API.
func (API) Refuse(w http.ResponseWriter, e *sendapi.Error) {
	st, typ, msg := verdict(e)
	w.Header().Set("X-Amzn-ErrorType", typ)
	e.Answer(w, st, errorBody{Message: msg})
}

// Accepted implements sendapi.API.
func (a API) Accepted(w http.ResponseWriter, _ *http.Request, results []sendapi.Result) {
	switch {
	case len(results) != 1:
		a.Refuse(w, sendapi.Fail(sendapi.Internal))
	case results[0].Err != nil:
		a.Refuse(w, results[0].Err)
	default:
		sendapi.WriteJSON(w, http.StatusOK, sentBody{MessageID: results[0].ID})
	}
}
