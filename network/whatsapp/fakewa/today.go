package fakewa

// What today's WhatsApp server does that the first version of the fake did not: refusing
// outdated clients (405), the reach-out timelock notification, other ack errors (479), a dead
// path (keepalives unanswered), retry receipts, delivery and read receipts, and completing a
// link by pair code.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.mau.fi/whatsmeow/proto/waWa6"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/util/keys"
)

// SetOutdated makes the server refuse clients older than minVersion (the third part of the
// web version, 2.3000.x) with failure 405 "client outdated", at login and when linking.
// minVersion 0 refuses every client; SetOutdated(false, 0) accepts them all again.
func (s *Server) SetOutdated(on bool, minVersion uint32) {
	s.mu.Lock()
	s.outdated, s.minVer = on, minVersion
	s.mu.Unlock()
}

func (s *Server) refusesVersion(p *waWa6.ClientPayload) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.outdated {
		return false
	}
	return s.minVer == 0 || p.GetUserAgent().GetAppVersion().GetTertiary() < s.minVer
}

// SetWebVersion sets the current web client revision (the x of 2.3000.x) that the page at
// https://web.whatsapp.com/ names, where whatsmeow.GetLatestVersion reads it. 0: the page
// names none (the fetch fails).
func (s *Server) SetWebVersion(rev uint32) {
	s.mu.Lock()
	s.webVer = rev
	s.mu.Unlock()
}

// SetWebDelay makes the web page answer after d (a slow fetch).
func (s *Server) SetWebDelay(d time.Duration) {
	s.mu.Lock()
	s.webDelay = d
	s.mu.Unlock()
}

// WebVersionFetches is how many times the web page was fetched.
func (s *Server) WebVersionFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webHits
}

func (s *Server) serveWebPage(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	rev, delay := s.webVer, s.webDelay
	s.webHits++
	s.mu.Unlock()
	time.Sleep(delay)
	w.Header().Set("Content-Type", "text/html")
	if rev == 0 {
		_, _ = w.Write([]byte("<html>no version here</html>"))
		return
	}
	fmt.Fprintf(w, `<html><script>self.__x={"server_revision":%d,"client_revision":%d,"hsi":"x"}</script></html>`, rev, rev)
}

// SetSilent makes phone's logged-in connections a dead path: the socket stays open but the
// server answers nothing (keepalives, queries, message acknowledgements), though it still
// records what arrives. SetSilent(phone, false) brings answers back.
func (s *Server) SetSilent(phone string, on bool) {
	s.mu.Lock()
	s.silent[phone] = on
	s.mu.Unlock()
}

func (s *Server) isSilent(phone string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.silent[phone]
}

// SetTimelockUntil timelocks phone until ends: its messages to cold contacts (messages that
// carry no privacy token, tctoken or cstoken) are refused with 463, and after each refusal the
// server sends the reach-out timelock notification carrying ends. Messages that carry a token
// (replies to contacts who wrote) still go, as on WhatsApp. A zero ends lifts the timelock and
// tells the logged-in devices so.
func (s *Server) SetTimelockUntil(phone string, ends time.Time) {
	s.mu.Lock()
	a := s.account(phone)
	a.timelock, a.timelockEnds = !ends.IsZero(), ends
	conns := s.loggedIn(phone)
	s.mu.Unlock()
	if ends.IsZero() {
		for _, c := range conns {
			_ = c.sendTimelockNotification(false, time.Time{})
		}
	}
}

// SetColdRefusal makes the server refuse phone's messages to cold contacts (messages that
// carry no privacy token) with 463 and no notification: WhatsApp's per-recipient refusal,
// which since 2026 also happens outside any account-wide timelock. Messages carrying a token
// go through.
func (s *Server) SetColdRefusal(phone string, on bool) {
	s.mu.Lock()
	s.account(phone).coldRefusal = on
	s.mu.Unlock()
}

// SetAckError makes the server answer phone's messages with ack error code (479: the
// message stanza is refused; 0: no error).
func (s *Server) SetAckError(phone string, code int) {
	s.mu.Lock()
	s.account(phone).ackError = code
	s.mu.Unlock()
}

// byJID finds the account of a phone-number or LID JID. Called with mu held.
func (s *Server) byJID(jid types.JID) *account {
	switch jid.Server {
	case types.DefaultUserServer:
		return s.accounts[jid.User]
	case types.HiddenUserServer:
		for _, a := range s.accounts {
			if a.lid == jid.User {
				return a
			}
		}
	}
	return nil
}

// LID returns phone's LID user (the digits before @lid).
func (s *Server) LID(phone string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.account(phone).lid
}

// sendTimelockNotification is the server's mex notification of the reach-out timelock.
func (c *conn) sendTimelockNotification(active bool, ends time.Time) error {
	body := map[string]any{"enforcement_type": "REACHOUT_TIMELOCK", "is_active": active}
	if !ends.IsZero() {
		body["time_enforcement_ends"] = strconv.FormatInt(ends.Unix(), 10)
	}
	data, err := json.Marshal(map[string]any{"data": map[string]any{"xwa2_notify_account_reachout_timelock": body}})
	if err != nil {
		return err
	}
	return c.send(node{Tag: "notification", Attrs: attrs{
		"from": types.ServerJID, "type": "mex", "id": c.nextID(), "t": strconv.FormatInt(time.Now().Unix(), 10),
	}, Content: []node{{Tag: "update", Attrs: attrs{"op_name": "NotifyAccountReachoutTimelock"}, Content: data}}})
}

// Receipt plays the device of recipient (a phone on the network) reporting on messages that
// sender's devices sent it: typ "" is delivered, "read" or "played". It returns how many
// connections were told.
func (s *Server) Receipt(sender, recipient, typ string, ids ...string) (int, error) {
	if len(ids) == 0 {
		return 0, errors.New("fakewa: receipt without ids")
	}
	s.mu.Lock()
	r, ok := s.accounts[recipient]
	conns := s.loggedIn(sender)
	s.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("fakewa: %s is not on the network", recipient)
	}
	a := attrs{
		"from": types.NewJID(r.lid, types.HiddenUserServer), "id": ids[0],
		"t": strconv.FormatInt(time.Now().Unix(), 10),
	}
	if typ != "" {
		a["type"] = typ
	}
	n := node{Tag: "receipt", Attrs: a}
	if len(ids) > 1 {
		items := make([]node, 0, len(ids)-1)
		for _, id := range ids[1:] {
			items = append(items, node{Tag: "item", Attrs: attrs{"id": id}})
		}
		n.Content = []node{{Tag: "list", Content: items}}
	}
	for _, c := range conns {
		c.hold("receipt", ids[0], n)
		if err := c.send(n); err != nil {
			return 0, err
		}
	}
	return len(conns), nil
}

// RetryReceipt plays recipient's phone failing to decrypt message id from sender and asking
// for it again (a retry receipt, count 1). The client answers with a re-sent message of the
// same id whose Retry is 1 (see Messages).
func (s *Server) RetryReceipt(sender, recipient, id string) (int, error) {
	s.mu.Lock()
	r, ok := s.accounts[recipient]
	conns := s.loggedIn(sender)
	s.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("fakewa: %s is not on the network", recipient)
	}
	reg := make([]byte, 4)
	binary.BigEndian.PutUint32(reg, r.regID)
	t := strconv.FormatInt(time.Now().Unix(), 10)
	n := node{Tag: "receipt", Attrs: attrs{
		"from": types.NewJID(r.lid, types.HiddenUserServer), "id": id, "type": "retry", "t": t,
	}, Content: []node{
		{Tag: "retry", Attrs: attrs{"count": "1", "id": id, "t": t, "v": "1"}},
		{Tag: "registration", Content: reg},
	}}
	for _, c := range conns {
		if err := c.send(n); err != nil {
			return 0, err
		}
	}
	return len(conns), nil
}

// codePairing is a link by pair code waiting for the phone to enter the code.
type codePairing struct {
	c       *conn
	phone   string
	ref     string
	wrapped []byte // the companion's wrapped ephemeral key: salt(32) iv(16) encrypted key(32)
	primary *ecdh.PrivateKey
	// companionPub: the companion's ephemeral key as unwrapped with the code the user typed
	// (garbage for a wrong code, so the client's key bundle then fails to decrypt).
	companionPub []byte
}

// linkCode answers the client's link_code_companion_reg IQs: companion_hello (the client asks
// for a pair code for a phone) and companion_finish (the client's key bundle after the phone
// entered the code), which completes the link as a QR scan does.
func (c *conn) linkCode(req *node, reg node) error {
	stage, _ := reg.Attrs["stage"].(string)
	jid, _ := reg.Attrs["jid"].(types.JID)
	switch stage {
	case "companion_hello":
		wrapped, _ := reg.GetChildByTag("link_code_pairing_wrapped_companion_ephemeral_pub").Content.([]byte)
		if len(wrapped) != 80 {
			return c.iqError(req, 400, "bad-request")
		}
		ref := fmt.Sprintf("fakewa-link-code-ref-%d", time.Now().UnixNano())
		c.s.mu.Lock()
		c.s.pairs[jid.User] = &codePairing{c: c, phone: jid.User, ref: ref, wrapped: wrapped}
		c.s.mu.Unlock()
		return c.result(req, []node{{Tag: "link_code_companion_reg", Content: []node{
			{Tag: "link_code_pairing_ref", Content: []byte(ref)},
		}}})
	case "companion_finish":
		c.s.mu.Lock()
		var p *codePairing
		var a *account
		if waiting := c.s.pairs[jid.User]; waiting != nil {
			copied := *waiting // EnterCode wrote it under mu
			p, a = &copied, c.s.account(waiting.phone)
		}
		delete(c.s.pairs, jid.User)
		c.s.mu.Unlock()
		bundle, _ := reg.GetChildByTag("link_code_pairing_wrapped_key_bundle").Content.([]byte)
		ref, _ := reg.GetChildByTag("link_code_pairing_ref").Content.([]byte)
		if p == nil || p.primary == nil || string(ref) != p.ref || len(bundle) < 44 || a == nil {
			return c.iqError(req, 400, "bad-request")
		}
		advSecret, identity, err := p.finish(a, bundle)
		if err != nil {
			return c.iqError(req, 401, "not-authorized")
		}
		if err := c.result(req, nil); err != nil {
			return err
		}
		c.s.mu.Lock()
		devID := a.nextDev
		a.nextDev++
		c.s.mu.Unlock()
		return c.pairSuccess(a, devID, identity, advSecret)
	}
	return c.iqError(req, 400, "bad-request")
}

func (c *conn) iqError(req *node, code int, text string) error {
	return c.send(node{Tag: "iq", Attrs: attrs{"from": types.ServerJID, "type": "error", "id": req.Attrs["id"]},
		Content: []node{{Tag: "error", Attrs: attrs{"code": strconv.Itoa(code), "text": text}}}})
}

// EnterCode plays the user typing the pair code on phone: the device that asked for a code
// for phone gets the phone's wrapped key and finishes the link (pair-success follows).
// An error means no device is waiting for phone; a wrong code makes the client's finish fail
// to decrypt, and the link does not complete.
func (s *Server) EnterCode(phone, code string) error {
	code = strings.ToUpper(strings.ReplaceAll(code, "-", ""))
	s.mu.Lock()
	p := s.pairs[phone]
	var identity *keys.KeyPair
	if p != nil {
		identity = s.account(phone).identity
	}
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("fakewa: no device is waiting for a pair code for %s", phone)
	}
	companionPub, err := unwrapLinkKey(code, p.wrapped)
	if err != nil {
		return err
	}
	primary, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	wrapped, err := wrapLinkKey(code, primary.PublicKey().Bytes())
	if err != nil {
		return err
	}
	s.mu.Lock()
	p.primary, p.companionPub = primary, companionPub
	s.mu.Unlock()
	return p.c.send(node{Tag: "notification", Attrs: attrs{
		"from": types.ServerJID, "type": "link_code_companion_reg", "id": p.c.nextID(),
		"t": strconv.FormatInt(time.Now().Unix(), 10),
	}, Content: []node{{Tag: "link_code_companion_reg", Content: []node{
		{Tag: "link_code_pairing_ref", Content: []byte(p.ref)},
		{Tag: "link_code_pairing_wrapped_primary_ephemeral_pub", Content: wrapped},
		{Tag: "primary_identity_pub", Content: identity.Pub[:]},
	}}}})
}

// linkKey is the key the pair code protects the ephemeral keys with (whatsmeow pair-code.go).
func linkKey(code string, salt []byte) (cipher.Block, error) {
	k, err := pbkdf2.Key(sha256.New, code, salt, 2<<16, 32)
	if err != nil {
		return nil, err
	}
	return aes.NewCipher(k)
}

func wrapLinkKey(code string, pub []byte) ([]byte, error) {
	out := make([]byte, 80)
	if _, err := rand.Read(out[:48]); err != nil {
		return nil, err
	}
	block, err := linkKey(code, out[:32])
	if err != nil {
		return nil, err
	}
	cipher.NewCTR(block, out[32:48]).XORKeyStream(out[48:], pub)
	return out, nil
}

func unwrapLinkKey(code string, wrapped []byte) ([]byte, error) {
	block, err := linkKey(code, wrapped[:32])
	if err != nil {
		return nil, err
	}
	pub := make([]byte, 32)
	cipher.NewCTR(block, wrapped[32:48]).XORKeyStream(pub, wrapped[48:80])
	return pub, nil
}

// finish decrypts the companion's key bundle and derives the ADV secret the pair-success must
// be signed with; it returns the secret and the companion's identity key.
func (p *codePairing) finish(a *account, bundle []byte) ([]byte, [32]byte, error) {
	var identity [32]byte
	companionPub, err := ecdh.X25519().NewPublicKey(p.companionPub)
	if err != nil {
		return nil, identity, err
	}
	ephShared, err := p.primary.ECDH(companionPub)
	if err != nil {
		return nil, identity, err
	}
	salt, nonce, sealed := bundle[:32], bundle[32:44], bundle[44:]
	key, err := hkdf.Key(sha256.New, ephShared, salt, "link_code_pairing_key_bundle_encryption_key", 32)
	if err != nil {
		return nil, identity, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, identity, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, identity, err
	}
	plain, err := gcm.Open(nil, nonce, sealed, nil)
	if err != nil || len(plain) != 96 {
		return nil, identity, fmt.Errorf("key bundle does not decrypt (wrong code?): %v", err)
	}
	copy(identity[:], plain[:32])
	advRandom := plain[64:96]
	primaryIdentity, err := ecdh.X25519().NewPrivateKey(a.identity.Priv[:])
	if err != nil {
		return nil, identity, err
	}
	companionIdentity, err := ecdh.X25519().NewPublicKey(identity[:])
	if err != nil {
		return nil, identity, err
	}
	identShared, err := primaryIdentity.ECDH(companionIdentity)
	if err != nil {
		return nil, identity, err
	}
	input := append(append(append([]byte{}, ephShared...), identShared...), advRandom...)
	adv, err := hkdf.Key(sha256.New, input, nil, "adv_secret", 32)
	return adv, identity, err
}

// Call plays from's phone calling phone to's linked devices (a call offer). The calls the
// devices reject are listed by Rejected.
func (s *Server) Call(from, to, callID string) (int, error) {
	s.mu.Lock()
	caller, ok := s.accounts[from]
	conns := s.loggedIn(to)
	s.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("fakewa: %s is not on the network", from)
	}
	lid := types.NewJID(caller.lid, types.HiddenUserServer)
	n := node{Tag: "call", Attrs: attrs{
		"from": lid, "id": callID, "t": strconv.FormatInt(time.Now().Unix(), 10), "platform": "android", "version": "2.26.1",
	}, Content: []node{{Tag: "offer", Attrs: attrs{
		"call-id": callID, "call-creator": lid, "caller_pn": types.NewJID(from, types.DefaultUserServer),
	}}}}
	for _, c := range conns {
		if err := c.send(n); err != nil {
			return 0, err
		}
	}
	return len(conns), nil
}

// Rejected lists the call ids the devices rejected.
func (s *Server) Rejected() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.rejected...)
}

// PrivacyToken plays from's phone granting a trusted-contact privacy token (tctoken) to
// phone to's devices, as happens when from writes to to: messages from to to from then carry
// it (Message.Token "tctoken"), which is what keeps them out of the reach-out timelock.
func (s *Server) PrivacyToken(from, to string) (int, error) {
	s.mu.Lock()
	granter, ok := s.accounts[from]
	conns := s.loggedIn(to)
	s.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("fakewa: %s is not on the network", from)
	}
	token := make([]byte, 24)
	_, _ = rand.Read(token)
	now := strconv.FormatInt(time.Now().Unix(), 10)
	for _, c := range conns {
		n := node{Tag: "notification", Attrs: attrs{
			"from": types.NewJID(granter.lid, types.HiddenUserServer), "type": "privacy_token", "id": c.nextID(), "t": now,
		}, Content: []node{{Tag: "tokens", Content: []node{
			{Tag: "token", Attrs: attrs{"jid": types.NewJID(granter.lid, types.HiddenUserServer), "t": now, "type": "trusted_contact"}, Content: token},
		}}}}
		if err := c.send(n); err != nil {
			return 0, err
		}
	}
	return len(conns), nil
}
