package whatsapp

// What comes in from the network besides connection events: receipts for sent messages,
// messages people write to the session's number, the reach-out timelock, calls.

import (
	"context"
	"time"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// pnResolver finds the phone-number JID of a LID (whatsmeow's LID map); nil-safe callers
// get "" when it is unknown.
type pnResolver func(ctx context.Context, lid types.JID) (types.JID, error)

// phoneOf is the phone (digits) of a user JID: its user part for a phone-number JID, the
// mapped number for a LID (alt is the other address the network sent along, if any).
func phoneOf(ctx context.Context, jid, alt types.JID, resolve pnResolver) string {
	switch {
	case jid.Server == types.DefaultUserServer:
		return jid.User
	case alt.Server == types.DefaultUserServer:
		return alt.User
	case jid.Server == types.HiddenUserServer && resolve != nil:
		if pn, err := resolve(ctx, jid.ToNonAD()); err == nil && !pn.IsEmpty() {
			return pn.User
		}
	}
	return ""
}

// receiptEvent maps a receipt from a recipient's device onto the port (nil for receipts the
// port does not report: our own devices', retries, server errors, group receipts).
func receiptEvent(ctx context.Context, e *events.Receipt, resolve pnResolver) network.Event {
	if e.IsFromMe || e.IsGroup {
		return nil
	}
	var st network.ReceiptStatus
	switch e.Type {
	case types.ReceiptTypeDelivered:
		st = network.StatusDelivered
	case types.ReceiptTypeRead:
		st = network.StatusRead
	case types.ReceiptTypePlayed:
		st = network.StatusPlayed
	default:
		return nil
	}
	ids := make([]string, len(e.MessageIDs))
	for i, id := range e.MessageIDs {
		ids[i] = string(id)
	}
	at := e.Timestamp
	if at.IsZero() {
		at = time.Now()
	}
	return network.MessageReceipt{IDs: ids, Status: st, From: phoneOf(ctx, e.Sender, e.SenderAlt, resolve), At: at.UTC()}
}

// incomingEvent maps a message someone sent to the session's number (nil for our own
// messages, groups, broadcasts, newsletters and protocol messages).
func incomingEvent(ctx context.Context, e *events.Message, resolve pnResolver) network.Event {
	info := e.Info
	if info.IsFromMe || info.IsGroup || info.Chat.Server == types.BroadcastServer ||
		info.Chat.Server == types.NewsletterServer || e.Message == nil || e.Message.ProtocolMessage != nil {
		return nil
	}
	in := network.Incoming{
		ID:       string(info.ID),
		From:     phoneOf(ctx, info.Sender, info.SenderAlt, resolve),
		PushName: info.PushName,
		At:       info.Timestamp.UTC(),
		Kind:     network.KindOther,
	}
	if info.Sender.Server == types.HiddenUserServer {
		in.FromLID = info.Sender.User
	} else if info.SenderAlt.Server == types.HiddenUserServer {
		in.FromLID = info.SenderAlt.User
	}
	m := e.Message
	switch {
	case m.GetConversation() != "":
		in.Kind, in.Text = domain.KindText, m.GetConversation()
	case m.GetExtendedTextMessage() != nil:
		in.Kind, in.Text = domain.KindText, m.GetExtendedTextMessage().GetText()
	case m.GetImageMessage() != nil:
		x := m.GetImageMessage()
		in.Kind, in.Caption, in.MimeType, in.Size = domain.KindImage, x.GetCaption(), x.GetMimetype(), int64(x.GetFileLength())
	case m.GetVideoMessage() != nil:
		x := m.GetVideoMessage()
		in.Kind, in.Caption, in.MimeType, in.Size = domain.KindVideo, x.GetCaption(), x.GetMimetype(), int64(x.GetFileLength())
	case m.GetAudioMessage() != nil:
		x := m.GetAudioMessage()
		in.Kind, in.MimeType, in.Size = domain.KindAudio, x.GetMimetype(), int64(x.GetFileLength())
	case m.GetDocumentMessage() != nil:
		x := m.GetDocumentMessage()
		in.Kind, in.Caption, in.MimeType, in.FileName, in.Size = domain.KindDocument, x.GetCaption(), x.GetMimetype(), x.GetFileName(), int64(x.GetFileLength())
	case m.GetLocationMessage() != nil:
		x := m.GetLocationMessage()
		in.Kind, in.Text = domain.KindLocation, x.GetName()
	case m.GetContactMessage() != nil:
		in.Kind, in.Text = domain.KindContact, m.GetContactMessage().GetDisplayName()
	case m.GetStickerMessage() != nil, m.GetReactionMessage() != nil, m.GetPollCreationMessage() != nil:
		// KindOther: the port names no kind for these.
	default:
		if isEmpty(m) {
			return nil
		}
	}
	return in
}

// isEmpty: a message with nothing the port can report (key distribution, sync messages...).
func isEmpty(m *waE2E.Message) bool {
	return m.GetSenderKeyDistributionMessage() != nil && m.GetConversation() == "" ||
		m.GetMessageContextInfo() != nil && m.GetConversation() == ""
}

// timelockEvent maps the reach-out timelock notification.
func timelockEvent(e *events.NotifyAccountReachoutTimelock) network.Timelock {
	until := e.TimeEnforcementEnds.Time
	if !e.IsActive {
		until = time.Time{}
	}
	if !until.IsZero() {
		until = until.UTC()
	}
	return network.Timelock{Active: e.IsActive, Until: until, Kind: e.EnforcementType}
}
