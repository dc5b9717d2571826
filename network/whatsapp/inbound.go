package whatsapp

// What comes in from the network besides connection events: receipts for sent messages,
// messages people write to the session's number, the reach-out timelock, calls.

import (
	"cmp"
	"context"
	"strings"
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

// origin is who did something and where, from a message's info.
func origin(ctx context.Context, info types.MessageInfo, resolve pnResolver) network.Origin {
	o := network.Origin{
		ID:       string(info.ID),
		From:     phoneOf(ctx, info.Sender, info.SenderAlt, resolve),
		PushName: info.PushName,
		At:       info.Timestamp.UTC(),
	}
	if info.Sender.Server == types.HiddenUserServer {
		o.FromLID = info.Sender.User
	} else if info.SenderAlt.Server == types.HiddenUserServer {
		o.FromLID = info.SenderAlt.User
	}
	if info.IsGroup {
		o.Group = info.Chat.ToNonAD().String()
	}
	return o
}

// incomingEvent maps what someone sent to the session's number or in one of its groups: a
// message (Incoming, with the message it quotes), a reaction, an edit or a revoke. nil for our
// own messages (from the phone or another device), broadcasts, newsletters, poll votes (the
// client decrypts those: pollVoteEvent) and what the port does not report.
func incomingEvent(ctx context.Context, e *events.Message, st linkState) network.Event {
	info := e.Info
	if info.IsFromMe || info.Chat.Server == types.BroadcastServer ||
		info.Chat.Server == types.NewsletterServer || e.Message == nil {
		return nil
	}
	o := origin(ctx, info, st.resolvePN)
	m := e.Message
	switch {
	case m.GetReactionMessage() != nil:
		r := m.GetReactionMessage()
		if r.GetKey().GetID() == "" {
			return nil
		}
		return network.Reaction{Origin: o, Target: r.GetKey().GetID(), Emoji: r.GetText()}
	case m.GetProtocolMessage() != nil:
		pm := m.GetProtocolMessage()
		target := pm.GetKey().GetID()
		if target == "" {
			return nil
		}
		switch pm.GetType() {
		case waE2E.ProtocolMessage_REVOKE:
			return network.Revoked{Origin: o, Target: target}
		case waE2E.ProtocolMessage_MESSAGE_EDIT:
			content, ok := contentOf(pm.GetEditedMessage())
			if !ok {
				return nil
			}
			content.ID = target
			return network.Edited{Origin: o, Target: target, Message: content}
		}
		return nil
	case m.GetPollUpdateMessage() != nil:
		return nil
	}
	content, ok := contentOf(m)
	if !ok {
		return nil
	}
	content.ID = o.ID
	content.ReplyTo = quoteOf(ctx, contextOf(m), st)
	return network.Incoming{Origin: o, Message: content}
}

// quoteOf is the message a reply quotes (nil when it quotes none): the device's own (FromMe) or
// a contact's, with the quoted text.
func quoteOf(ctx context.Context, ci *waE2E.ContextInfo, st linkState) *domain.MessageRef {
	if ci.GetStanzaID() == "" {
		return nil
	}
	ref := &domain.MessageRef{ID: ci.GetStanzaID()}
	if q, ok := contentOf(ci.GetQuotedMessage()); ok {
		ref.Kind, ref.Text = q.Kind, q.Preview()
	}
	p, err := types.ParseJID(ci.GetParticipant())
	if err != nil || p.IsEmpty() {
		return ref
	}
	p = p.ToNonAD()
	if st.wa != nil {
		pn, lid := ownJIDs(st.wa)
		if (!pn.IsEmpty() && p.User == pn.User) || (!lid.IsEmpty() && p.User == lid.User) {
			ref.FromMe = true
			return ref
		}
	} else if p.Server == types.DefaultUserServer && p.User == st.phone {
		ref.FromMe = true
		return ref
	}
	ref.From = phoneOf(ctx, p, types.EmptyJID, st.resolvePN)
	if p.Server == types.HiddenUserServer {
		ref.FromLID = p.User
	}
	return ref
}

// contentOf maps a message's content onto the port's (ok false for what carries nothing the
// port can report: key distribution, sync messages...). Kinds the port does not know are
// network.KindOther.
func contentOf(m *waE2E.Message) (domain.Message, bool) {
	var c domain.Message
	switch {
	case m == nil:
		return c, false
	case m.GetConversation() != "":
		c.Kind, c.Text = domain.KindText, m.GetConversation()
	case m.GetExtendedTextMessage() != nil:
		c.Kind, c.Text = domain.KindText, m.GetExtendedTextMessage().GetText()
	case m.GetImageMessage() != nil:
		x := m.GetImageMessage()
		c.Kind, c.Caption, c.MimeType, c.Size = domain.KindImage, x.GetCaption(), x.GetMimetype(), int64(x.GetFileLength())
	case m.GetStickerMessage() != nil:
		x := m.GetStickerMessage()
		c.Kind, c.MimeType, c.Size = domain.KindSticker, x.GetMimetype(), int64(x.GetFileLength())
	case m.GetVideoMessage() != nil:
		x := m.GetVideoMessage()
		c.Kind, c.Caption, c.MimeType, c.Size = domain.KindVideo, x.GetCaption(), x.GetMimetype(), int64(x.GetFileLength())
	case m.GetAudioMessage() != nil:
		x := m.GetAudioMessage()
		c.Kind, c.MimeType, c.Size, c.PTT = domain.KindAudio, x.GetMimetype(), int64(x.GetFileLength()), x.GetPTT()
	case m.GetDocumentMessage() != nil:
		x := m.GetDocumentMessage()
		c.Kind, c.Caption, c.MimeType, c.FileName, c.Size = domain.KindDocument, x.GetCaption(), x.GetMimetype(), x.GetFileName(), int64(x.GetFileLength())
	case m.GetLocationMessage() != nil:
		x := m.GetLocationMessage()
		c.Kind, c.Lat, c.Lng, c.LocationName, c.Address = domain.KindLocation, x.GetDegreesLatitude(), x.GetDegreesLongitude(), x.GetName(), x.GetAddress()
		c.Text = cmp.Or(x.GetName(), x.GetAddress()) // the location's title, as type text showed it before
	case m.GetContactMessage() != nil:
		x := m.GetContactMessage()
		c.Kind, c.ContactName, c.ContactPhone = domain.KindContact, x.GetDisplayName(), vCardPhone(x.GetVcard())
		c.Text = x.GetDisplayName()
	case m.GetPollCreationMessage() != nil || m.GetPollCreationMessageV2() != nil || m.GetPollCreationMessageV3() != nil:
		x := m.GetPollCreationMessage()
		if x == nil {
			x = m.GetPollCreationMessageV2()
		}
		if x == nil {
			x = m.GetPollCreationMessageV3()
		}
		c.Kind, c.Question, c.Multiple = domain.KindPoll, x.GetName(), x.GetSelectableOptionsCount() != 1
		for _, o := range x.GetOptions() {
			c.Options = append(c.Options, o.GetOptionName())
		}
	default:
		if isEmpty(m) {
			return c, false
		}
		c.Kind = network.KindOther
	}
	return c, true
}

// vCardPhone is the WhatsApp number of a shared contact: the card's waid, else its first TEL.
func vCardPhone(card string) string {
	lines := strings.Split(strings.ReplaceAll(card, "\r\n", "\n"), "\n")
	for _, line := range lines {
		if i := strings.Index(line, "waid="); i >= 0 {
			rest := line[i+len("waid="):]
			if j := strings.IndexAny(rest, ":;"); j >= 0 {
				rest = rest[:j]
			}
			return onlyDigits(rest)
		}
	}
	for _, line := range lines {
		if strings.HasPrefix(strings.ToUpper(line), "TEL") {
			if i := strings.LastIndexByte(line, ':'); i >= 0 {
				return onlyDigits(line[i+1:])
			}
		}
	}
	return ""
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
