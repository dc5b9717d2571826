package persist

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

func TestParseSecretKey(t *testing.T) {
	key := bytes.Repeat([]byte{0xab}, 32)
	for _, s := range []string{
		hex.EncodeToString(key), base64.StdEncoding.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key),
		" " + base64.StdEncoding.EncodeToString(key) + "\n",
	} {
		if got, err := ParseSecretKey(s); err != nil || !bytes.Equal(got, key) {
			t.Errorf("ParseSecretKey(%q) = %x, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "short", base64.StdEncoding.EncodeToString(key[:16]), strings.Repeat("z", 64)} {
		if _, err := ParseSecretKey(s); err == nil {
			t.Errorf("ParseSecretKey(%q) accepted", s)
		}
	}
	sl := NewSealer(key, "")
	sealed, err := sl.Seal("top secret")
	if err != nil || !strings.HasPrefix(sealed, sealedPrefix) || strings.Contains(sealed, "top secret") {
		t.Fatalf("seal: %q %v", sealed, err)
	}
	if plain, err := sl.Open(sealed); err != nil || plain != "top secret" {
		t.Fatalf("open: %q %v", plain, err)
	}
	tampered := sealed[:len(sealed)-2] + "AA"
	if _, err := sl.Open(tampered); err == nil {
		t.Fatal("a tampered secret opened")
	}
}
