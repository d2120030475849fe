package webhooks

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Request is one delivery attempt, whole: where to POST, its headers and
// body, signed. The hooks process sends it as it is: it holds no key.
type Request struct {
	URL    string            `json:"url"`
	Header map[string]string `json:"header"`
	Body   []byte            `json:"body"`
}

// ErrNoEvent means the provider has no event for the fact (Postmark
// reports no "sent").
var ErrNoEvent = errors.New("webhooks: the provider sends no event for it")

// Build shapes fact f as h's provider sends it, as event id, signed with
// k at now (each attempt is signed afresh, as a provider does).
func Build(h Hook, k Keys, id string, f Fact, now time.Time) (Request, error) {
	switch h.Provider {
	case Resend:
		return resendEvent(h, k, id, f, now)
	case SendGrid:
		return sendgridEvent(h, k, id, f, now)
	case Mailgun:
		return mailgunEvent(h, k, id, f, now)
	case Postmark:
		return postmarkEvent(h, id, f)
	}
	return Request{}, errors.New("webhooks: unknown provider")
}

func jsonRequest(url string, body any) (Request, error) {
	b, err := json.Marshal(body)
	return Request{URL: url, Header: map[string]string{"Content-Type": "application/json"}, Body: b}, err
}

// recipients is who a fact concerns: its recipient, else the send's.
func recipients(f Fact) []string {
	if f.Recipient != "" {
		return []string{f.Recipient}
	}
	return f.To
}

// reported is who a provider that reports per recipient reports a fact
// for: each recipient it concerns, except an open or a click, which is
// the agent's, one reader: the first recipient's.
func reported(f Fact) []string {
	rs := recipients(f)
	if (f.Kind == Opened || f.Kind == Clicked) && len(rs) > 1 {
		return rs[:1]
	}
	return rs
}

// first is the first recipient a fact concerns ("" if none).
func first(f Fact) string {
	if rs := recipients(f); len(rs) > 0 {
		return rs[0]
	}
	return ""
}

// resendTags are Resend's tags of a send as its webhook reports them, an
// object of name to value (from the stored message's X-Resend-Tag
// name=value headers).
func resendTags(f Fact) map[string]string {
	out := map[string]string{}
	for _, v := range tagValues(f, resendTag) {
		name, value, _ := strings.Cut(v, "=")
		out[name] = value
	}
	return out
}

// The agent's reader as an open's or a click's event names it: its
// inbox, on the plane's host.
const (
	readerIP    = "127.0.0.1"
	readerAgent = "mailplane inbox"
)

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// Resend (Svix): svix-id, svix-timestamp and svix-signature "v1,"+base64
// HMAC-SHA256 of id.timestamp.body keyed by the decoded whsec_ secret.
func resendEvent(h Hook, k Keys, id string, f Fact, now time.Time) (Request, error) {
	data := map[string]any{"email_id": f.EmailID, "created_at": stamp(f.Time), "from": f.From, "to": recipients(f), "subject": f.Subject, "tags": resendTags(f)}
	switch f.Kind {
	case Bounced:
		data["bounce"] = map[string]string{"type": "Permanent", "subType": "General", "message": "The recipient's mail server permanently rejected the email (simulated by mailplane)."}
	case Clicked:
		data["click"] = map[string]string{"link": f.URL, "timestamp": stamp(f.Time), "ipAddress": readerIP, "userAgent": readerAgent}
	}
	r, err := jsonRequest(h.URL, map[string]any{"type": "email." + f.Kind, "created_at": stamp(now), "data": data})
	if err != nil {
		return r, err
	}
	key, err := resendKey(k.ResendSecret)
	if err != nil {
		return r, err
	}
	msgID, ts := "msg_"+id, strconv.FormatInt(now.Unix(), 10)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msgID + "." + ts + "."))
	m.Write(r.Body)
	r.Header["svix-id"], r.Header["svix-timestamp"] = msgID, ts
	r.Header["svix-signature"] = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	return r, nil
}

// sendgridEvents are SendGrid's names of each kind.
var sendgridEvents = map[string]string{Sent: "processed", Delivered: "delivered", Opened: "open", Clicked: "click", Bounced: "bounce", Complained: "spamreport"}

// SendGrid: a JSON list of events, one per recipient, signed with ECDSA
// P-256 over SHA-256 of timestamp+body (X-Twilio-Email-Event-Webhook-*).
func sendgridEvent(h Hook, k Keys, id string, f Fact, now time.Time) (Request, error) {
	var events []map[string]any
	for i, to := range reported(f) {
		e := map[string]any{"email": to, "timestamp": f.Time.Unix(), "smtp-id": "<" + f.EmailID + ">", "event": sendgridEvents[f.Kind],
			"category": []string{}, "sg_event_id": id, "sg_message_id": f.EmailID}
		if i > 0 {
			e["sg_event_id"] = id + "-" + strconv.Itoa(i)
		}
		switch f.Kind {
		case Delivered:
			e["response"], e["ip"], e["tls"] = "250 2.0.0 OK (mailplane)", readerIP, 0
		case Bounced:
			e["type"], e["reason"], e["status"] = "bounce", "550 5.1.1 The email account does not exist (simulated by mailplane)", "5.1.1"
		case Opened:
			e["useragent"], e["ip"], e["sg_machine_open"] = readerAgent, readerIP, false
		case Clicked:
			e["url"], e["useragent"], e["ip"] = f.URL, readerAgent, readerIP
		}
		events = append(events, e)
	}
	r, err := jsonRequest(h.URL, events)
	if err != nil {
		return r, err
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sum := sha256.Sum256(append([]byte(ts), r.Body...))
	sig, err := ecdsa.SignASN1(rand.Reader, k.SendGrid, sum[:])
	if err != nil {
		return r, err
	}
	r.Header["X-Twilio-Email-Event-Webhook-Signature"] = base64.StdEncoding.EncodeToString(sig)
	r.Header["X-Twilio-Email-Event-Webhook-Timestamp"] = ts
	return r, nil
}

// mailgunEvents are Mailgun's names of each kind.
var mailgunEvents = map[string]string{Sent: "accepted", Delivered: "delivered", Opened: "opened", Clicked: "clicked", Bounced: "failed", Complained: "complained"}

// Mailgun: {"signature": {timestamp, token, signature: hex HMAC-SHA256 of
// timestamp+token keyed by the signing key}, "event-data": {…}}, one per
// POST and recipient (PerPost made a fact of each). The message id is the
// send's id at its sender's domain, as Mailgun's answer names it; tags
// and user-variables are the send's o:tag and v: variables.
func mailgunEvent(h Hook, k Keys, id string, f Fact, now time.Time) (Request, error) {
	to := first(f)
	domain := "mailplane.local"
	if at := strings.LastIndexByte(f.From, '@'); at >= 0 {
		domain = f.From[at+1:]
	}
	ev := map[string]any{"event": mailgunEvents[f.Kind], "id": id, "timestamp": float64(f.Time.UnixMilli()) / 1000, "recipient": to,
		"message":        map[string]any{"headers": map[string]string{"message-id": f.EmailID + "@" + domain, "from": f.From, "to": to, "subject": f.Subject}},
		"tags":           append([]string{}, tagValues(f, mailgunTag)...),
		"user-variables": mailgunVariablesOf(f)}
	ev["log-level"] = "info"
	if at := strings.LastIndexByte(to, '@'); at >= 0 {
		ev["recipient-domain"] = to[at+1:]
	}
	switch f.Kind {
	case Sent, Delivered:
		ev["envelope"] = map[string]string{"sender": f.From, "targets": to, "transport": "smtp"}
		ev["flags"] = map[string]bool{"is-authenticated": true, "is-test-mode": false}
		if f.Kind == Delivered {
			ev["delivery-status"] = map[string]any{"code": 250, "message": "OK", "description": "", "tls": false}
		}
	case Bounced:
		ev["severity"], ev["reason"], ev["log-level"] = "permanent", "bounce", "error"
		ev["delivery-status"] = map[string]any{"code": 550, "message": "5.1.1 The email account does not exist (simulated by mailplane)"}
	case Complained:
		ev["log-level"] = "warn"
	case Opened:
		ev["ip"], ev["client-info"] = readerIP, map[string]string{"user-agent": readerAgent, "client-type": "browser"}
	case Clicked:
		ev["url"], ev["ip"], ev["client-info"] = f.URL, readerIP, map[string]string{"user-agent": readerAgent, "client-type": "browser"}
	}
	token := make([]byte, 25)
	rand.Read(token)
	tok, ts := hex.EncodeToString(token), strconv.FormatInt(now.Unix(), 10)
	m := hmac.New(sha256.New, []byte(k.MailgunKey))
	m.Write([]byte(ts + tok))
	return jsonRequest(h.URL, map[string]any{
		"signature":  map[string]string{"timestamp": ts, "token": tok, "signature": hex.EncodeToString(m.Sum(nil))},
		"event-data": ev,
	})
}

// mailgunVariablesOf is the send's v: variables, the JSON object of its
// X-Mailgun-Variables header (none, or one that is not an object: {}).
func mailgunVariablesOf(f Fact) map[string]any {
	out := map[string]any{}
	if vs := tagValues(f, mailgunVariables); len(vs) > 0 {
		if json.Unmarshal([]byte(vs[0]), &out) != nil || out == nil {
			out = map[string]any{}
		}
	}
	return out
}

// postmarkRecords are Postmark's RecordType of each kind (it reports no
// "sent").
var postmarkRecords = map[string]string{Delivered: "Delivery", Opened: "Open", Clicked: "Click", Bounced: "Bounce", Complained: "SpamComplaint"}

// Postmark: one event per POST and recipient (PerPost) by RecordType,
// unsigned: the URL's Basic credentials, which the client sends, are what
// the site checks. Tag and Metadata are the send's.
func postmarkEvent(h Hook, id string, f Fact) (Request, error) {
	rt, ok := postmarkRecords[f.Kind]
	if !ok {
		return Request{}, ErrNoEvent
	}
	to := first(f)
	at := f.Time.UTC().Format(time.RFC3339)
	tag, meta := "", map[string]string{}
	for _, t := range f.Tags {
		switch {
		case strings.EqualFold(t.Name, postmarkTag):
			tag = t.Value
		case len(t.Name) > len(postmarkMetadata) && strings.EqualFold(t.Name[:len(postmarkMetadata)], postmarkMetadata):
			meta[t.Name[len(postmarkMetadata):]] = t.Value
		}
	}
	ev := map[string]any{"RecordType": rt, "MessageID": f.EmailID, "Recipient": to, "MessageStream": "outbound", "Tag": tag, "Metadata": meta}
	switch f.Kind {
	case Delivered:
		ev["DeliveredAt"], ev["Details"] = at, "Test delivery (mailplane)"
	case Opened:
		ev["ReceivedAt"], ev["FirstOpen"], ev["UserAgent"], ev["Platform"] = at, true, readerAgent, "WebMail"
	case Clicked:
		ev["ReceivedAt"], ev["OriginalLink"], ev["ClickLocation"], ev["UserAgent"], ev["Platform"] = at, f.URL, "HTML", readerAgent, "WebMail"
	case Bounced:
		ev["BouncedAt"], ev["Type"], ev["TypeCode"], ev["Email"], ev["Inactive"] = at, "HardBounce", 1, to, true
		ev["ID"], ev["Description"] = bounceNumber(id), "The server was unable to deliver your message (simulated by mailplane)."
		ev["Name"], ev["Details"], ev["From"], ev["Subject"], ev["DumpAvailable"], ev["CanActivate"] = "Hard bounce", "550 5.1.1 (simulated by mailplane)", f.From, f.Subject, false, true
	case Complained:
		ev["BouncedAt"], ev["Type"], ev["TypeCode"], ev["Email"] = at, "SpamComplaint", 512, to
		ev["ID"] = bounceNumber(id)
		ev["Name"], ev["From"], ev["Subject"], ev["Inactive"], ev["DumpAvailable"], ev["CanActivate"] = "Spam complaint", f.From, f.Subject, true, false, false
	}
	return jsonRequest(h.URL, ev)
}

// bounceNumber is Postmark's numeric bounce id, from the event id.
func bounceNumber(id string) int64 {
	b, _ := hex.DecodeString(id[:12])
	var n int64
	for _, c := range b {
		n = n<<8 | int64(c)
	}
	return n
}
