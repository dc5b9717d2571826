package persist

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Store-platform credentials (access tokens, app client secrets, webhook signing secrets) are
// sealed with AES-256-GCM before they are written: a copy of the data dir alone does not give
// them away. node loads the key: GATEWAY_SECRET_KEY (ParseSecretKey), else a key file in the
// data dir created on first use.
//
// ---- schema: sealed values ----
//
//	"v1:" + base64(nonce || AES-256-GCM ciphertext)   additional data: "v1:"; "" stays ""
//
// Sealed values are fields of records (Store.AccessToken, ClientSecret, WebhookSecret;
// OAuthNonce.ClientSecret), not keys of their own.

const (
	secretKeySize = 32
	sealedPrefix  = "v1:" // format version of a sealed value: "v1:" + base64(nonce || ciphertext)
)

// ParseSecretKey reads a 32-byte key written as base64 (standard or URL alphabet, padded or
// not) or as 64 hex digits.
func ParseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*secretKeySize {
		if k, err := hex.DecodeString(s); err == nil {
			return k, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == secretKeySize {
			return k, nil
		}
	}
	return nil, errors.New("the secret key must be 32 bytes, written as base64 or 64 hex digits")
}

// Sealer seals and opens secrets. Its key is loaded on first use (sealing a first store
// credential, or opening one at boot), so a gateway without stores never creates a key file.
// Safe for concurrent use.
type Sealer struct {
	key     []byte // from the configuration, or nil
	keyFile string // used when key is nil; "" = an in-memory key (tests)

	once sync.Once
	aead cipher.AEAD
	err  error
}

// NewSealer returns a sealer with key (32 bytes), or, when key is nil, the key in keyFile
// (created on first use); both empty: a key that lives as long as the process (tests).
func NewSealer(key []byte, keyFile string) *Sealer {
	return &Sealer{key: key, keyFile: keyFile}
}

func (s *Sealer) init() (cipher.AEAD, error) {
	s.once.Do(func() {
		key := s.key
		if key == nil {
			key, s.err = loadKeyFile(s.keyFile)
			if s.err != nil {
				return
			}
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			s.err = fmt.Errorf("secret key: %w", err)
			return
		}
		s.aead, s.err = cipher.NewGCM(block)
	})
	return s.aead, s.err
}

// loadKeyFile reads the key file, creating it (mode 0600, random key) when it does not exist.
func loadKeyFile(path string) ([]byte, error) {
	if path == "" {
		key := make([]byte, secretKeySize)
		_, _ = rand.Read(key)
		return key, nil
	}
	if data, err := os.ReadFile(path); err == nil {
		key, err := ParseSecretKey(string(data))
		if err != nil {
			return nil, fmt.Errorf("secret key file %s: %w", path, err)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	key := make([]byte, secretKeySize)
	_, _ = rand.Read(key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	// O_EXCL: two processes on one data dir must not each write their own key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return loadKeyFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	_, werr := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	return key, nil
}

// Seal encrypts a secret; "" stays "" (nothing to hide, and "no secret" stays visible).
func (s *Sealer) Seal(plain string) (string, error) {
	if plain == "" {
		return "", nil
	}
	aead, err := s.init()
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	_, _ = rand.Read(nonce)
	out := aead.Seal(nonce, nonce, []byte(plain), []byte(sealedPrefix))
	return sealedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// Open decrypts what Seal produced.
func (s *Sealer) Open(sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	body, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return "", errors.New("sealed secret: unknown format")
	}
	aead, err := s.init()
	if err != nil {
		return "", err
	}
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", errors.New("sealed secret: malformed")
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(sealedPrefix))
	if err != nil {
		return "", errors.New("sealed secret: does not open with this key (was GATEWAY_SECRET_KEY changed?)")
	}
	return string(plain), nil
}
