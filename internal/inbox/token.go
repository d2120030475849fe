package inbox

import "regexp"

// tokenSyntax is what an inbox token may be: URL-safe characters only, so
// that the token URL needs no escaping, and long enough to be a secret.
// Minted tokens are 43 characters of base64url.
var tokenSyntax = regexp.MustCompile(`^[A-Za-z0-9._~-]{32,256}$`)

// ValidToken says whether token has an inbox token's syntax: a one-trial
// inbox checks its token file with it at start.
func ValidToken(token string) bool { return tokenSyntax.MatchString(token) }
