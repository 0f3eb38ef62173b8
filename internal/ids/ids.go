// Package ids makes short random identifiers that sort by creation time.
package ids

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"strings"
	"time"
)

var enc = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// New returns prefix + "-" + 16 characters: 40 bits of milliseconds then 40
// random bits, lower-case Crockford base32, so ids sort by creation time.
func New(prefix string) string {
	var b [10]byte
	ms := uint64(time.Now().UnixMilli())
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], ms)
	copy(b[:5], t[3:])
	_, _ = rand.Read(b[5:])
	return prefix + "-" + strings.ToLower(enc.EncodeToString(b[:]))
}

// Valid reports whether s could be an id with the given prefix.
func Valid(prefix, s string) bool {
	if !strings.HasPrefix(s, prefix+"-") || len(s) != len(prefix)+17 {
		return false
	}
	for _, c := range s[len(prefix)+1:] {
		if !strings.ContainsRune("0123456789abcdefghjkmnpqrstvwxyz", c) {
			return false
		}
	}
	return true
}
