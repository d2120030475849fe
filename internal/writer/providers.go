package writer

import (
	"cmp"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/faults"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/sendapi"
	"github.com/websitebench/mailplane/internal/sendapi/mailgun"
	"github.com/websitebench/mailplane/internal/sendapi/postmark"
	"github.com/websitebench/mailplane/internal/sendapi/sendgrid"
	"github.com/websitebench/mailplane/internal/sendapi/ses"
	"github.com/websitebench/mailplane/internal/sigv4"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The provider-compatible send APIs (SendGrid, Postmark, Mailgun, Amazon
// SES; package sendapi) on the writer, beside POST /emails and under its
// rules: the credential selects the trial and is judged before anything
// else about the request, every email is judged as POST /emails judges one
// and composed the same way, the plane counts every byte toward the
// quota, and every refusal is the provider's own shape.

// sendAPIs are the provider APIs every writer serves.
var sendAPIs = []sendapi.API{sendgrid.API{}, postmark.API{}, mailgun.API{}, ses.API{}}

// maxProviderHeaders bounds the headers of one provider email: a
// provider's own (tags, metadata, variables) beside the sender's.
const maxProviderHeaders = 2 * maxHeaders

// sendAPI is the provider API that serves path, or nil.
func sendAPI(path string) sendapi.API {
	for _, api := range sendAPIs {
		if api.Match(path) {
			return api
		}
	}
	return nil
}

// presented is what a provider request presents to open a trial.
type presented struct {
	credential string
	proof      *rpc.SigV4Proof
}

// provider serves one provider API request.
func (h *Handler) provider(w http.ResponseWriter, r *http.Request, api sendapi.API) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, errMethod)
		return
	}
	cred, hasCred := api.Credential(r)
	signedAPI, isSigned := api.(sendapi.Signed)
	if !hasCred && !isSigned {
		api.Refuse(w, sendapi.Fail(sendapi.Unauthorized))
		return
	}
	if _, signed := r.Header["Authorization"]; isSigned && !signed {
		api.Refuse(w, signedAPI.Unsigned(true))
		return
	}
	who := presented{credential: cred}
	limit := h.cfg.MaxBodyBytes
	if api.Batch(r.URL.EscapedPath()) {
		limit *= batchBodyFactor
	}
	if hasCred {
		// The credential is in the headers: the caller is known before
		// its body is read.
		done, err := h.admit(r, rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: cred, API: api.Name()}, limit)
		if err != nil {
			api.Refuse(w, h.providerAnswer(err))
			return
		}
		defer done()
	}
	var body []byte
	var fail *sendapi.Error
	unknown := func() {} // the unknown caller's part of the budget, until it is known
	if hasCred {
		body, fail = h.readProviderBody(w, r, limit)
	} else {
		body, unknown, fail = h.readUnknownBody(w, r, limit)
	}
	defer unknown()
	if fail != nil {
		if hasCred {
			// The plane records the refusal in the trial's trail.
			fail = cmp.Or(h.checkPresented(r, api, who, fail), fail)
		}
		api.Refuse(w, fail)
		return
	}
	if !hasCred {
		proof, err := sigv4.Prove(r, body)
		if err != nil {
			api.Refuse(w, signedAPI.Unsigned(false))
			return
		}
		who.proof = &rpc.SigV4Proof{AccessKeyID: proof.AccessKeyID, StringToSign: proof.StringToSign, Signature: proof.Signature}
		// The signature names the caller before anything else is judged.
		done, err := h.admit(r, rpc.CredentialRequest{Via: rpc.ViaHTTP, SigV4: who.proof, API: api.Name()}, limit)
		unknown()
		if err != nil {
			api.Refuse(w, h.providerAnswer(err))
			return
		}
		defer done()
	}
	emails, fail := api.Parse(r, body)
	var judged []*judgedEmail
	if fail == nil {
		judged, fail = h.judgeAll(api, emails, api.Batch(r.URL.EscapedPath()))
	}
	if fail != nil {
		// The plane records the refusal in the trial's trail.
		api.Refuse(w, cmp.Or(h.checkPresented(r, api, who, fail), fail))
		return
	}
	if item := firstRefused(judged); item != nil {
		// A batch's email refused on its own: the others are still sent,
		// if the credential still opens the trial.
		if refusal := h.checkPresented(r, api, who, item); refusal != nil {
			api.Refuse(w, refusal)
			return
		}
	}
	results, whole := h.sendJudged(r, api, who, judged)
	if whole != nil {
		api.Refuse(w, whole)
		return
	}
	api.Accepted(w, r, results)
}

// readUnknownBody reads the body of a request whose caller the body
// itself names (a SigV4 signature covers its hash): under the process's
// budget for unknown callers, which the body holds until release, and
// within limits.PreauthBodyTimeout. Over the budget it is 429 at once,
// and nothing is read.
func (h *Handler) readUnknownBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, func(), *sendapi.Error) {
	release, ok := h.preauth.Take(r.Context(), declared(r, limit))
	if !ok {
		return nil, func() {}, sendapi.Fail(sendapi.Busy)
	}
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(limits.PreauthBodyTimeout))
	body, fail := h.readProviderBody(w, r, limit)
	return body, release, fail
}

// firstRefused is the refusal of the first email judged invalid, or nil.
func firstRefused(judged []*judgedEmail) *sendapi.Error {
	for _, j := range judged {
		if j.err != nil {
			return j.err
		}
	}
	return nil
}

// readProviderBody reads a body of at most limit bytes, of any media type
// (each API checks its own).
func (h *Handler) readProviderBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *sendapi.Error) {
	_, hasLength := r.Header["Content-Length"]
	if !hasLength && len(r.TransferEncoding) == 0 {
		return nil, sendapi.Bad("", "A Content-Length (or a chunked body) is required.")
	}
	if r.ContentLength > limit {
		return nil, sendapi.Fail(sendapi.TooLarge)
	}
	body, err := readAll(w, r, limit)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || errors.Is(err, connlimit.ErrBodyTooLarge):
		return nil, sendapi.Fail(sendapi.TooLarge)
	case err != nil:
		return nil, sendapi.Bad("", "The body ended before Content-Length bytes arrived.")
	}
	return body, nil
}

// judgedEmail is one email of a provider request, judged: its envelope
// and message, or its refusal.
type judgedEmail struct {
	from  string
	to    []string // the envelope
	raw   []byte
	shown []string // To as given, for answers that echo it
	err   *sendapi.Error
}

// judgeAll judges every email. Unless the API judges a batch's emails one
// by one, the first invalid email refuses the request before anything is
// sent.
func (h *Handler) judgeAll(api sendapi.API, emails []sendapi.Email, oneByOne bool) ([]*judgedEmail, *sendapi.Error) {
	out := make([]*judgedEmail, 0, len(emails))
	for i := range emails {
		m := &emails[i]
		j := &judgedEmail{shown: m.To, err: m.Refused}
		if j.err == nil {
			j.err = h.judge(api, m, j)
		}
		if j.err != nil && !oneByOne {
			return nil, j.err
		}
		out = append(out, j)
	}
	return out, nil
}

var errProviderValue = sendapi.Bad("", "A field has an invalid value.")

// bad is api's refusal of field (by POST /emails' name), which must be
// must: named as api's request spells it, as POST /emails names its own.
func bad(api sendapi.API, field, must string) *sendapi.Error {
	name := api.FieldName(field)
	return sendapi.Bad(name, name+" must be "+must)
}

// judge checks m's values as POST /emails checks its own, and composes
// its message into j.
func (h *Handler) judge(api sendapi.API, m *sendapi.Email, j *judgedEmail) *sendapi.Error {
	e := &email{}
	var ok bool
	if e.From, e.FromName, ok = sender(m.From); !ok {
		return bad(api, "from", ruleSender)
	}
	j.from = e.From
	if e.To, ok = addressList(anyList(m.To), false); !ok {
		return bad(api, "to", ruleTo)
	}
	if e.Cc, ok = addressList(anyList(m.Cc), false); !ok {
		return bad(api, "cc", ruleAddresses)
	}
	if e.Bcc, ok = addressList(anyList(m.Bcc), false); !ok {
		return bad(api, "bcc", ruleAddresses)
	}
	j.to = e.Recipients()
	if n := len(j.to); n == 0 || n > h.cfg.MaxRecipients {
		return bad(api, "to", "1 to "+strconv.Itoa(h.cfg.MaxRecipients)+" recipients, with cc and bcc")
	}
	if m.Raw != nil {
		if len(m.Raw) > limits.MessageBytes {
			return sendapi.Fail(sendapi.TooLarge)
		}
		j.raw = m.Raw
		return nil
	}
	if e.ReplyTo, ok = replyTo(anyList(m.ReplyTo)); !ok {
		return bad(api, "reply_to", ruleReplyTo)
	}
	e.Subject = m.Subject
	if utf8.RuneCountInString(e.Subject) > maxSubjectChars || strings.ContainsAny(e.Subject, "\r\n") || !utf8.ValidString(e.Subject) {
		return bad(api, "subject", ruleSubject)
	}
	e.Text, e.HTML = m.Text, m.HTML
	if fail := judgeHeaders(m.Headers, e); fail != nil {
		return fail
	}
	if fail := judgeAttachments(m.Attachments, e); fail != nil {
		return fail
	}
	j.raw = compose(e, h.now())
	return nil
}

func judgeHeaders(list []sendapi.Header, e *email) *sendapi.Error {
	if len(list) > maxProviderHeaders {
		return sendapi.Bad("headers", "Too many headers.")
	}
	for _, hd := range list {
		if !safeHeaderName(hd.Name) || len(hd.Name)+2+len(hd.Value) > maxHeaderLine || !printableASCII(hd.Value) {
			return sendapi.Bad("headers", "Only X-* and list or threading headers of printable ASCII may be set.")
		}
		e.Headers = append(e.Headers, header{Name: hd.Name, Value: hd.Value})
	}
	return nil
}

func judgeAttachments(list []sendapi.Attachment, e *email) *sendapi.Error {
	if len(list) > maxAttachments {
		return sendapi.Bad("attachments", "Too many attachments.")
	}
	for _, a := range list {
		att := attachment{Filename: a.Filename, Content: a.Content, ContentID: a.ContentID}
		if !validFilename(a.Filename) || (a.ContentID != "" && !validContentID(a.ContentID)) {
			return sendapi.Bad("attachments", "An attachment's filename or content id is invalid.")
		}
		var ok bool
		if a.ContentType == "" {
			att.ContentType = typeByName(a.Filename)
		} else if att.ContentType, ok = attachmentType(a.ContentType); !ok {
			return sendapi.Bad("attachments", "An attachment's content type is invalid.")
		}
		e.Attachments = append(e.Attachments, att)
	}
	return nil
}

func anyList(list []string) any {
	if list == nil {
		return nil
	}
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

// sendJudged sends each judged email to the plane, in order. A refusal
// that holds for every email (credential, sealed mailbox) or an outage
// ends the request: it is whole, the request's answer.
func (h *Handler) sendJudged(r *http.Request, api sendapi.API, who presented, judged []*judgedEmail) (results []sendapi.Result, whole *sendapi.Error) {
	results = make([]sendapi.Result, 0, len(judged))
	for _, j := range judged {
		if j.err != nil {
			results = append(results, sendapi.Result{To: j.shown, Err: j.err})
			continue
		}
		ctx, cancel := planeContext(r)
		resp, err := h.plane.Send(ctx, &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: who.credential, SigV4: who.proof, API: api.Name(),
			From: j.from, To: j.to, Raw: j.raw})
		cancel()
		if err != nil {
			if wholeBatch(err) {
				return nil, h.providerRefusal(api, err)
			}
			results = append(results, sendapi.Result{To: j.shown, Err: h.providerRefusal(api, err)})
			continue
		}
		if resp.Fault != nil && resp.Fault.Do == faults.Timeout {
			holdAndDrop(r.Context(), resp.Fault) // faults.go: no answer
		}
		if f := providerFault(resp.Fault); f != nil {
			return nil, f
		}
		h.log.Debug().Str("api", api.Name()).Str("namespace", resp.Namespace).Int64("seq", resp.Seq).Msg("http: accepted")
		results = append(results, sendapi.Result{ID: resp.ID, To: j.shown})
	}
	return results, nil
}

// providerFault is a send refused by a fault on purpose (faults.go), in
// the provider's shape for what its status stands for: a rate limit, a
// failure, an outage; nil for any other send.
func providerFault(f *rpc.Fault) *sendapi.Error {
	if faultAnswer(f) == nil {
		return nil
	}
	failure := sendapi.Unavailable
	switch f.Status {
	case http.StatusTooManyRequests:
		failure = sendapi.Busy
	case http.StatusInternalServerError:
		failure = sendapi.Internal
	}
	e := sendapi.Fail(failure)
	e.Status, e.RetryAfter = faultAnswer(f).Status, f.RetryAfter
	return e
}

// checkPresented asks the plane whether what the request presents opens
// a trial, for a request (or one email of a batch) the writer refuses as
// fail: the plane records the refusal in that trial's trail. It returns
// nil if the credential opens the trial, else the API's refusal of a
// wrong credential (or an outage), which is then the answer.
func (h *Handler) checkPresented(r *http.Request, api sendapi.API, who presented, fail *sendapi.Error) *sendapi.Error {
	ctx, cancel := planeContext(r)
	defer cancel()
	code := "invalid_message"
	if fail.Failure == sendapi.TooLarge {
		code = "message_too_large"
	}
	err := h.plane.Refused(ctx, &rpc.RefusalRequest{Code: code,
		CredentialRequest: rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: who.credential, SigV4: who.proof, API: api.Name()}})
	if err == nil {
		return nil
	}
	return sendapi.Fail(h.planeAnswer(err).provider)
}

// providerRefusal maps the plane's verdict on a well-formed email; a
// refused envelope names its field as api spells it.
func (h *Handler) providerRefusal(api sendapi.API, err error) *sendapi.Error {
	a := h.planeAnswer(err)
	if a.provider == sendapi.Invalid {
		if field, must := envelopeRule(err); field != "" {
			return bad(api, field, must)
		}
		return errProviderValue
	}
	return sendapi.Fail(a.provider)
}
