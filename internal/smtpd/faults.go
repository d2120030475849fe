package smtpd

import (
	"time"

	"github.com/emersion/go-smtp"

	"github.com/websitebench/mailplane/internal/faults"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Faults on purpose: when a rule of the trial's schedule matched a
// message, the plane's answer says what to do (rpc.SendResponse.Fault).
// A refusal is the rule's SMTP code with its enhanced status code (421
// then closes the connection, as RFC 5321 §3.8 has it); a timeout holds
// the reply to DATA for the rule's seconds and then closes the connection
// without one. delay, duplicate and drop are answered 250, as any
// accepted message: the client cannot tell.

// faultReplies are the refusals a rule may name (RFC 3463's enhanced
// codes).
var faultReplies = map[int]*smtp.SMTPError{
	421: {Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "Service not available, closing transmission channel"},
	450: {Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 1}, Message: "Mailbox unavailable; try again later"},
	451: errLocal,
	452: {Code: 452, EnhancedCode: smtp.EnhancedCode{4, 3, 1}, Message: "Insufficient system storage"},
	550: {Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Message refused"},
	554: {Code: 554, EnhancedCode: smtp.EnhancedCode{5, 3, 0}, Message: "Transaction failed"},
}

// fault answers a message the plane faulted with refuse or timeout: the
// reply (nil for any other fault, which is answered as accepted).
func (s *session) fault(f *rpc.Fault) *smtp.SMTPError {
	switch {
	case f == nil:
		return nil
	case f.Do == faults.Timeout:
		t := time.NewTimer(time.Duration(f.Seconds) * time.Second)
		select {
		case <-t.C:
		case <-s.srv.closing: // the listener closes: so does the hold
		}
		t.Stop()
		s.c.Conn().Close() // no reply: the client sees the connection drop
		return errIncomplete
	case f.Do == faults.Refuse:
		reply := faultReplies[f.SMTPCode]
		if reply == nil {
			reply = errLocal
		}
		if reply.Code == 421 {
			s.conn.closeAfterReply()
		}
		return reply
	}
	return nil
}
