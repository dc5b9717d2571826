package persist

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
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

// Without a configured key, the key file is made on first use (0600), read back by the next
// process, and a sealer with another key refuses to open (rather than returning garbage).
func TestSealerKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "secret.key")
	first := NewSealer(nil, path)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("key file made before first use: %v", err)
	}
	if s, err := first.Seal(""); s != "" || err != nil {
		t.Fatalf(`Seal("") = %q, %v; want "" without touching the key`, s, err)
	}
	sealed, err := first.Seal("shpat_secret")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if plain, err := NewSealer(nil, path).Open(sealed); err != nil || plain != "shpat_secret" {
		t.Fatalf("reopened with the key file: %q %v", plain, err)
	}
	if _, err := NewSealer(bytes.Repeat([]byte{1}, 32), "").Open(sealed); err == nil {
		t.Fatal("opened with another key")
	}
	if _, err := first.Open("v2:abc"); err == nil {
		t.Fatal("opened an unknown format")
	}
}
