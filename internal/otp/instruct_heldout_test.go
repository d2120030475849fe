package otp

import "testing"

// Held-out cases for instruct.go, written after its rules and not used to
// tune them: they measure whether the rules are general. A case the rules
// miss is listed in heldOutMisses with what it shows, not fixed by a rule
// written for it; a listed case that starts to pass fails the test, so
// that the list stays true.
var heldOutCases = []struct{ text, otp string }{
	{"Almost there! Key in 730518 on the verification screen.", "730518"},
	{"Please copy 604211 into the field shown in your browser to complete registration.", "604211"},
	{"To log in, type 915372 in the window that asked for it.", "915372"},
	{"Tippe 384920 in das Feld auf der Anmeldeseite, um die Anmeldung abzuschließen.", "384920"},
	{"Copiez 551907 dans l'application pour vérifier votre adresse.", "551907"},
	{"Escribe 662018 en la página para confirmar tu cuenta.", "662018"},
	{"Cole 774129 na tela de login para entrar.", "774129"},
	{"Digita 885230 nella pagina per confermare l'accesso.", "885230"},
	{"Typ 996341 in het veld om je e-mailadres te bevestigen.", "996341"},
	{"Скопируйте 107452 и вставьте на странице входа, чтобы войти.", "107452"},
	{"请在页面中输入 218563 以完成验证。", "218563"},
	{"Paste the following into the app to unlock your account:\n\n  329674\n", "329674"},
	{"Enter this in the browser tab you left open:\n440785", "440785"},
	// Voided and replaced codes.
	{"Your code is 135790.\nCorrection: the code above is void. Please use 246801 instead.", "246801"},
	{"We sent you 357913 earlier; it has been revoked. Your code is now 468024.", "468024"},
	{"Use 579135 instead of 680246, which no longer works.", "579135"},
	{"Votre code est 791357. Ce code a été remplacé : utilisez 802468.", "802468"},
	{"Tu código es 913579. Ese código ya no es válido; usa 024680 en su lugar.", "024680"},
	// Not codes, however they are asked for.
	{"Enter your ZIP code 94107 in the form to see stores near you.", ""},
	{"Use the app to continue. Your booking 73120 is confirmed.", ""},
	{"Type 1999 into the search box on our site to see the collection.", ""},
}

// heldOutMisses are the held-out cases the rules get wrong, by text, with
// what the miss shows.
var heldOutMisses = map[string]string{
	"Use 579135 instead of 680246, which no longer works.": "a void phrase after a second number is read as voiding the first too",
	"Votre code est 791357. Ce code a été remplacé : utilisez 802468.": "a colon joins the voiding sentence to the new code's, " +
		"so the new code is voided and the old one is not",
	"Tu código es 913579. Ese código ya no es válido; usa 024680 en su lugar.": "\"en su lugar\" is not among the words for instead, " +
		"and \"usa\" alone is no instruction",
	"Enter your ZIP code 94107 in the form to see stores near you.": "\"ZIP code\" in two words reads as a code word " +
		"(codes.go's rule, which instruct.go leaves alone)",
}

func TestInstructionHeldOut(t *testing.T) {
	passed := 0
	for _, c := range heldOutCases {
		got := Extract("", c.text, "").OTP
		why, known := heldOutMisses[c.text]
		switch {
		case got == c.otp && known:
			t.Errorf("%q now passes: take it off heldOutMisses (%s)", c.text, why)
		case got != c.otp && !known:
			t.Errorf("%q: otp %q, want %q", c.text, got, c.otp)
		case got == c.otp:
			passed++
		}
	}
	t.Logf("held out: %d of %d pass", passed, len(heldOutCases))
}
