package smtpd

import "testing"

func TestFinalReplies(t *testing.T) {
	for in, want := range map[string]int{
		"250 2.0.0 OK\r\n": 1,
		"250-Hello x\r\n":  0,
		"250-Hello x\r\n250-PIPELINING\r\n250 SIZE 1\r\n": 1,
		"220 websitebench.local ESMTP\r\n":                0,
		"354 Go ahead\r\n":                                0,
		"550 5.7.1 no\r\n452 4.5.3 too many\r\n":          2,
		"":                                                0,
		"25":                                              0,
		"abc def\r\n":                                     0,
	} {
		if got := finalReplies([]byte(in)); got != want {
			t.Errorf("%q: %d, want %d", in, got, want)
		}
	}
}
