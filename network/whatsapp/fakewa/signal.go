package fakewa

// The Signal state of the fake's phones: each account's phone (device 0) encrypts what it
// sends to linked devices and decrypts what they send it, in one set of stores keyed by the
// remote address, as a real phone keeps one session per remote device for both directions.
// libsignal's test stores key their maps by *SignalAddress (a new pointer per lookup), so the
// fake has its own, keyed by the address's string.

import (
	"context"

	"go.mau.fi/libsignal/ecc"
	groupRecord "go.mau.fi/libsignal/groups/state/record"
	"go.mau.fi/libsignal/keys/identity"
	"go.mau.fi/libsignal/protocol"
	"go.mau.fi/libsignal/state/record"
	"go.mau.fi/whatsmeow/store"
)

// phoneSignal is an account phone's Signal stores. Used under Server.signalMu.
type phoneSignal struct {
	idKey      *identity.KeyPair
	regID      uint32
	sessions   map[string]*record.Session
	preKeys    map[uint32]*record.PreKey
	signed     map[uint32]*record.SignedPreKey
	identities map[string]*identity.Key
	senderKeys map[string]*groupRecord.SenderKey
}

// signalOf returns the account's Signal stores, made on first use from its keys. Called with
// the server's mu held.
func (a *account) signalOf() *phoneSignal {
	if a.signal != nil {
		return a.signal
	}
	idKey := identity.NewKeyPair(identity.NewKey(ecc.NewDjbECPublicKey(*a.identity.Pub)), ecc.NewDjbECPrivateKey(*a.identity.Priv))
	ps := &phoneSignal{idKey: idKey, regID: a.regID, sessions: map[string]*record.Session{}, preKeys: map[uint32]*record.PreKey{},
		signed: map[uint32]*record.SignedPreKey{}, identities: map[string]*identity.Key{}, senderKeys: map[string]*groupRecord.SenderKey{}}
	ps.signed[a.signed.KeyID] = record.NewSignedPreKey(a.signed.KeyID, 0,
		ecc.NewECKeyPair(ecc.NewDjbECPublicKey(*a.signed.Pub), ecc.NewDjbECPrivateKey(*a.signed.Priv)), *a.signed.Signature, nil)
	a.signal = ps
	return ps
}

// Identity key store.
func (p *phoneSignal) GetIdentityKeyPair() *identity.KeyPair { return p.idKey }
func (p *phoneSignal) GetLocalRegistrationID() uint32        { return p.regID }
func (p *phoneSignal) SaveIdentity(_ context.Context, a *protocol.SignalAddress, k *identity.Key) error {
	p.identities[a.String()] = k
	return nil
}
func (p *phoneSignal) IsTrustedIdentity(context.Context, *protocol.SignalAddress, *identity.Key) (bool, error) {
	return true, nil // a phone trusts a device it meets (whatsmeow's AutoTrustIdentity)
}

// lockSignal takes the phones' Signal lock for a's stores (held while a cipher runs on them);
// the caller calls unlock when done.
func (s *Server) lockSignal(a *account) (sig *phoneSignal, unlock func()) {
	s.mu.Lock()
	sig = a.signalOf()
	s.mu.Unlock()
	s.signalMu.Lock()
	return sig, s.signalMu.Unlock
}

// Prekey stores.
func (p *phoneSignal) LoadPreKey(_ context.Context, id uint32) (*record.PreKey, error) {
	return p.preKeys[id], nil
}
func (p *phoneSignal) StorePreKey(_ context.Context, id uint32, r *record.PreKey) error {
	p.preKeys[id] = r
	return nil
}
func (p *phoneSignal) ContainsPreKey(_ context.Context, id uint32) (bool, error) {
	_, ok := p.preKeys[id]
	return ok, nil
}
func (p *phoneSignal) RemovePreKey(_ context.Context, id uint32) error {
	delete(p.preKeys, id)
	return nil
}
func (p *phoneSignal) LoadSignedPreKey(_ context.Context, id uint32) (*record.SignedPreKey, error) {
	return p.signed[id], nil
}
func (p *phoneSignal) LoadSignedPreKeys(context.Context) ([]*record.SignedPreKey, error) {
	out := make([]*record.SignedPreKey, 0, len(p.signed))
	for _, r := range p.signed {
		out = append(out, r)
	}
	return out, nil
}
func (p *phoneSignal) StoreSignedPreKey(_ context.Context, id uint32, r *record.SignedPreKey) error {
	p.signed[id] = r
	return nil
}
func (p *phoneSignal) ContainsSignedPreKey(_ context.Context, id uint32) (bool, error) {
	_, ok := p.signed[id]
	return ok, nil
}
func (p *phoneSignal) RemoveSignedPreKey(_ context.Context, id uint32) error {
	delete(p.signed, id)
	return nil
}

// Session store.
func (p *phoneSignal) LoadSession(_ context.Context, a *protocol.SignalAddress) (*record.Session, error) {
	if s, ok := p.sessions[a.String()]; ok {
		return s, nil
	}
	return record.NewSession(store.SignalProtobufSerializer.Session, store.SignalProtobufSerializer.State), nil
}
func (p *phoneSignal) GetSubDeviceSessions(context.Context, string) ([]uint32, error) {
	return nil, nil
}
func (p *phoneSignal) StoreSession(_ context.Context, a *protocol.SignalAddress, r *record.Session) error {
	p.sessions[a.String()] = r
	return nil
}
func (p *phoneSignal) ContainsSession(_ context.Context, a *protocol.SignalAddress) (bool, error) {
	_, ok := p.sessions[a.String()]
	return ok, nil
}
func (p *phoneSignal) DeleteSession(_ context.Context, a *protocol.SignalAddress) error {
	delete(p.sessions, a.String())
	return nil
}
func (p *phoneSignal) DeleteAllSessions(context.Context) error {
	clear(p.sessions)
	return nil
}

// Sender key store (groups).
func (p *phoneSignal) StoreSenderKey(_ context.Context, n *protocol.SenderKeyName, r *groupRecord.SenderKey) error {
	p.senderKeys[n.GroupID()+"\x00"+n.Sender().String()] = r
	return nil
}
func (p *phoneSignal) LoadSenderKey(_ context.Context, n *protocol.SenderKeyName) (*groupRecord.SenderKey, error) {
	if r, ok := p.senderKeys[n.GroupID()+"\x00"+n.Sender().String()]; ok {
		return r, nil
	}
	return groupRecord.NewSenderKey(store.SignalProtobufSerializer.SenderKeyRecord, store.SignalProtobufSerializer.SenderKeyState), nil
}
