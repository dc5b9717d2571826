// Package fakewa is a test-only fake of the WhatsApp web server, good enough to drive a real
// whatsmeow client offline: a TLS httptest server that accepts the client's websocket (through
// the client's websocket HTTP client, see HTTPClient), answers the Noise XX handshake with a
// certificate chain rooted at RootPublicKey (which the test installs as
// whatsmeow.WACertPubKey), and speaks whatsmeow's binary node protocol: QR linking (Scan),
// login, prekey and device queries, IsOnWhatsApp, media upload, message acknowledgements, and
// the server-side events the adapter must survive (stream errors, temporary bans, device
// removal, stream replacement).
//
// Its phones read what linked devices send them (decrypted under their Signal sessions and
// sender keys, conversation.go) and act in conversations (write, quote, react, vote, edit,
// revoke), and it keeps groups; messages between linked devices are acknowledged and recorded,
// not relayed. It imports the standard library and third-party modules only.
package fakewa

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.mau.fi/libsignal/ecc"
	"go.mau.fi/whatsmeow/proto/waCert"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"go.mau.fi/whatsmeow/util/keys"
)

// Message is a message the server acknowledged (or, in a silent stretch, received).
type Message struct {
	ID          string
	From        string // sender's phone (digits)
	To          string // recipient JID: the LID (…@lid) for direct messages, as today's clients send
	RecipientPN string // the peer_recipient_pn attribute sent with a LID-addressed DM
	Type        string // the node's type attribute: "text" or "media"
	MediaType   string // the enc mediatype attribute: image, video, audio, document, vcard, ptt, ""
	Retry       int    // the enc count attribute: >0 for a re-send answering a retry receipt
	Token       string // the privacy token sent along: "tctoken", "cstoken" or ""
	Error       int    // error code returned in the acknowledgement, 0 if none
	Acked       bool   // an acknowledgement was sent (false while the server was silent)
}

// Upload is a media upload the server accepted.
type Upload struct {
	Type string // mms type from the path: image, video, audio, document
	Size int    // encrypted size
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	ts     *httptest.Server
	static *keys.KeyPair
	cert   []byte // marshalled waCert.CertChain certifying static
	ctx    context.Context
	cancel context.CancelFunc

	signalMu sync.Mutex // serialises Signal encryption (the in-memory stores are not safe)

	mu       sync.Mutex
	conns    map[*conn]struct{}
	accounts map[string]*account
	down     bool
	outdated bool // logins and links fail with 405 (client outdated)
	cutLink  bool // SetCutLink
	silent   map[string]bool
	minVer   uint32 // with outdated: versions at or above this are accepted (0: none)
	webVer   uint32 // the client_revision web.whatsapp.com's page names (0: the page has none)
	webHits  int
	webDelay time.Duration
	rejected []string // call ids rejected by devices
	pairs    map[string]*codePairing
	sent     []Message
	uploads  []Upload
	lookups  int
	seq      int
	// Conversations (conversation.go): what phones got from devices (decrypted), what they sent,
	// the chat states devices showed them (device phone → recipient phone or group), read marks
	// (by the phone whose messages were read), groups by id.
	received  []Received
	phoneSent []sentByPhone
	composing map[string]map[string]bool
	reads     map[string][]string
	groups    map[string]*fakeGroup
	// Acknowledgements (ack.go): what each device was delivered and did not acknowledge, and
	// what was acknowledged ("class id").
	pending map[types.JID][]unacked
	acks    []string
	onAck   func(class, id string)
}

// account is a phone number on the network: the phone (device 0) and its linked devices.
type account struct {
	phone    string
	lid      string
	identity *keys.KeyPair // signs linked devices' identities; device 0's Signal identity
	signed   *keys.PreKey
	regID    uint32
	devices  map[uint16]*device
	nextDev  uint16
	nextPre  uint32
	ban      *ban
	timelock bool
	// timelockEnds: when the timelock ends; the server sends the reach-out timelock
	// notification with it on the first refusal.
	timelockEnds time.Time
	// coldRefusal: messages to contacts that carry no privacy token are refused with 463 and
	// no notification (WhatsApp's per-recipient refusal of cold contacts).
	coldRefusal bool
	ackError    int          // another ack error to answer every message with (479...)
	signal      *phoneSignal // its phone's Signal stores (signal.go)
}

type device struct {
	noisePub [32]byte
	prekeys  int
	keys     *deviceKeys // what the device uploaded, for messages to it
}

type ban struct {
	code int
	ends time.Time // zero: until Unban
}

// RootPublicKey is the key the test must install as whatsmeow.WACertPubKey. It is the same
// for every Server (derived from a fixed seed), so one assignment in TestMain serves them all.
func RootPublicKey() [32]byte { return *rootKey().Pub }

func rootKey() *keys.KeyPair {
	priv := sha256.Sum256([]byte("fakewa root certificate key"))
	priv[0] &= 248
	priv[31] &= 127
	priv[31] |= 64
	return keys.NewKeyPairFromPrivateKey(priv)
}

// New starts a server. Close it when done.
func New() (*Server, error) {
	s := &Server{
		static:    keys.NewKeyPair(),
		conns:     make(map[*conn]struct{}),
		accounts:  make(map[string]*account),
		silent:    make(map[string]bool),
		pairs:     make(map[string]*codePairing),
		composing: map[string]map[string]bool{},
		reads:     map[string][]string{},
		groups:    map[string]*fakeGroup{},
	}
	cert, err := certChain(rootKey(), s.static)
	if err != nil {
		return nil, err
	}
	s.cert = cert
	s.ctx, s.cancel = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("/ws/chat", s.serveWebsocket)
	mux.HandleFunc("POST /mms/{type}/{token}", s.serveUpload)
	mux.HandleFunc("GET /{$}", s.serveWebPage)
	s.ts = httptest.NewUnstartedServer(mux)
	s.ts.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS errors of dropped test connections
	s.ts.StartTLS()
	return s, nil
}

// certChain makes the noise certificate chain: root → intermediate (serial 1) → leaf (the
// server's static key).
func certChain(root, static *keys.KeyPair) ([]byte, error) {
	inter := keys.NewKeyPair()
	interDetails, err := proto.Marshal(&waCert.CertChain_NoiseCertificate_Details{
		Serial: proto.Uint32(1), IssuerSerial: proto.Uint32(0), Key: inter.Pub[:],
		NotBefore: proto.Uint64(0), NotAfter: proto.Uint64(uint64(time.Now().Add(24 * time.Hour).Unix())),
	})
	if err != nil {
		return nil, err
	}
	leafDetails, err := proto.Marshal(&waCert.CertChain_NoiseCertificate_Details{
		Serial: proto.Uint32(2), IssuerSerial: proto.Uint32(1), Key: static.Pub[:],
		NotBefore: proto.Uint64(0), NotAfter: proto.Uint64(uint64(time.Now().Add(24 * time.Hour).Unix())),
	})
	if err != nil {
		return nil, err
	}
	interSig := ecc.CalculateSignature(ecc.NewDjbECPrivateKey(*root.Priv), interDetails)
	leafSig := ecc.CalculateSignature(ecc.NewDjbECPrivateKey(*inter.Priv), leafDetails)
	return proto.Marshal(&waCert.CertChain{
		Intermediate: &waCert.CertChain_NoiseCertificate{Details: interDetails, Signature: interSig[:]},
		Leaf:         &waCert.CertChain_NoiseCertificate{Details: leafDetails, Signature: leafSig[:]},
	})
}

// Close stops the server and drops every connection.
func (s *Server) Close() {
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		c.ws.CloseNow()
	}
	s.mu.Unlock()
	s.ts.Close()
}

// HTTPClient returns a client whose connections, whatever host they name (web.whatsapp.com,
// the media host), reach this server and trust its certificate. Give it to whatsmeow as the
// websocket, pre-login and media HTTP client.
func (s *Server) HTTPClient() *http.Client {
	return clientFor(s.ts.Listener.Addr().String(), s.ts.Certificate())
}

// Addr is the server's address (host:port) and CertPEM its TLS certificate: what another
// process needs to reach it (ClientFor).
func (s *Server) Addr() string { return s.ts.Listener.Addr().String() }

// CertPEM is the server's TLS certificate, PEM-encoded.
func (s *Server) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.ts.Certificate().Raw})
}

// ClientFor is HTTPClient for a server in another process, from its Addr and CertPEM.
func ClientFor(addr string, certPEM []byte) (*http.Client, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, errors.New("fakewa: no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("fakewa: certificate: %w", err)
	}
	return clientFor(addr, cert), nil
}

func clientFor(addr string, cert *x509.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		// httptest's certificate names example.com; every host is served by it here.
		TLSClientConfig:     &tls.Config{RootCAs: pool, ServerName: "example.com"},
		TLSHandshakeTimeout: 5 * time.Second,
	}}
}

// AddAccount puts phone numbers on the network (IsOnWhatsApp answers yes, sends succeed).
func (s *Server) AddAccount(phones ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range phones {
		s.account(p)
	}
}

// account returns the account of phone, creating it. Called with mu held.
func (s *Server) account(phone string) *account {
	if a, ok := s.accounts[phone]; ok {
		return a
	}
	id := keys.NewKeyPair()
	s.seq++
	a := &account{
		phone:    phone,
		lid:      strconv.Itoa(100000000000000 + s.seq),
		identity: id,
		signed:   id.CreateSignedPreKey(1),
		regID:    uint32(1000 + s.seq),
		devices:  make(map[uint16]*device),
		nextDev:  10,
		nextPre:  100,
	}
	s.accounts[phone] = a
	return a
}

// SetDown makes the server refuse websocket connections (HTTP 503) while down is true.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// SetTimelock puts phone in a reach-out timelock with no stated end: its messages to cold
// contacts (no privacy token) are refused with error 463, each refusal followed by the
// notification.
func (s *Server) SetTimelock(phone string, on bool) {
	s.mu.Lock()
	s.account(phone).timelock = on
	s.mu.Unlock()
}

// Ban bans phone temporarily: its connections drop and logins fail with reason 402 (with the
// time left) until expire passes, or until Unban when expire is 0 (the failure then names no
// end).
func (s *Server) Ban(phone string, code int, expire time.Duration) {
	s.mu.Lock()
	b := &ban{code: code}
	if expire > 0 {
		b.ends = time.Now().Add(expire)
	}
	s.account(phone).ban = b
	conns := s.loggedIn(phone)
	s.mu.Unlock()
	for _, c := range conns {
		c.ws.CloseNow()
	}
}

// Unban lifts a ban.
func (s *Server) Unban(phone string) {
	s.mu.Lock()
	s.account(phone).ban = nil
	s.mu.Unlock()
}

// StreamError sends <stream:error code=code/> to phone's logged-in devices and closes their
// connections (503: the server restarts; the client reconnects).
func (s *Server) StreamError(phone, code string) int {
	return s.endStreams(phone, node{Tag: "stream:error", Attrs: attrs{"code": code}})
}

// ReplaceStream tells phone's devices another client took over their stream.
func (s *Server) ReplaceStream(phone string) int {
	return s.endStreams(phone, node{Tag: "stream:error", Content: []node{
		{Tag: "conflict", Attrs: attrs{"type": "replaced"}},
	}})
}

// RemoveDevices unlinks every linked device of phone (as the phone's "log out" does) and tells
// the connected ones.
func (s *Server) RemoveDevices(phone string) int {
	s.mu.Lock()
	if a, ok := s.accounts[phone]; ok {
		clear(a.devices)
	}
	s.mu.Unlock()
	return s.endStreams(phone, node{Tag: "stream:error", Attrs: attrs{"code": "401"}, Content: []node{
		{Tag: "conflict", Attrs: attrs{"type": "device_removed"}},
	}})
}

// SetCutLink makes the server cut a link's connection once the phone confirmed the device,
// instead of ending it with the 515 that tells the client to log in: the socket closing
// before the client has handled its last frame, as a loaded client or a lossy network sees it.
func (s *Server) SetCutLink(on bool) {
	s.mu.Lock()
	s.cutLink = on
	s.mu.Unlock()
}

// EndLinking closes every connection that is showing QR codes (the client reports a timeout).
func (s *Server) EndLinking() int {
	s.mu.Lock()
	var conns []*conn
	for c := range s.conns {
		if c.registering() {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.ws.CloseNow()
	}
	return len(conns)
}

func (s *Server) endStreams(phone string, n node) int {
	s.mu.Lock()
	conns := s.loggedIn(phone)
	s.mu.Unlock()
	for _, c := range conns {
		c.endStream(n)
	}
	return len(conns)
}

// loggedIn lists phone's logged-in connections. Called with mu held.
func (s *Server) loggedIn(phone string) []*conn {
	var out []*conn
	for c := range s.conns {
		if jid := c.loginJID(); jid != nil && jid.User == phone {
			out = append(out, c)
		}
	}
	return out
}

// Online is the number of logged-in connections of phone.
func (s *Server) Online(phone string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.loggedIn(phone))
}

// Devices lists phone's linked device ids.
func (s *Server) Devices(phone string) []uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accounts[phone]
	if !ok {
		return nil
	}
	var ids []uint16
	for id := range a.devices {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Messages returns the messages acknowledged so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// Uploads returns the media uploads accepted so far.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.uploads)
}

// Lookups is the number of numbers looked up with IsOnWhatsApp.
func (s *Server) Lookups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups
}

// QRPrefix starts every QR code today's clients show (whatsmeow 876de1e9): the phone's
// camera opens WhatsApp's linked-devices screen with the rest of the code as its fragment.
const QRPrefix = "https://wa.me/settings/linked_devices#"

// Scan plays the phone of account phone scanning a QR code: the device showing it is linked
// (pair-success), after which the client reconnects and logs in. Only today's format is
// accepted: QRPrefix + ref,noise,identity,adv,platform (the bare four-part code of older
// clients is refused, as WhatsApp may do).
func (s *Server) Scan(qr, phone string) error {
	frag, ok := strings.CutPrefix(qr, QRPrefix)
	parts := strings.Split(frag, ",")
	if !ok || len(parts) != 5 || parts[4] == "" {
		return fmt.Errorf("fakewa: QR code %q: want %sref,noise,identity,adv,platform", qr, QRPrefix)
	}
	noise, err1 := base64.StdEncoding.DecodeString(parts[1])
	identity, err2 := base64.StdEncoding.DecodeString(parts[2])
	adv, err3 := base64.StdEncoding.DecodeString(parts[3])
	if err := errors.Join(err1, err2, err3); err != nil || len(noise) != 32 || len(identity) != 32 {
		return fmt.Errorf("fakewa: QR code %q: bad keys: %v", qr, err)
	}
	s.mu.Lock()
	var target *conn
	for c := range s.conns {
		if c.registering() && c.noisePub == [32]byte(noise) {
			target = c
		}
	}
	if target == nil {
		s.mu.Unlock()
		return errors.New("fakewa: no connection is showing that QR code")
	}
	a := s.account(phone)
	devID := a.nextDev
	a.nextDev++
	s.mu.Unlock()
	return target.pairSuccess(a, devID, [32]byte(identity), adv)
}

func (s *Server) serveWebsocket(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(1 << 25)
	c := &conn{s: s, ws: ws}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		ws.CloseNow()
	}()
	_ = c.serve(s.ctx)
}

func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("auth") != mediaAuth {
		http.Error(w, "bad auth", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.uploads = append(s.uploads, Upload{Type: r.PathValue("type"), Size: len(body)})
	n := len(s.uploads)
	s.mu.Unlock()
	path := fmt.Sprintf("/v/t62.%s/%d.enc", r.PathValue("type"), n)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"url":         "https://" + mediaHost + path,
		"direct_path": path,
	})
}
