package limits

import "testing"

// The limits must keep their order: a header block or a URL never exceeds
// the message that carries it, and the linked text holds at least one URL.
func TestOrder(t *testing.T) {
	for _, c := range []struct {
		name       string
		small, big int
	}{
		{"HeaderBytes ≤ MessageBytes", HeaderBytes, MessageBytes},
		{"URLBytes ≤ LinkifyBytes", URLBytes, LinkifyBytes},
		{"LinkifyBytes ≤ MessageBytes", LinkifyBytes, MessageBytes},
		{"MessageBytes ≤ PreauthBytes (one unauthenticated message fits)", MessageBytes, PreauthBytes},
		{"4×MessageBytes ≤ TrialBodyBytes (a trial's largest batch fits)", 4 * MessageBytes, TrialBodyBytes},
		{"MessageBytes ≤ FrameImageBytes (every inline image shows once)", MessageBytes, FrameImageBytes},
		{"HeaderLines ≤ HeaderBytes/2 (a line is at least \"\\r\\n\")", HeaderLines, HeaderBytes / 2},
	} {
		if c.small > c.big || c.small <= 0 {
			t.Errorf("%s: %d, %d", c.name, c.small, c.big)
		}
	}
}
