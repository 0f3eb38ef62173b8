// Package auth makes and checks bearer tokens. Only hashes are stored: a
// token is 32 random bytes, so a plain SHA-256 is enough (no password
// stretching is needed for high-entropy secrets).
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// Token prefixes make a leaked token recognisable (and greppable by scanners).
const (
	PrefixUser   = "drv_u_"
	PrefixRunner = "drv_r_"
	// PrefixRegistration: a fleet launch's single-use registration token.
	PrefixRegistration = "drv_g_"
)

// NewToken returns a fresh random token with the given prefix.
func NewToken(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// Hash returns the hex SHA-256 of a token, the only form the hub stores.
func Hash(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// ValidHash reports whether s looks like a Hash result.
func ValidHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// BearerToken extracts the token from an Authorization header value.
func BearerToken(header string) (string, error) {
	const p = "Bearer "
	if !strings.HasPrefix(header, p) {
		return "", fmt.Errorf("missing bearer token")
	}
	t := strings.TrimSpace(header[len(p):])
	if t == "" || len(t) > 256 {
		return "", fmt.Errorf("malformed bearer token")
	}
	return t, nil
}
