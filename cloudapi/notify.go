package cloudapi

import (
	"cmp"
	"strings"
	"time"

	"github.com/gateway/gateway/domain"
)

// Meta's webhook payloads made from the gateway's events, for webhook subscriptions of format
// meta (DESIGN.md section 20): the Cloud-API-shaped front's statuses and incoming messages,
// the same envelope Meta posts, so a Cloud API integration's own webhook parser reads them.

// Number names the business number of a change: the session's id (the front's phone number id)
// and its phone.
type Number struct {
	SessionID, Phone string
}

// notification wraps one change of field messages for number.
func notification(n Number, v Value) Notification {
	v.MessagingProduct = Product
	v.Metadata = Metadata{DisplayPhoneNumber: n.Phone, PhoneNumberID: n.SessionID}
	return Notification{Object: ObjectWABA, Entry: []Entry{{ID: n.SessionID, Changes: []Change{{Field: FieldMessages, Value: v}}}}}
}

// StatusNotification is a sent message's status as Meta posts it; ok is false for a status
// Meta has no word for (queued, scheduled).
func StatusNotification(n Number, d domain.MessageStatusData) (Notification, bool) {
	st := Status{ID: d.MessageID, Timestamp: Timestamp(d.At), RecipientID: cmp.Or(d.Phone, d.Group, d.To)}
	switch d.Status {
	case domain.MsgSent, domain.MsgDelivered, domain.MsgRead:
		st.Status = d.Status
	case domain.MsgFailed, domain.MsgCancelled:
		st.Status = StatusFailed
		msg := cmp.Or(d.Error, d.Code, d.Status)
		st.Errors = []Error{{Code: CodeUndeliverable, Title: msg, Message: msg, ErrorData: &ErrorData{Details: cmp.Or(d.Code, d.Status) + ": " + msg}}}
	default:
		return Notification{}, false
	}
	if d.At.IsZero() {
		st.Timestamp = Timestamp(time.Now())
	}
	return notification(n, Value{Statuses: []Status{st}}), true
}

// MessageNotification is an incoming message as Meta posts it, with its sender's profile.
func MessageNotification(n Number, m domain.InboundMessage) Notification {
	from := cmp.Or(m.Phone, m.From, m.LID)
	in := InboundMessage{From: from, ID: m.ID, Timestamp: Timestamp(m.Timestamp), GroupID: m.Group}
	if m.ReplyTo != "" {
		in.Context = &InboundContext{ID: m.ReplyTo}
	}
	med := &InboundMedia{MimeType: m.MimeType, Caption: m.Caption, Filename: m.FileName, Voice: m.PTT}
	switch domain.Kind(cmp.Or(m.Kind, m.Type)) {
	case domain.KindText:
		in.Type, in.Text = TypeText, &Text{Body: m.Text}
	case domain.KindImage:
		in.Type, in.Image = TypeImage, med
	case domain.KindVideo:
		in.Type, in.Video = TypeVideo, med
	case domain.KindAudio:
		in.Type, in.Audio = TypeAudio, med
	case domain.KindDocument:
		in.Type, in.Document = TypeDocument, med
	case domain.KindSticker:
		in.Type, in.Sticker = TypeSticker, med
	case domain.KindLocation:
		in.Type, in.Location = TypeLocation, &Location{Latitude: Coord(m.Lat), Longitude: Coord(m.Lng), Name: m.Text, Address: m.Address}
	case domain.KindContact:
		in.Type = TypeContacts
		in.Contacts = []Contact{{Name: ContactName{FormattedName: cmp.Or(m.ContactName, m.Text)},
			Phones: []ContactPhone{{Phone: "+" + strings.TrimPrefix(m.ContactPhone, "+"), WaID: strings.TrimPrefix(m.ContactPhone, "+")}}}}
	case domain.KindButtonReply:
		in.Type = TypeInteractive
		in.Interactive = &InboundInteractive{Type: InteractiveButtonReply, ButtonReply: &Choice{ID: m.ButtonID, Title: m.Text}}
	default:
		in.Type = TypeUnsupported
		in.Errors = []Error{{Code: CodeUnsupportedType, Title: "Message type unknown", Message: "Message type unknown",
			ErrorData: &ErrorData{Details: "a " + cmp.Or(m.Kind, m.Type) + " has no Cloud API message type"}}}
	}
	c := WebhookContact{WaID: from}
	if m.Name != "" {
		c.Profile = &Profile{Name: m.Name}
	}
	return notification(n, Value{Contacts: []WebhookContact{c}, Messages: []InboundMessage{in}})
}

// ReactionNotification is a contact's reaction as Meta posts it: an incoming message of type
// reaction (id is the event's: the network gives a reaction no id of its own here).
func ReactionNotification(n Number, id string, r domain.ReactionData) Notification {
	from := cmp.Or(r.Phone, r.From, r.LID)
	in := InboundMessage{From: from, ID: id, Timestamp: Timestamp(r.At), Type: TypeReaction, GroupID: r.Group,
		Reaction: &Reaction{MessageID: r.MessageID, Emoji: r.Emoji}}
	return notification(n, Value{Contacts: []WebhookContact{{WaID: from}}, Messages: []InboundMessage{in}})
}
