package whatsapp

import (
	"testing"

	"go.mau.fi/whatsmeow/proto/waE2E"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/networktest"
	"github.com/gateway/gateway/network/whatsapp/fakewa"
)

// The network port's contract, on WhatsApp over the fake server.
func TestContract(t *testing.T) {
	networktest.Run(t, func(t *testing.T) networktest.Env { return &fakeEnv{h: newHarness(t)} })
}

// The same contract with the device store on PostgreSQL (`--whatsapp-store postgres://`).
func TestContractPostgres(t *testing.T) {
	networktest.Run(t, func(t *testing.T) networktest.Env { return &fakeEnv{h: newPostgresHarness(t)} })
}

type fakeEnv struct{ h *harness }

func (e *fakeEnv) Network() network.Network { return e.h.net }

func (e *fakeEnv) Scan(t *testing.T, _, qr, phone string) {
	t.Helper()
	if err := e.h.srv.Scan(qr, phone); err != nil {
		t.Fatal(err)
	}
}

func (e *fakeEnv) EnterCode(t *testing.T, _, phone, code string) {
	t.Helper()
	if err := e.h.srv.EnterCode(phone, code); err != nil {
		t.Fatal(err)
	}
}

func (e *fakeEnv) AddAccounts(_ *testing.T, phones ...string) { e.h.srv.AddAccount(phones...) }

func (e *fakeEnv) Unregistered(*testing.T, ...string) {} // numbers not added are not on the fake

func (e *fakeEnv) Drop(t *testing.T, _, phone string) {
	t.Helper()
	if n := e.h.srv.StreamError(phone, "503"); n == 0 {
		t.Fatalf("no connection of %s to drop", phone)
	}
}

func (e *fakeEnv) Delivered(t *testing.T, sender, recipient, id string) {
	t.Helper()
	if _, err := e.h.srv.Receipt(sender, recipient, "", id); err != nil {
		t.Fatal(err)
	}
}

func (e *fakeEnv) Act(t *testing.T, _, sessionPhone string, in domain.SimInbound) string {
	t.Helper()
	id, err := e.h.srv.Do(in.From, sessionPhone, fakewa.Act{Type: in.Type, Text: in.Text, MessageID: in.MessageID,
		Emoji: in.Emoji, Options: in.Options, ReplyTo: in.ReplyTo, Group: in.Group})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Seen is what the fake's phone (or a group's members) read of what sessionPhone's device sent:
// each message decrypted, as the sim lists it (edits and revokes laid over their messages).
func (e *fakeEnv) Seen(_ *testing.T, sessionPhone, to string) []domain.Delivered {
	var out []domain.Delivered
	for _, r := range e.h.srv.Received(to) {
		if r.From == sessionPhone {
			out = append(out, deliveredOf(r))
		}
	}
	return domain.Folded(out)
}

func (e *fakeEnv) Reads(_ *testing.T, from string) []string { return e.h.srv.Reads(from) }

// deliveredOf is a message a phone read, as the sim's listing shows one.
func deliveredOf(r fakewa.Received) domain.Delivered {
	m := r.Message
	d := domain.Delivered{ID: r.ID, From: r.From, To: r.To, Typing: r.Typing, Timestamp: r.At}
	if domain.IsGroup(r.To) {
		d.Group = r.To
	}
	var ci *waE2E.ContextInfo
	switch {
	case m.GetConversation() != "":
		d.Type, d.Text = "text", m.GetConversation()
	case m.GetExtendedTextMessage() != nil:
		d.Type, d.Text, ci = "text", m.GetExtendedTextMessage().GetText(), m.GetExtendedTextMessage().GetContextInfo()
	case m.GetReactionMessage() != nil:
		d.Type, d.Target, d.Emoji = "reaction", m.GetReactionMessage().GetKey().GetID(), m.GetReactionMessage().GetText()
	case m.GetPollCreationMessage() != nil:
		p := m.GetPollCreationMessage()
		d.Type, d.Question, d.Multiple, ci = "poll", p.GetName(), p.GetSelectableOptionsCount() != 1, p.GetContextInfo()
		for _, o := range p.GetOptions() {
			d.Options = append(d.Options, o.GetOptionName())
		}
	case m.GetProtocolMessage() != nil && m.GetProtocolMessage().GetType() == waE2E.ProtocolMessage_REVOKE:
		d.Type, d.Target = "revoke", m.GetProtocolMessage().GetKey().GetID()
	case m.GetEditedMessage() != nil:
		pm := m.GetEditedMessage().GetMessage().GetProtocolMessage()
		d.Type, d.Target, d.Text = "edit", pm.GetKey().GetID(), pm.GetEditedMessage().GetConversation()
	case m.GetImageMessage() != nil:
		d.Type, d.Caption, ci = "image", m.GetImageMessage().GetCaption(), m.GetImageMessage().GetContextInfo()
	case m.GetStickerMessage() != nil:
		d.Type, ci = "sticker", m.GetStickerMessage().GetContextInfo()
	case m.GetLocationMessage() != nil:
		d.Type, d.LocationName, d.Address = "location", m.GetLocationMessage().GetName(), m.GetLocationMessage().GetAddress()
	default:
		d.Type = "other"
	}
	if ci.GetStanzaID() != "" {
		d.ReplyTo, d.Quoted = ci.GetStanzaID(), ci.GetQuotedMessage().GetConversation()
	}
	return d
}
