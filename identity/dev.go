package identity

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	devKeyFile = "dev-idp.pem"
	devKeyBits = 2048
	defaultTTL = time.Hour
)

// Issuer mints dev ID tokens (iss DevIssuer, aud DevAudience) with the key in DATA/dev-idp.pem.
type Issuer struct {
	signer jose.Signer
	now    func() time.Time
}

// TokenRequest describes a dev token. TTL 0 means one hour.
type TokenRequest struct {
	UID, Role, Name, Email string
	TTL                    time.Duration
}

// NewDev loads DATA/dev-idp.pem (RSA private key, PKCS#8 or PKCS#1 PEM), creating it with mode
// 0600 when missing (and the data dir with 0700), and returns the dev verifier, which goes
// through the same go-oidc verifier as OIDC mode with a static key set, and the issuer.
func NewDev(dataDir string) (*Verifier, *Issuer, error) {
	key, err := loadOrCreateKey(filepath.Join(dataDir, devKeyFile))
	if err != nil {
		return nil, nil, err
	}
	return devFromKey(key)
}

// NewDevFromPEM is NewDev with the key given as PEM (a cluster keeps it in its store, so every
// node verifies the tokens any node's issuer mints).
func NewDevFromPEM(data []byte) (*Verifier, *Issuer, error) {
	key, err := parseKey("the dev issuer key", data)
	if err != nil {
		return nil, nil, err
	}
	return devFromKey(key)
}

// NewDevKeyPEM makes a dev issuer key, as PEM (PKCS#8).
func NewDevKeyPEM() ([]byte, error) {
	_, data, err := newDevKey()
	return data, err
}

// newDevKey makes a dev issuer key, and its PEM (PKCS#8).
func newDevKey() (*rsa.PrivateKey, []byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, devKeyBits)
	if err != nil {
		return nil, nil, fmt.Errorf("identity: generate dev key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("identity: encode dev key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func devFromKey(key *rsa.PrivateKey) (*Verifier, *Issuer, error) {
	pub := jose.JSONWebKey{Key: &key.PublicKey}
	thumb, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, nil, fmt.Errorf("identity: dev key thumbprint: %w", err)
	}
	// The RFC 7638 thumbprint is stable across restarts, so the kid is too.
	kid := base64.RawURLEncoding.EncodeToString(thumb)
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: string(jose.RS256)}},
		(&jose.SignerOptions{}).WithType("JWT"),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("identity: dev signer: %w", err)
	}
	v := newVerifier(DevIssuer,
		&oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{&key.PublicKey}},
		oidc.Config{ClientID: DevAudience, SupportedSigningAlgs: []string{oidc.RS256}},
		true)
	return v, &Issuer{signer: signer, now: time.Now}, nil
}

// Mint signs a dev ID token (RS256, kid set) with iss, aud, sub, iat, exp, auth_time, and
// name, email and role when set.
func (i *Issuer) Mint(r TokenRequest) (string, error) {
	if r.UID == "" {
		return "", errors.New("identity: mint: uid is required")
	}
	if r.TTL < 0 {
		return "", errors.New("identity: mint: ttl must not be negative")
	}
	ttl := r.TTL
	if ttl == 0 {
		ttl = defaultTTL
	}
	now := i.now()
	std := jwt.Claims{
		Issuer:   DevIssuer,
		Subject:  r.UID,
		Audience: jwt.Audience{DevAudience},
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(ttl)),
	}
	extra := struct {
		AuthTime int64  `json:"auth_time"`
		Name     string `json:"name,omitempty"`
		Email    string `json:"email,omitempty"`
		Role     string `json:"role,omitempty"`
	}{now.Unix(), r.Name, r.Email, r.Role}
	tok, err := jwt.Signed(i.signer).Claims(std).Claims(extra).Serialize()
	if err != nil {
		return "", fmt.Errorf("identity: mint: %w", err)
	}
	return tok, nil
}

// loadOrCreateKey reads the dev key, or creates it when missing. Creation writes a temporary
// file and hard-links it into place, so a crash never leaves a half-written key and two
// processes starting at once end up with the same key.
func loadOrCreateKey(path string) (*rsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return parseKey(path, data)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("identity: read dev key: %w", err)
	}

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("identity: create data dir: %w", err)
	}
	key, data, err := newDevKey()
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".dev-idp-*.pem") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("identity: write dev key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("identity: write dev key: %w", werr)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return loadOrCreateKey(path) // another process won the race: use its key
		}
		return nil, fmt.Errorf("identity: install dev key: %w", err)
	}
	syncDir(dir)
	return key, nil
}

// syncDir makes the new directory entry durable; best effort (not every platform allows it).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

func parseKey(path string, data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("identity: %s: no PEM block", path)
	}
	var key *rsa.PrivateKey
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("identity: %s: %w", path, err)
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("identity: %s: %T is not an RSA key", path, k)
		}
		key = rk
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("identity: %s: %w", path, err)
		}
		key = k
	default:
		return nil, fmt.Errorf("identity: %s: unexpected PEM type %q (want PRIVATE KEY or RSA PRIVATE KEY)", path, block.Type)
	}
	if key.N.BitLen() < devKeyBits {
		return nil, fmt.Errorf("identity: %s: RSA key has %d bits, want at least %d", path, key.N.BitLen(), devKeyBits)
	}
	return key, nil
}
