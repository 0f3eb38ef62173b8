package hub

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// A place is the door's "come back at" given to one runner
// (protocol.PlaceHeader): the time its place in the schedule comes, until
// when the hub honours it, and a MAC over both and the hash of the runner's
// token (what the door knows of a dial before it is authenticated). It is
// no credential (the runner authenticates with its token on every dial,
// and a place may be logged): the MAC only keeps a runner from writing
// itself an earlier place or taking another runner's, and the hub keeps no
// state per place given, so neither forged nor stale places can grow it. The
// key is drawn at each start: a restarted hub honours none of its
// predecessor's places, and the runner simply gets a new one.
type placeKey [32]byte

func newPlaceKey() placeKey {
	var k placeKey
	rand.Read(k[:]) // never returns an error (crypto/rand)
	return k
}

// placeMax bounds a place header read: longer is not one of ours.
const placeMax = 80

// sign is the place at, honoured until until, for runner (its token's
// hash).
func (k *placeKey) sign(runner string, at, until time.Time) string {
	body := strconv.FormatInt(at.UnixMilli(), 10) + "." + strconv.FormatInt(until.UnixMilli(), 10)
	return body + "." + k.mac(runner, body)
}

// open reads a place runner brought: its time, or ok false for none, a
// forged or another runner's, or one past its honour.
func (k *placeKey) open(runner, place string, now time.Time) (at time.Time, ok bool) {
	if place == "" || len(place) > placeMax {
		return time.Time{}, false
	}
	i := strings.LastIndexByte(place, '.')
	if i < 0 || !hmac.Equal([]byte(place[i+1:]), []byte(k.mac(runner, place[:i]))) {
		return time.Time{}, false
	}
	ats, untils, _ := strings.Cut(place[:i], ".")
	atMs, err1 := strconv.ParseInt(ats, 10, 64)
	untilMs, err2 := strconv.ParseInt(untils, 10, 64)
	if err1 != nil || err2 != nil || now.After(time.UnixMilli(untilMs)) {
		return time.Time{}, false
	}
	return time.UnixMilli(atMs), true
}

func (k *placeKey) mac(runner, body string) string {
	m := hmac.New(sha256.New, k[:])
	m.Write([]byte(runner))
	m.Write([]byte{0})
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:12])
}
