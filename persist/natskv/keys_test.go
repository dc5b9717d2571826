package natskv

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// encodeKey is key's table token and id tokens (joined by "."), as appendSubject writes them
// into a subject, or ErrInvalid when they exceed MaxEncodedKey.
func encodeKey(key []byte) (table, id []byte, err error) {
	b, err := appendSubject(nil, "", "", key) // ".<table>..<id>": no token holds a "."
	if err != nil {
		return nil, nil, err
	}
	b = b[1:]
	i := bytes.IndexByte(b, '.')
	return b[:i], b[i+2:], nil
}

// A subject is the prefix, the table token, the partition and the id tokens.
func TestSubjectLayout(t *testing.T) {
	s := &Store{prefix: "gw"}
	for key, want := range map[string]string{
		"outbox_status/u1/m-1": "gw.outbox_status.7.u1.m,2D1",
		"account":              "gw.account!.7.!",
		"t/":                   "gw.t.7.,",
		"t//x":                 "gw.t.7.,~.x",
	} {
		got, err := s.subject("7", []byte(key))
		if err != nil || got != want {
			t.Errorf("subject(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
	if _, err := s.subject("7", bytes.Repeat([]byte("k"), MaxEncodedKey-2)); err == nil {
		t.Error("a key one letter too long was accepted")
	}
}

func encoded(t *testing.T, key []byte) string {
	t.Helper()
	table, id, err := encodeKey(key)
	if err != nil {
		t.Fatalf("encodeKey(%q): %v", key, err)
	}
	return string(table) + "." + string(id)
}

// The encoding keeps order and is reversible: for random keys over a small alphabet that hits
// every escape class, empty parts and "/" runs, comparing encodings gives the keys' order, and
// decoding gives the key back. Every token is a literal NATS subject token.
func TestKeyEncodingOrderAndRoundTrip(t *testing.T) {
	alphabet := []byte{0, 1, ',', '-', '.', '/', '/', '0', '9', ':', '@', 'A', 'Z', '[', '^', '_', '`', 'a', 'z', '{', '~', 0x7f, 0xc3, 0xff}
	rng := rand.New(rand.NewPCG(7, 9))
	key := func() []byte {
		k := make([]byte, 1+rng.IntN(7))
		for i := range k {
			k[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return k
	}
	keys := [][]byte{[]byte("abc"), []byte("abc/"), []byte("abc//"), []byte("abc/\x00"), []byte("abc\x00"), []byte("/"), []byte("//x")}
	for range 4000 {
		keys = append(keys, key())
	}
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	keys = append(keys, every)
	for i, a := range keys {
		ea := encoded(t, a)
		for _, tok := range strings.Split(ea, ".") {
			if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
				t.Fatalf("key %q: token %q is not a literal subject token (%q)", a, tok, ea)
			}
		}
		tokens := strings.Split(ea, ".")
		got, err := decodeKey(append([]string{tokens[0], "0"}, tokens[1:]...))
		if err != nil || !bytes.Equal(got, a) {
			t.Fatalf("decode(encode(%q)) = %q, %v", a, got, err)
		}
		b := keys[(i*7919+13)%len(keys)]
		if want, gotCmp := bytes.Compare(a, b), strings.Compare(ea, encoded(t, b)); want != gotCmp {
			t.Fatalf("order of %q and %q is %d, their encodings %q and %q compare %d", a, b, want, ea, encoded(t, b), gotCmp)
		}
	}
}

func TestKeyEncodingLimit(t *testing.T) {
	if _, _, err := encodeKey(bytes.Repeat([]byte("k"), MaxEncodedKey-3)); err != nil {
		t.Fatalf("longest key of letters: %v", err)
	}
	if _, _, err := encodeKey(bytes.Repeat([]byte("k"), MaxEncodedKey-2)); err == nil {
		t.Fatal("a key one letter too long was accepted")
	}
	// The gateway's longest key: an Idempotency-Key of 255 bytes that all need escaping.
	idem := append([]byte("idem/k_0123456789abcdef0123/"), bytes.Repeat([]byte{0xff}, 255)...)
	if _, _, err := encodeKey(idem); err != nil {
		t.Fatalf("idem key: %v", err)
	}
}

// A record's Nats-TTL: whole seconds, rounded up, with their unit.
func TestTTLValue(t *testing.T) {
	for ttl, want := range map[time.Duration]string{
		time.Second:                       "1s",
		1500 * time.Millisecond:           "2s",
		time.Millisecond:                  "1s",
		14 * 24 * time.Hour:               "1209600s",
		14*24*time.Hour + time.Nanosecond: "1209601s",
	} {
		for range 2 { // formatted, then from the cache
			if got := ttlValue(ttl); got != want {
				t.Errorf("ttlValue(%v) = %q, want %q", ttl, got, want)
			}
		}
	}
}
