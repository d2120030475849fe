package webhooks

import "strings"

// What a provider's test recipients stand for: Resend's
// delivered@/bounced@/complained@resend.dev (with any +label) and SES's
// mailbox simulator, success@/bounce@/complaint@simulator.amazonses.com.
const (
	SimDelivered = "delivered"
	SimBounce    = "bounce"
	SimComplain  = "complain"
)

var simulators = map[string]map[string]string{
	"resend.dev":              {"delivered": SimDelivered, "bounced": SimBounce, "complained": SimComplain},
	"simulator.amazonses.com": {"success": SimDelivered, "bounce": SimBounce, "complaint": SimComplain},
}

// Simulated is what addr stands for if it is a provider's test
// recipient, else "".
func Simulated(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return ""
	}
	local, domain := strings.ToLower(addr[:at]), strings.ToLower(addr[at+1:])
	if plus := strings.IndexByte(local, '+'); plus >= 0 {
		local = local[:plus]
	}
	return simulators[domain][local]
}

// AllBounce reports whether every one of to is a bounce simulator: such a
// send is accepted and never shown.
func AllBounce(to []string) bool {
	for _, a := range to {
		if Simulated(a) != SimBounce {
			return false
		}
	}
	return len(to) > 0
}
