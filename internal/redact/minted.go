package redact

import "strings"

// Minted returns s with only the secrets this project mints (grants,
// 64-hex capabilities and tokens, 43-character inbox tokens) replaced by
// Marker: for text a person must read as it was written, such as mail
// shown to the operator, where Text would also hide "code: 123456".
func Minted(s string) string {
	return minted.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) == 43 || strings.HasPrefix(m, "mpg_") || len(m) == 64 {
			return Marker
		}
		return m
	})
}
