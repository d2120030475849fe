package inbox

import "github.com/websitebench/mailplane/internal/ident"

// ValidToken says whether token has an inbox token's syntax: 32 to 256
// URL-safe characters (A-Z a-z 0-9 . _ ~ -), so that the token URL needs
// no escaping, and long enough to be a secret. Minted tokens are 43
// characters of base64url. A one-trial inbox checks its token file with it
// at start.
func ValidToken(token string) bool { return ident.Word(token, 32, 256, "._~-") }
