package fakewa

// Incoming messages: the fake plays a phone on the network writing to a linked device. It
// keeps the keys the device uploaded (identity, signed prekey, one-time prekeys), builds a
// Signal session to it from the sender account's identity, and delivers the encrypted message
// as the server would.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.mau.fi/libsignal/ecc"
	"go.mau.fi/libsignal/keys/identity"
	"go.mau.fi/libsignal/keys/prekey"
	"go.mau.fi/libsignal/protocol"
	"go.mau.fi/libsignal/session"
	"go.mau.fi/libsignal/tests"
	"go.mau.fi/libsignal/util/optional"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"
)

// deviceKeys are the public keys a device uploaded (the encrypt IQ after login).
type deviceKeys struct {
	regID     uint32
	identity  [32]byte
	signedID  uint32
	signedPub [32]byte
	signedSig [64]byte
	preKeys   []uploadedPreKey
}

type uploadedPreKey struct {
	id  uint32
	pub [32]byte
}

// signalSender is an account's Signal state as a sender (the fake's phones keep sessions to
// the devices they write to).
type signalSender struct {
	sessions *tests.InMemorySession
	preKeys  *tests.InMemoryPreKey
	signed   *tests.InMemorySignedPreKey
	identity *tests.InMemoryIdentityKey
}

// storeKeys records the keys of an upload. Called with the server's mu held.
func (d *device) storeKeys(n *node) {
	k := &deviceKeys{}
	if d.keys != nil {
		*k = *d.keys
	}
	for _, child := range n.GetChildren() {
		data, _ := child.Content.([]byte)
		switch child.Tag {
		case "registration":
			if len(data) == 4 {
				k.regID = binary.BigEndian.Uint32(data)
			}
		case "identity":
			copy(k.identity[:], data)
		case "list":
			for _, key := range child.GetChildren() {
				id, pub := keyIDAndValue(key)
				k.preKeys = append(k.preKeys, uploadedPreKey{id: id, pub: pub})
			}
		case "skey":
			k.signedID, k.signedPub = keyIDAndValue(child)
			if sig, ok := child.GetChildByTag("signature").Content.([]byte); ok {
				copy(k.signedSig[:], sig)
			}
		}
	}
	d.keys = k
}

func keyIDAndValue(n node) (uint32, [32]byte) {
	var pub [32]byte
	idBytes, _ := n.GetChildByTag("id").Content.([]byte)
	value, _ := n.GetChildByTag("value").Content.([]byte)
	copy(pub[:], value)
	var id uint32
	for _, b := range idBytes {
		id = id<<8 | uint32(b)
	}
	return id, pub
}

// SendText plays the phone of account from writing text to phone to's linked devices (each
// logged-in one gets it, encrypted for it). It returns the message id.
func (s *Server) SendText(from, to, text string) (string, error) {
	plain, err := proto.Marshal(&waE2E.Message{Conversation: proto.String(text)})
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.seq++
	id := fmt.Sprintf("3A%018d", s.seq)
	sender := s.account(from)
	conns := s.loggedIn(to)
	s.mu.Unlock()
	if len(conns) == 0 {
		return "", fmt.Errorf("fakewa: %s has no device online", to)
	}
	for _, c := range conns {
		if err := c.deliverText(sender, id, padded(plain)); err != nil {
			return "", err
		}
	}
	return id, nil
}

// padded adds whatsmeow's (and WhatsApp's) random 1-15 byte padding.
func padded(plain []byte) []byte {
	var b [1]byte
	_, _ = rand.Read(b[:])
	n := int(b[0]&0x0f) | 1
	out := append([]byte{}, plain...)
	for range n {
		out = append(out, byte(n))
	}
	return out
}

// deliverText encrypts plaintext from sender's phone to this connection's device and sends it.
func (c *conn) deliverText(sender *account, id string, plaintext []byte) error {
	jid := c.loginJID()
	if jid == nil {
		return errors.New("fakewa: connection not logged in")
	}
	c.s.mu.Lock()
	a := c.s.accounts[jid.User]
	var keys *deviceKeys
	if a != nil && a.devices[jid.Device] != nil && a.devices[jid.Device].keys != nil {
		k := *a.devices[jid.Device].keys
		keys = &k
	}
	if sender.signal == nil {
		idKey := identity.NewKeyPair(identity.NewKey(ecc.NewDjbECPublicKey(*sender.identity.Pub)), ecc.NewDjbECPrivateKey(*sender.identity.Priv))
		sender.signal = &signalSender{
			sessions: tests.NewInMemorySession(store.SignalProtobufSerializer),
			preKeys:  tests.NewInMemoryPreKey(),
			signed:   tests.NewInMemorySignedPreKey(),
			identity: tests.NewInMemoryIdentityKey(idKey, sender.regID),
		}
	}
	sig := sender.signal
	recipientLID := types.JID{User: a.lid, Server: types.HiddenUserServer, Device: jid.Device}
	c.s.mu.Unlock()
	if keys == nil || len(keys.preKeys) == 0 {
		return fmt.Errorf("fakewa: device %s uploaded no keys", jid)
	}
	addr := recipientLID.SignalAddress()
	ctx := context.Background()
	builder := session.NewBuilder(sig.sessions, sig.preKeys, sig.signed, sig.identity, addr, store.SignalProtobufSerializer)
	c.s.signalMu.Lock() // the in-memory Signal stores are not safe for concurrent use
	defer c.s.signalMu.Unlock()
	if ok, _ := sig.sessions.ContainsSession(ctx, addr); !ok {
		// A one-time prekey is used once: take it off the device's list.
		pk := keys.preKeys[0]
		c.s.mu.Lock()
		if d := a.devices[jid.Device]; d != nil && d.keys != nil && len(d.keys.preKeys) > 0 {
			d.keys.preKeys = d.keys.preKeys[1:]
		}
		c.s.mu.Unlock()
		bundle := prekey.NewBundle(keys.regID, uint32(jid.Device), optional.NewOptionalUint32(pk.id), keys.signedID,
			ecc.NewDjbECPublicKey(pk.pub), ecc.NewDjbECPublicKey(keys.signedPub), keys.signedSig,
			identity.NewKey(ecc.NewDjbECPublicKey(keys.identity)))
		if err := builder.ProcessBundle(ctx, bundle); err != nil {
			return fmt.Errorf("fakewa: session to %s: %w", jid, err)
		}
	}
	ct, err := session.NewCipher(builder, addr).Encrypt(ctx, plaintext)
	if err != nil {
		return fmt.Errorf("fakewa: encrypt to %s: %w", jid, err)
	}
	encType := "msg"
	if ct.Type() == protocol.PREKEY_TYPE {
		encType = "pkmsg"
	}
	return c.send(node{Tag: "message", Attrs: attrs{
		"from":      types.NewJID(sender.lid, types.HiddenUserServer),
		"sender_pn": types.NewJID(sender.phone, types.DefaultUserServer),
		"id":        id, "type": "text", "notify": "Customer " + sender.phone[len(sender.phone)-4:],
		"t": strconv.FormatInt(time.Now().Unix(), 10),
	}, Content: []node{{Tag: "enc", Attrs: attrs{"v": "2", "type": encType}, Content: ct.Serialize()}}})
}

// HasKeys tells whether a logged-in device of phone has uploaded its keys (messages can be
// sent to it).
func (s *Server) HasKeys(phone string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accounts[phone]
	if !ok {
		return false
	}
	for _, c := range s.loggedIn(phone) {
		if jid := c.loginJID(); jid != nil {
			if d := a.devices[jid.Device]; d != nil && d.keys != nil && len(d.keys.preKeys) > 0 {
				return true
			}
		}
	}
	return false
}
