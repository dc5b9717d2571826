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
	return s.Send(from, to, &waE2E.Message{Conversation: proto.String(text)})
}

// SendOptions change how a phone's message reaches a device.
type SendOptions struct {
	// HidePN leaves the sender's phone number out (no sender_pn): the device knows the sender
	// by its LID only, as WhatsApp delivers messages from LID-only contacts.
	HidePN bool
}

// Send plays the phone of account from sending msg to phone to's linked devices (each
// logged-in one gets it, encrypted for it, as a phone does). It returns the message id.
func (s *Server) Send(from, to string, msg *waE2E.Message, opts ...SendOptions) (string, error) {
	plain, o, err := sendArgs(msg, opts)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	id := s.nextMessageID()
	sender := s.account(from)
	conns := s.loggedIn(to)
	s.mu.Unlock()
	if len(conns) == 0 {
		return "", fmt.Errorf("fakewa: %s has no device online", to)
	}
	s.noteSent(from, to, "", id, msg)
	for _, c := range conns {
		if err := c.deliver(sender, id, "", padded(plain), o); err != nil {
			return "", err
		}
	}
	return id, nil
}

// nextMessageID is a phone's new message id. Called with mu held.
func (s *Server) nextMessageID() string {
	s.seq++
	return fmt.Sprintf("3A%018d", s.seq)
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

// messageOf is the message a decrypted plaintext carries, without the padding padded adds.
func messageOf(b []byte) (*waE2E.Message, error) {
	if len(b) == 0 || int(b[len(b)-1]) > len(b) || b[len(b)-1] == 0 {
		return nil, errors.New("fakewa: bad padding")
	}
	var msg waE2E.Message
	if err := proto.Unmarshal(b[:len(b)-int(b[len(b)-1])], &msg); err != nil {
		return nil, err
	}
	return &msg, nil
}

// sendArgs is the plaintext of a message a phone sends, and its options.
func sendArgs(msg *waE2E.Message, opts []SendOptions) ([]byte, SendOptions, error) {
	var o SendOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	plain, err := proto.Marshal(msg)
	return plain, o, err
}

// encryptFor encrypts plaintext from sender's phone to this connection's device: a prekey
// message the first time (taking one of the device's one-time prekeys), a message of the
// session after that. It returns the enc node.
func (c *conn) encryptFor(sender *account, plaintext []byte) (node, error) {
	jid := c.loginJID()
	if jid == nil {
		return node{}, errors.New("fakewa: connection not logged in")
	}
	c.s.mu.Lock()
	a := c.s.accounts[jid.User]
	var keys *deviceKeys
	if a != nil && a.devices[jid.Device] != nil && a.devices[jid.Device].keys != nil {
		k := *a.devices[jid.Device].keys
		keys = &k
	}
	sig := sender.signalOf()
	recipientLID := types.JID{User: a.lid, Server: types.HiddenUserServer, Device: jid.Device}
	c.s.mu.Unlock()
	if keys == nil || len(keys.preKeys) == 0 {
		return node{}, fmt.Errorf("fakewa: device %s uploaded no keys", jid)
	}
	addr := recipientLID.SignalAddress()
	ctx := context.Background()
	builder := session.NewBuilder(sig, sig, sig, sig, addr, store.SignalProtobufSerializer)
	c.s.signalMu.Lock() // the phones' Signal stores are not safe for concurrent use
	defer c.s.signalMu.Unlock()
	if ok, _ := sig.ContainsSession(ctx, addr); !ok {
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
			return node{}, fmt.Errorf("fakewa: session to %s: %w", jid, err)
		}
	}
	ct, err := session.NewCipher(builder, addr).Encrypt(ctx, plaintext)
	if err != nil {
		return node{}, fmt.Errorf("fakewa: encrypt to %s: %w", jid, err)
	}
	encType := "msg"
	if ct.Type() == protocol.PREKEY_TYPE {
		encType = "pkmsg"
	}
	return node{Tag: "enc", Attrs: attrs{"v": "2", "type": encType}, Content: ct.Serialize()}, nil
}

// deliver sends plaintext from sender's phone to this connection's device, in a direct chat
// (group "") or in a group (as a group message: the sender key distribution in a prekey or
// session message, then the message under the sender key).
func (c *conn) deliver(sender *account, id, group string, plaintext []byte, o SendOptions) error {
	var content []node
	from := types.NewJID(sender.lid, types.HiddenUserServer)
	at := attrs{"id": id, "type": "text", "notify": "Customer " + sender.phone[len(sender.phone)-4:],
		"t": strconv.FormatInt(time.Now().Unix(), 10)}
	if group == "" {
		enc, err := c.encryptFor(sender, plaintext)
		if err != nil {
			return err
		}
		content = []node{enc}
		at["from"] = from
		if !o.HidePN {
			at["sender_pn"] = types.NewJID(sender.phone, types.DefaultUserServer)
		}
	} else {
		skdm, skmsg, err := c.s.groupEncrypt(sender, group, plaintext)
		if err != nil {
			return err
		}
		enc, err := c.encryptFor(sender, padded(skdm))
		if err != nil {
			return err
		}
		content = []node{enc, {Tag: "enc", Attrs: attrs{"v": "2", "type": "skmsg"}, Content: skmsg}}
		gj, _ := types.ParseJID(group)
		at["from"], at["participant"] = gj, from
		at["addressing_mode"] = "lid"
		if !o.HidePN {
			at["participant_pn"] = types.NewJID(sender.phone, types.DefaultUserServer)
		}
	}
	n := node{Tag: "message", Attrs: at, Content: content}
	c.hold("message", id, n)
	return c.send(n)
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
