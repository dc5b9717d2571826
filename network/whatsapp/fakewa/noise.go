package fakewa

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"go.mau.fi/whatsmeow/socket"
	"golang.org/x/crypto/curve25519"
)

// noiseState is the responder's side of WhatsApp's Noise_XX_25519_AESGCM_SHA256 handshake,
// mirroring whatsmeow's socket.NoiseHandshake (whose chaining key is not exported, so the
// final split cannot be done with it).
type noiseState struct {
	hash    []byte // handshake hash, the AEAD's associated data
	salt    []byte // chaining key
	aead    cipher.AEAD
	counter uint32
}

func newNoiseState(header []byte) (*noiseState, error) {
	ns := &noiseState{}
	pattern := []byte(socket.NoiseStartPattern)
	if len(pattern) == 32 {
		ns.hash = pattern
	} else {
		h := sha256.Sum256(pattern)
		ns.hash = h[:]
	}
	ns.salt = ns.hash
	aead, err := newGCM(ns.hash)
	if err != nil {
		return nil, err
	}
	ns.aead = aead
	ns.authenticate(header)
	return ns, nil
}

func (ns *noiseState) authenticate(data []byte) {
	h := sha256.New()
	h.Write(ns.hash)
	h.Write(data)
	ns.hash = h.Sum(nil)
}

func (ns *noiseState) encrypt(plaintext []byte) []byte {
	ct := ns.aead.Seal(nil, nonce(ns.counter), plaintext, ns.hash)
	ns.counter++
	ns.authenticate(ct)
	return ct
}

func (ns *noiseState) decrypt(ciphertext []byte) ([]byte, error) {
	pt, err := ns.aead.Open(nil, nonce(ns.counter), ciphertext, ns.hash)
	ns.counter++
	if err != nil {
		return nil, err
	}
	ns.authenticate(ciphertext)
	return pt, nil
}

// mix mixes the X25519 shared secret of priv and pub into the chaining key.
func (ns *noiseState) mix(priv, pub *[32]byte) error {
	secret, err := curve25519.X25519(priv[:], pub[:])
	if err != nil {
		return fmt.Errorf("x25519: %w", err)
	}
	write, read, err := expand(ns.salt, secret)
	if err != nil {
		return err
	}
	ns.salt, ns.counter = write, 0
	ns.aead, err = newGCM(read)
	return err
}

// split derives the transport keys: the client writes with the first, reads with the second.
func (ns *noiseState) split() (clientWrite, clientRead cipher.AEAD, err error) {
	write, read, err := expand(ns.salt, nil)
	if err != nil {
		return nil, nil, err
	}
	if clientWrite, err = newGCM(write); err != nil {
		return nil, nil, err
	}
	if clientRead, err = newGCM(read); err != nil {
		return nil, nil, err
	}
	return clientWrite, clientRead, nil
}

func expand(salt, secret []byte) (write, read []byte, err error) {
	key, err := hkdf.Key(sha256.New, secret, salt, "", 64)
	if err != nil {
		return nil, nil, fmt.Errorf("hkdf: %w", err)
	}
	return key[:32], key[32:], nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func nonce(counter uint32) []byte {
	iv := make([]byte, 12)
	binary.BigEndian.PutUint32(iv[8:], counter)
	return iv
}
