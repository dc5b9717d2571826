package fakewa

import (
	"context"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.mau.fi/libsignal/ecc"
	"go.mau.fi/libsignal/state/record"
	waBinary "go.mau.fi/whatsmeow/binary"
	"go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/proto/waWa6"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/util/keys"
	"google.golang.org/protobuf/proto"
)

type (
	node  = waBinary.Node
	attrs = waBinary.Attrs
)

const (
	mediaHost = "mmg.whatsapp.net"
	mediaAuth = "fakewa-media-auth"
	// qrRefs is how many QR references a linking connection gets (whatsmeow shows them
	// 60 s, then 20 s each).
	qrRefs = 6
	// endStreamGrace is how long the server keeps a socket open after a final node.
	endStreamGrace = 250 * time.Millisecond
	// restartGrace is how long the server keeps the link's socket open after its 515: the
	// client closes it itself and logs in on a new one (whatsmeow disconnects at once); the
	// server ends a socket left open after that.
	restartGrace = 2 * time.Second
)

// conn is one client websocket.
type conn struct {
	s  *Server
	ws *websocket.Conn

	// Read side, used by serve's goroutine only.
	buf       []byte
	gotHeader bool
	in        cipher.AEAD
	inN       uint32

	wmu  sync.Mutex // guards out, outN and websocket writes
	out  cipher.AEAD
	outN uint32

	noisePub [32]byte // client's static noise key, set before the conn is findable

	mu        sync.Mutex // guards the fields below
	linking   bool       // registration (QR) connection
	login     *types.JID // logged-in device
	pairID    string     // id of the pair-success iq awaiting the client's signature
	pairDev   types.JID
	pairAcct  *account
	ended     bool
	serverSeq int
}

func (c *conn) registering() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.linking && !c.ended
}

func (c *conn) loginJID() *types.JID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return nil
	}
	return c.login
}

func (c *conn) nextID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.serverSeq++
	return "srv-" + strconv.Itoa(c.serverSeq)
}

// serve runs the handshake, then answers the client's nodes until the connection ends.
func (c *conn) serve(ctx context.Context) error {
	payload, err := c.handshake(ctx)
	if err != nil {
		return err
	}
	if c.s.refusesVersion(payload) {
		c.endStream(node{Tag: "failure", Attrs: attrs{"reason": "405", "location": "fakewa"}})
	} else if payload.Username == nil {
		if err := c.startLinking(); err != nil {
			return err
		}
	} else if err := c.startLogin(payload); err != nil {
		return err
	}
	for {
		n, err := c.readNode(ctx)
		if err != nil {
			return err
		}
		if err := c.handle(n); err != nil {
			return err
		}
	}
}

// handshake is the responder side of Noise XX; it returns the client's payload.
func (c *conn) handshake(ctx context.Context) (*waWa6.ClientPayload, error) {
	raw, header, err := c.readFrame(ctx)
	if err != nil {
		return nil, err
	}
	var hello waWa6.HandshakeMessage
	if err := proto.Unmarshal(raw, &hello); err != nil {
		return nil, fmt.Errorf("client hello: %w", err)
	}
	clientEph := hello.GetClientHello().GetEphemeral()
	if len(clientEph) != 32 {
		return nil, errors.New("client hello without ephemeral key")
	}
	ns, err := newNoiseState(header)
	if err != nil {
		return nil, err
	}
	ns.authenticate(clientEph)
	eph := keys.NewKeyPair()
	ns.authenticate(eph.Pub[:])
	ce := [32]byte(clientEph)
	if err := ns.mix(eph.Priv, &ce); err != nil {
		return nil, err
	}
	static := ns.encrypt(c.s.static.Pub[:])
	if err := ns.mix(c.s.static.Priv, &ce); err != nil {
		return nil, err
	}
	certificate := ns.encrypt(c.s.cert)
	data, err := proto.Marshal(&waWa6.HandshakeMessage{ServerHello: &waWa6.HandshakeMessage_ServerHello{
		Ephemeral: eph.Pub[:], Static: static, Payload: certificate,
	}})
	if err != nil {
		return nil, err
	}
	if err := c.writeFrame(data); err != nil {
		return nil, err
	}

	raw, _, err = c.readFrame(ctx)
	if err != nil {
		return nil, err
	}
	var finish waWa6.HandshakeMessage
	if err := proto.Unmarshal(raw, &finish); err != nil {
		return nil, fmt.Errorf("client finish: %w", err)
	}
	clientStatic, err := ns.decrypt(finish.GetClientFinish().GetStatic())
	if err != nil || len(clientStatic) != 32 {
		return nil, fmt.Errorf("client static key: %v", err)
	}
	cs := [32]byte(clientStatic)
	if err := ns.mix(eph.Priv, &cs); err != nil {
		return nil, err
	}
	payloadBytes, err := ns.decrypt(finish.GetClientFinish().GetPayload())
	if err != nil {
		return nil, fmt.Errorf("client payload: %w", err)
	}
	var payload waWa6.ClientPayload
	if err := proto.Unmarshal(payloadBytes, &payload); err != nil {
		return nil, fmt.Errorf("client payload: %w", err)
	}
	clientWrite, clientRead, err := ns.split()
	if err != nil {
		return nil, err
	}
	c.in = clientWrite
	c.wmu.Lock()
	c.out = clientRead
	c.wmu.Unlock()
	c.noisePub = cs
	return &payload, nil
}

// readFrame returns the next length-prefixed frame. The client's first websocket message
// starts with the 4-byte connection header, which is returned with the first frame.
func (c *conn) readFrame(ctx context.Context) (frame, header []byte, err error) {
	for {
		if !c.gotHeader && len(c.buf) >= 4 {
			if c.buf[0] != 'W' || c.buf[1] != 'A' {
				return nil, nil, errors.New("missing WA connection header")
			}
			header = append([]byte(nil), c.buf[:4]...)
			c.buf = c.buf[4:]
			c.gotHeader = true
		}
		if c.gotHeader && len(c.buf) >= 3 {
			n := int(c.buf[0])<<16 | int(c.buf[1])<<8 | int(c.buf[2])
			if len(c.buf) >= 3+n {
				frame = append([]byte(nil), c.buf[3:3+n]...)
				c.buf = c.buf[3+n:]
				return frame, header, nil
			}
		}
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			return nil, nil, err
		}
		if typ == websocket.MessageBinary {
			c.buf = append(c.buf, data...)
		}
	}
}

func (c *conn) writeFrame(data []byte) error {
	frame := make([]byte, 3+len(data))
	frame[0], frame[1], frame[2] = byte(len(data)>>16), byte(len(data)>>8), byte(len(data))
	copy(frame[3:], data)
	ctx, cancel := context.WithTimeout(c.s.ctx, 10*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageBinary, frame)
}

func (c *conn) readNode(ctx context.Context) (*node, error) {
	frame, _, err := c.readFrame(ctx)
	if err != nil {
		return nil, err
	}
	plain, err := c.in.Open(nil, nonce(c.inN), frame, nil)
	c.inN++
	if err != nil {
		return nil, fmt.Errorf("decrypt frame: %w", err)
	}
	unpacked, err := waBinary.Unpack(plain)
	if err != nil {
		return nil, err
	}
	return waBinary.Unmarshal(unpacked)
}

func (c *conn) send(n node) error {
	data, err := waBinary.Marshal(n)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ct := c.out.Seal(nil, nonce(c.outN), data, nil)
	c.outN++
	return c.writeFrame(ct)
}

// endStream sends a final node and closes the connection the way the server does.
func (c *conn) endStream(n node) { c.endStreamAfter(n, endStreamGrace) }

// endStreamAfter is endStream closing the socket after grace.
func (c *conn) endStreamAfter(n node, grace time.Duration) {
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	_ = c.send(n)
	// Give the client time to act on the node before the socket goes: whatsmeow drops nodes
	// still queued for its handlers when the socket closes (over a real network the close
	// arrives later anyway). A client that disconnects by itself (515) ends it sooner. The
	// close handshake waits for the client's close frame, read by serve's goroutine.
	time.AfterFunc(grace, func() { _ = c.ws.Close(websocket.StatusNormalClosure, "") })
}

func (c *conn) startLinking() error {
	c.mu.Lock()
	c.linking = true
	c.mu.Unlock()
	refs := make([]node, qrRefs)
	for i := range refs {
		refs[i] = node{Tag: "ref", Content: []byte(fmt.Sprintf("2@fakewa-ref-%d-%d", time.Now().UnixNano(), i))}
	}
	return c.send(node{Tag: "iq", Attrs: attrs{
		"from": types.ServerJID, "type": "set", "id": c.nextID(), "xmlns": "md",
	}, Content: []node{{Tag: "pair-device", Content: refs}}})
}

func (c *conn) startLogin(p *waWa6.ClientPayload) error {
	jid := types.JID{User: strconv.FormatUint(p.GetUsername(), 10), Server: types.DefaultUserServer, Device: uint16(p.GetDevice())}
	c.s.mu.Lock()
	a := c.s.accounts[jid.User]
	var dev *device
	if a != nil {
		dev = a.devices[jid.Device]
	}
	var b *ban
	var lid types.JID
	if a != nil {
		b = a.ban
		lid = types.JID{User: a.lid, Server: types.HiddenUserServer, Device: jid.Device}
	}
	c.s.mu.Unlock()
	switch {
	case dev == nil || dev.noisePub != c.noisePub:
		c.endStream(node{Tag: "failure", Attrs: attrs{"reason": "401", "location": "fakewa"}})
		return nil
	case b != nil && (b.ends.IsZero() || time.Now().Before(b.ends)):
		a := attrs{"reason": "402", "code": strconv.Itoa(b.code)}
		if !b.ends.IsZero() {
			a["expire"] = strconv.Itoa(int(time.Until(b.ends).Round(time.Second).Seconds()))
		}
		c.endStream(node{Tag: "failure", Attrs: a})
		return nil
	}
	c.mu.Lock()
	c.login = &jid
	c.mu.Unlock()
	if err := c.send(node{Tag: "success", Attrs: attrs{
		"t": strconv.FormatInt(time.Now().Unix(), 10), "lid": lid, "location": "fakewa",
	}}); err != nil {
		return err
	}
	return c.redeliver()
}

// pairSuccess tells a linking client that account a linked it as device devID.
func (c *conn) pairSuccess(a *account, devID uint16, identityPub [32]byte, advSecret []byte) error {
	details, err := proto.Marshal(&waAdv.ADVDeviceIdentity{
		RawID: proto.Uint32(uint32(time.Now().UnixNano())), Timestamp: proto.Uint64(uint64(time.Now().Unix())),
		KeyIndex: proto.Uint32(1),
	})
	if err != nil {
		return err
	}
	msg := append(append([]byte{6, 0}, details...), identityPub[:]...)
	sig := ecc.CalculateSignature(ecc.NewDjbECPrivateKey(*a.identity.Priv), msg)
	signed, err := proto.Marshal(&waAdv.ADVSignedDeviceIdentity{
		Details: details, AccountSignatureKey: a.identity.Pub[:], AccountSignature: sig[:],
	})
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, advSecret)
	mac.Write(signed)
	container, err := proto.Marshal(&waAdv.ADVSignedDeviceIdentityHMAC{Details: signed, HMAC: mac.Sum(nil)})
	if err != nil {
		return err
	}
	jid := types.JID{User: a.phone, Server: types.DefaultUserServer, Device: devID}
	lid := types.JID{User: a.lid, Server: types.HiddenUserServer, Device: devID}
	id := c.nextID()
	c.mu.Lock()
	c.pairID, c.pairDev, c.pairAcct = id, jid, a
	c.mu.Unlock()
	return c.send(node{Tag: "iq", Attrs: attrs{"from": types.ServerJID, "type": "set", "id": id, "xmlns": "md"},
		Content: []node{{Tag: "pair-success", Content: []node{
			{Tag: "device-identity", Content: container},
			{Tag: "platform", Attrs: attrs{"name": "android"}},
			{Tag: "device", Attrs: attrs{"jid": jid, "lid": lid}},
		}}}})
}

func (c *conn) handle(n *node) error {
	c.ackOf(n)
	switch n.Tag {
	case "iq":
		typ, _ := n.Attrs["type"].(string)
		if typ == "result" || typ == "error" {
			return c.handleClientResult(n)
		}
		return c.handleIQ(n)
	case "message":
		return c.handleMessage(n)
	case "chatstate":
		c.chatState(n)
		return nil
	case "receipt":
		c.readReceipt(n)
		return nil
	case "call":
		if reject, ok := n.GetOptionalChildByTag("reject"); ok {
			id, _ := reject.Attrs["call-id"].(string)
			c.s.mu.Lock()
			c.s.rejected = append(c.s.rejected, id)
			c.s.mu.Unlock()
		}
		return nil
	}
	return nil // receipts, acks, presence: nothing to do
}

// handleClientResult completes linking when the client signs the pair-success.
func (c *conn) handleClientResult(n *node) error {
	id, _ := n.Attrs["id"].(string)
	c.mu.Lock()
	pending := id != "" && id == c.pairID
	jid, a := c.pairDev, c.pairAcct
	if pending {
		c.pairID = ""
	}
	c.mu.Unlock()
	if !pending {
		return nil
	}
	if n.Attrs["type"] == "error" {
		return fmt.Errorf("client rejected pairing: %s", n.String())
	}
	if _, ok := n.GetOptionalChildByTag("pair-device-sign", "device-identity"); !ok {
		return errors.New("pairing signature without device identity")
	}
	c.s.mu.Lock()
	a.devices[jid.Device] = &device{noisePub: c.noisePub}
	cut := c.s.cutLink
	c.s.mu.Unlock()
	if cut {
		// SetCutLink: the socket goes before the client has read the 515 (lost with it).
		c.mu.Lock()
		c.ended = true
		c.mu.Unlock()
		_ = c.ws.CloseNow()
		return nil
	}
	// As the real server: the client must reconnect and log in as the new device.
	c.endStreamAfter(node{Tag: "stream:error", Attrs: attrs{"code": "515"}}, restartGrace)
	return nil
}

func (c *conn) result(req *node, content any) error {
	return c.send(node{Tag: "iq", Attrs: attrs{
		"from": types.ServerJID, "type": "result", "id": req.Attrs["id"],
	}, Content: content})
}

func (c *conn) handleIQ(n *node) error {
	xmlns, _ := n.Attrs["xmlns"].(string)
	if jid := c.loginJID(); jid != nil && c.s.isSilent(jid.User) {
		return nil // a dead path: nothing comes back, keepalives included
	}
	children := n.GetChildren()
	first := ""
	if len(children) > 0 {
		first = children[0].Tag
	}
	switch {
	case xmlns == "encrypt" && first == "count":
		return c.result(n, []node{{Tag: "count", Attrs: attrs{"value": strconv.Itoa(c.preKeyCount())}}})
	case xmlns == "encrypt" && first == "key":
		return c.result(n, []node{{Tag: "list", Content: c.preKeyBundles(children[0].GetChildren())}})
	case xmlns == "encrypt":
		list, _ := n.GetOptionalChildByTag("list")
		c.addPreKeys(len(list.GetChildren()))
		c.s.mu.Lock()
		if _, d := c.device(); d != nil {
			d.storeKeys(n)
		}
		c.s.mu.Unlock()
		return c.result(n, nil)
	case xmlns == "usync":
		return c.result(n, []node{{Tag: "usync", Content: []node{{Tag: "list", Content: c.usync(n)}}}})
	case xmlns == "w:m":
		return c.result(n, []node{{Tag: "media_conn", Attrs: attrs{
			"auth": mediaAuth, "ttl": "3600", "auth_ttl": "3600", "max_buckets": "12",
		}, Content: []node{{Tag: "host", Attrs: attrs{"hostname": mediaHost}}}}})
	case xmlns == "md" && first == "remove-companion-device":
		c.removeSelf()
		return c.result(n, nil)
	case xmlns == "md" && first == "link_code_companion_reg":
		return c.linkCode(n, children[0])
	case xmlns == "w:g2" && len(children) > 0:
		return c.groupIQ(n, children[0])
	}
	return c.result(n, nil) // keepalive, passive, and anything else: an empty success
}

func (c *conn) device() (*account, *device) {
	jid := c.loginJID()
	if jid == nil {
		return nil, nil
	}
	a := c.s.accounts[jid.User]
	if a == nil {
		return nil, nil
	}
	return a, a.devices[jid.Device]
}

// preKeyCount answers the client's "how many prekeys do you hold for me". It says at least 1:
// a new device that hears 0 generates and uploads 812 prekeys, about a second per link under
// the race detector; with 1 it uploads its regular batch of 50.
func (c *conn) preKeyCount() int {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if _, d := c.device(); d != nil {
		return max(1, d.prekeys)
	}
	return 0
}

func (c *conn) addPreKeys(n int) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if _, d := c.device(); d != nil {
		d.prekeys += n
	}
}

func (c *conn) removeSelf() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if jid := c.loginJID(); jid != nil {
		if a := c.s.accounts[jid.User]; a != nil {
			delete(a.devices, jid.Device)
		}
	}
}

// preKeyBundles answers a prekey fetch: phones (device 0) have bundles; anything else is 404.
// The phones keep their one-time prekeys' private halves, to decrypt what is sent to them.
func (c *conn) preKeyBundles(users []node) []node {
	type handed struct {
		a  *account
		pk *keys.PreKey
	}
	var given []handed
	defer func() {
		c.s.signalMu.Lock()
		defer c.s.signalMu.Unlock()
		for _, h := range given {
			_ = h.a.signal.StorePreKey(context.Background(), h.pk.KeyID, record.NewPreKey(h.pk.KeyID,
				ecc.NewECKeyPair(ecc.NewDjbECPublicKey(*h.pk.Pub), ecc.NewDjbECPrivateKey(*h.pk.Priv)), nil))
		}
	}()
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	out := make([]node, 0, len(users))
	for _, u := range users {
		jid, _ := u.Attrs["jid"].(types.JID)
		a := c.s.byJID(jid)
		if a == nil || jid.Device != 0 {
			out = append(out, node{Tag: "user", Attrs: attrs{"jid": jid}, Content: []node{
				{Tag: "error", Attrs: attrs{"code": "404", "text": "item-not-found"}},
			}})
			continue
		}
		a.nextPre++
		oneTime := keys.NewPreKey(a.nextPre)
		a.signalOf()
		given = append(given, handed{a, oneTime})
		reg := make([]byte, 4)
		binary.BigEndian.PutUint32(reg, a.regID)
		out = append(out, node{Tag: "user", Attrs: attrs{"jid": jid}, Content: []node{
			{Tag: "registration", Content: reg},
			{Tag: "type", Content: []byte{ecc.DjbType}},
			{Tag: "identity", Content: a.identity.Pub[:]},
			{Tag: "skey", Content: []node{
				{Tag: "id", Content: keyID(a.signed.KeyID)},
				{Tag: "value", Content: a.signed.Pub[:]},
				{Tag: "signature", Content: a.signed.Signature[:]},
			}},
			{Tag: "key", Content: []node{
				{Tag: "id", Content: keyID(oneTime.KeyID)},
				{Tag: "value", Content: oneTime.Pub[:]},
			}},
		}})
	}
	return out
}

func keyID(id uint32) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, id)
	return b[1:]
}

// usync answers contact (IsOnWhatsApp) and device-list queries.
func (c *conn) usync(n *node) []node {
	query, _ := n.GetOptionalChildByTag("usync", "query")
	list, _ := n.GetOptionalChildByTag("usync", "list")
	_, wantDevices := query.GetOptionalChildByTag("devices")
	// Today's clients ask for contacts by LID (whatsmeow's IsOnWhatsApp: the query's contact
	// node says addressing_mode="lid").
	qc, _ := query.GetOptionalChildByTag("contact")
	lidMode := qc.Attrs["addressing_mode"] == "lid"
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	var out []node
	for _, u := range list.GetChildren() {
		if contact, ok := u.GetOptionalChildByTag("contact"); ok {
			var q string
			switch v := contact.Content.(type) {
			case []byte:
				q = string(v)
			case string:
				q = v
			}
			digits := strings.TrimPrefix(strings.TrimSuffix(q, "@"+types.LegacyUserServer), "+")
			c.s.lookups++
			pn := types.NewJID(digits, types.DefaultUserServer)
			a, in := c.s.accounts[digits]
			ua := attrs{"jid": pn}
			typ := "out"
			if in {
				typ = "in"
				if lidMode || contact.Attrs["addressing_mode"] == "lid" {
					// Today's answer: the LID is the user's address, the number rides along.
					ua = attrs{"jid": types.NewJID(a.lid, types.HiddenUserServer), "pn_jid": pn}
				}
			}
			out = append(out, node{Tag: "user", Attrs: ua,
				Content: []node{{Tag: "contact", Attrs: attrs{"type": typ}, Content: []byte(q)}}})
			continue
		}
		jid, ok := u.Attrs["jid"].(types.JID)
		if !ok {
			continue
		}
		a := c.s.byJID(jid)
		if _, wantLID := query.GetOptionalChildByTag("lid"); wantLID && a != nil && jid.Server == types.DefaultUserServer {
			out = append(out, node{Tag: "user", Attrs: attrs{"jid": jid}, Content: []node{
				{Tag: "lid", Attrs: attrs{"val": types.NewJID(a.lid, types.HiddenUserServer)}},
			}})
			continue
		}
		if !wantDevices {
			continue
		}
		var devs []node
		if a != nil {
			devs = append(devs, node{Tag: "device", Attrs: attrs{"id": "0"}})
			for id := range a.devices {
				devs = append(devs, node{Tag: "device", Attrs: attrs{"id": strconv.Itoa(int(id))}})
			}
		}
		out = append(out, node{Tag: "user", Attrs: attrs{"jid": jid}, Content: []node{
			{Tag: "devices", Content: []node{{Tag: "device-list", Content: devs}}},
		}})
	}
	return out
}

// handleMessage acknowledges (and records) a sent message, with the account's ack error if it
// has one (463 for a first contact of a timelocked account, after which the reach-out timelock
// notification follows; 463 alone for a cold contact of an account with SetColdRefusal), or
// says nothing while the account is silent.
func (c *conn) handleMessage(n *node) error {
	id, _ := n.Attrs["id"].(string)
	to, _ := n.Attrs["to"].(types.JID)
	typ, _ := n.Attrs["type"].(string)
	pn, _ := n.Attrs["peer_recipient_pn"].(types.JID)
	var mediaType, token string
	retry := 0
	noteEnc := func(enc node) {
		if mt, ok := enc.Attrs["mediatype"].(string); ok {
			mediaType = mt
		}
		if cnt, ok := enc.Attrs["count"]; ok {
			retry, _ = strconv.Atoi(fmt.Sprint(cnt))
		}
	}
	if parts, ok := n.GetOptionalChildByTag("participants"); ok {
		for _, p := range parts.GetChildren() {
			if enc, ok := p.GetOptionalChildByTag("enc"); ok {
				noteEnc(enc)
			}
		}
	}
	for _, child := range n.GetChildren() {
		switch child.Tag {
		case "enc":
			noteEnc(child)
		case "tctoken", "cstoken":
			token = child.Tag
		}
	}
	jid := c.loginJID()
	if jid == nil {
		return errors.New("message before login")
	}
	c.s.mu.Lock()
	a := c.s.accounts[jid.User]
	errCode, notice := 0, false
	var timelockEnds time.Time
	// A privacy token (tctoken, or the cstoken derived from the NCT salt) shows the recipient
	// knows the sender; without one the message is a first contact.
	cold := token == ""
	switch {
	case a == nil:
	case a.timelock && cold && (a.timelockEnds.IsZero() || time.Now().Before(a.timelockEnds)):
		errCode, timelockEnds, notice = 463, a.timelockEnds, true
	case a.coldRefusal && cold:
		errCode = 463
	case a.ackError != 0:
		errCode = a.ackError
	}
	silent := c.s.silent[jid.User]
	c.s.sent = append(c.s.sent, Message{
		ID: id, From: jid.User, To: to.String(), Type: typ, MediaType: mediaType,
		Error: errCode, RecipientPN: pnString(pn), Retry: retry, Token: token, Acked: !silent,
	})
	c.s.mu.Unlock()
	if silent {
		return nil
	}
	if errCode == 0 {
		c.openMessage(n, *jid) // the recipients' phones read it
	}
	ack := attrs{"class": "message", "id": id, "from": to, "t": strconv.FormatInt(time.Now().Unix(), 10)}
	if errCode != 0 {
		ack["error"] = strconv.Itoa(errCode)
	}
	if err := c.send(node{Tag: "ack", Attrs: ack}); err != nil {
		return err
	}
	if notice {
		return c.sendTimelockNotification(true, timelockEnds)
	}
	return nil
}

func pnString(j types.JID) string {
	if j.IsEmpty() {
		return ""
	}
	return j.String()
}
