// Package plant checks an evaluator's request to plant a message
// (trial.plant) and composes the message: plain mail, shaped as the
// writer shapes a candidate's, so that nothing the agent can see gives it
// away. Its label travels beside it (mailmsg.LabelHeader), added by the
// plane after the scrub.
package plant

import (
	"bytes"
	"encoding/base64"
	"mime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// validLabel says whether s is what a label may be: a short word the
// trail can hold as it is, 1 to 64 letters, digits and . _ : -, starting
// with a letter or digit (^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$, by a loop:
// ident.Word says why).
func validLabel(s string) bool {
	return ident.Word(s[:min(len(s), 1)], 1, 1, "") && ident.Word(s[1:], 0, 63, "._:-")
}

// maxSubjectRunes bounds a subject, as the writer's does (RFC 5322's line).
const maxSubjectRunes = 998

// Message is a checked request: the envelope and the composed message.
type Message struct {
	From  string // the envelope sender, a bare address
	To    []string
	Label string
	Raw   []byte
}

// Check checks req and composes its message. sender is the address used
// when req names none; to the recipients used when req names none. Every
// refusal is a bad_request that names the field.
func Check(req *rpc.PlantRequest, sender string, to []string, now time.Time) (Message, error) {
	if !validLabel(req.Label) {
		return Message{}, rpc.Errorf(rpc.CodeBadRequest, "label: want 1 to 64 of A-Z a-z 0-9 . _ : - (starting with a letter or digit)")
	}
	from := req.From
	if from == "" {
		from = sender
	}
	name, addr := mailmsg.Sender(from)
	if !mailmsg.ValidAddress(addr) || strings.ContainsAny(from, "\r\n") {
		return Message{}, rpc.Errorf(rpc.CodeBadRequest, "from: want an address, or Name <address>")
	}
	if len(req.To) > 0 {
		to = req.To
	}
	if len(to) == 0 || len(to) > limits.Recipients {
		return Message{}, rpc.Errorf(rpc.CodeBadRequest, "to: want 1 to %d addresses (none is known yet: name them)", limits.Recipients)
	}
	for _, r := range to {
		if !mailmsg.ValidAddress(r) {
			return Message{}, rpc.Errorf(rpc.CodeBadRequest, "to: want bare addresses")
		}
	}
	if !utf8.ValidString(req.Subject) || strings.ContainsAny(req.Subject, "\r\n") || utf8.RuneCountInString(req.Subject) > maxSubjectRunes {
		return Message{}, rpc.Errorf(rpc.CodeBadRequest, "subject: want one line of UTF-8, at most %d characters", maxSubjectRunes)
	}
	if req.Text == "" && req.HTML == "" || !utf8.ValidString(req.Text) || !utf8.ValidString(req.HTML) {
		return Message{}, rpc.Errorf(rpc.CodeBadRequest, "text or html: want UTF-8, at least one of them")
	}
	raw := compose(mailmsg.FromHeader(name, addr), to, req.Subject, req.Text, req.HTML, now)
	if len(raw) > limits.MessageBytes {
		return Message{}, rpc.Errorf(rpc.CodeMessageTooLarge, "the message exceeds %d bytes", limits.MessageBytes)
	}
	return Message{From: addr, To: append([]string(nil), to...), Label: req.Label, Raw: raw}, nil
}

// compose writes the message: the writer's headers, and a text part, an
// HTML part, or both as alternatives, each base64 (any text is safe).
func compose(from string, to []string, subject, text, html string, now time.Time) []byte {
	var b bytes.Buffer
	hdr := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	hdr("From", from)
	hdr("To", strings.Join(to, ", "))
	hdr("Subject", mime.QEncoding.Encode("utf-8", subject))
	hdr("Date", now.Format(time.RFC1123Z))
	hdr("Message-ID", "<"+ident.UUID()+"@websitebench.local>")
	hdr("MIME-Version", "1.0")
	switch {
	case html == "":
		part(&b, "text/plain", text)
	case text == "":
		part(&b, "text/html", html)
	default:
		boundary := "=_" + ident.Hex(16)
		hdr("Content-Type", `multipart/alternative; boundary="`+boundary+`"`)
		b.WriteString("\r\n")
		for _, p := range []struct{ mt, body string }{{"text/plain", text}, {"text/html", html}} {
			b.WriteString("--" + boundary + "\r\n")
			part(&b, p.mt, p.body)
			b.WriteString("\r\n")
		}
		b.WriteString("--" + boundary + "--\r\n")
	}
	return b.Bytes()
}

// part writes one body part: its headers, the empty line, its base64.
func part(b *bytes.Buffer, mediaType, body string) {
	b.WriteString("Content-Type: " + mediaType + "; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString([]byte(body))
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n")
}
