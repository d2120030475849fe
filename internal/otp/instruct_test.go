package otp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
)

// The cases the rules of instruct.go were written against. The held-out
// cases, written after the rules and never used to tune them, are in
// instruct_heldout_test.go.
var instructionCases = []struct{ text, otp string }{
	// An instruction marks a code that no code word names.
	{"Type 482913 into the app to continue.", "482913"},
	{"Paste this into the sign-in page: 482913", "482913"},
	{"To finish signing in, enter 482913 on the page you came from.", "482913"},
	{"Copy 482913 and paste it in the box on the login screen.", "482913"},
	{"Type the number below into the app to continue:\n\n482913\n", "482913"},
	{"482913\n\nEnter this on the sign-in page to continue.", "482913"},
	{"482913 — type it into the app to finish.", "482913"},
	{"Gib 482913 in der App ein, um fortzufahren.", "482913"},
	{"Saisissez 482913 sur la page de connexion pour continuer.", "482913"},
	{"Introduce 482913 en la aplicación para continuar.", "482913"},
	{"Digite 482913 no aplicativo para continuar.", "482913"},
	{"Inserisci 482913 nell'app per continuare.", "482913"},
	{"Voer 482913 in op de inlogpagina om door te gaan.", "482913"},
	{"Введите 482913 в приложении, чтобы продолжить.", "482913"},
	{"在应用中输入 482913 以继续。", "482913"},
	// What is not a code stays not one, however it is asked for.
	{"Enter your order number 48291 on the tracking page.", ""},
	{"Use SAVE20 at checkout on our website.", ""},
	{"Enter 2025 in the year field to continue.", ""},
	{"Enter 4500 € in the form to continue.", ""},
	{"Call 5550123 from the app to continue.", ""},
	// A code the mail voids gives way to the one that stands.
	{"Your code is 111111.\nSorry, that code no longer works. Use 222222 instead.", "222222"},
	{"Ignore the code 111111 we sent before. Your code is 222222.", "222222"},
	{"Your new code 222222 replaces 111111.", "222222"},
	{"Code: 111111 (void). Code: 222222", "222222"},
	{"Your code is 111111. Update: the code above has been cancelled; your code is 222222.", "222222"},
	{"Der Code 111111 ist nicht mehr gültig. Dein neuer Code: 222222", "222222"},
	{"Your code is 222222. Do not use 111111, it was revoked.", "222222"},
	// Words of the usual footer void nothing.
	{"Your code is 482913.\nIf you did not request this code, you can ignore this email.", "482913"},
	{"Your code is 482913. This code expires in 10 minutes and can be used once.", "482913"},
}

func TestInstructionRules(t *testing.T) {
	for _, c := range instructionCases {
		if got := Extract("", c.text, "").OTP; got != c.otp {
			t.Errorf("%q: otp %q, want %q", c.text, got, c.otp)
		}
	}
}

// The rules read bounded windows: sentences of cues around every number,
// numbers before a voiding sentence, and long runs of cue words.
func TestInstructLinear(t *testing.T) {
	for _, c := range []struct {
		name string
		text func(int) string
		base int
	}{
		{"instructions", func(n int) string {
			var b strings.Builder
			for i := range n {
				fmt.Fprintf(&b, "Type %d into the app to continue. ", 100000+i)
			}
			return b.String()
		}, 2_000},
		{"voids", repeat("Your code is 111111. That code no longer works, it was revoked. "), 2_000},
		{"one sentence of cues", func(n int) string { return strings.Repeat("type paste app page continue ", n) + "482913" }, 30_000},
		{"lone numbers", repeat("482913\n\nEnter this on the page\n"), 2_500},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "Extract/"+c.name, func(n int) func() {
				text := c.text(n)
				return func() { Extract("", text, "") }
			}, c.base)
		})
	}
}
