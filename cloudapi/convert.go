package cloudapi

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/gateway/gateway/domain"
)

// Conversions between the gateway's domain.Message and the Cloud API's shapes: the one place
// that maps a kind to its Graph payload and back.

// RecipientIndividual is a direct message's recipient_type.
const RecipientIndividual = "individual"

// NewRequest is the Graph request that sends m. Message ids in m (ReplyTo, a reaction's
// Target) are used as they are: the caller gives Meta's ids (wamids). A medium goes by
// m.MediaURL when it has one; otherwise the caller uploads m.Data and sets the medium's ID
// (MediaOf). m.ID goes in biz_opaque_callback_data, so the statuses name it. Kinds the Cloud
// API does not have (polls, edits, revokes) and groups are domain.ErrNotOnCloud.
func NewRequest(m domain.Message) (SendRequest, error) {
	r := SendRequest{MessagingProduct: Product, RecipientType: RecipientIndividual, To: m.To}
	if domain.IsGroup(m.To) {
		return r, fmt.Errorf("%w: groups", domain.ErrNotOnCloud)
	}
	if len(m.ID) <= MaxCallbackData {
		r.BizOpaqueCallbackData = m.ID
	}
	if m.ReplyTo != nil && m.ReplyTo.ID != "" {
		r.Context = &Context{MessageID: m.ReplyTo.ID}
	}
	switch m.Kind {
	case domain.KindText, "":
		r.Type, r.Text = TypeText, &Text{Body: m.Text, PreviewURL: strings.Contains(m.Text, "https://") || strings.Contains(m.Text, "http://")}
	case domain.KindImage, domain.KindVideo, domain.KindAudio, domain.KindDocument, domain.KindSticker:
		r.Type = string(m.Kind)
		med := &Media{Link: m.MediaURL}
		switch m.Kind {
		case domain.KindImage, domain.KindVideo:
			med.Caption = m.Caption
		case domain.KindDocument:
			med.Caption, med.Filename = m.Caption, m.FileName
		case domain.KindAudio:
			med.Voice = m.PTT
		}
		*r.MediaOf() = med
	case domain.KindLocation:
		r.Type = TypeLocation
		r.Location = &Location{Latitude: Coord(m.Lat), Longitude: Coord(m.Lng), Name: m.LocationName, Address: m.Address}
	case domain.KindContact:
		r.Type = TypeContacts
		r.Contacts = []Contact{{Name: ContactName{FormattedName: m.ContactName},
			Phones: []ContactPhone{{Phone: "+" + m.ContactPhone, WaID: m.ContactPhone, Type: "CELL"}}}}
	case domain.KindReaction:
		if m.Target == nil || m.Target.ID == "" {
			return r, fmt.Errorf("%w: a reaction names its message", domain.ErrValidation)
		}
		r.Type, r.Context = TypeReaction, nil
		r.Reaction = &Reaction{MessageID: m.Target.ID, Emoji: m.Emoji}
	case domain.KindTemplate:
		if m.Template == nil {
			return r, fmt.Errorf("%w: a template message names its template", domain.ErrValidation)
		}
		r.Type, r.Template = TypeTemplate, TemplateOf(*m.Template)
	case domain.KindButtons, domain.KindList:
		r.Type, r.Interactive = TypeInteractive, interactiveOf(m)
	default:
		return r, fmt.Errorf("%w: a %s", domain.ErrNotOnCloud, m.Kind)
	}
	return r, nil
}

// MediaOf is where the request's medium goes (image, video, audio, document or sticker by its
// Type); nil for other types.
func (r *SendRequest) MediaOf() **Media {
	switch r.Type {
	case TypeImage:
		return &r.Image
	case TypeVideo:
		return &r.Video
	case TypeAudio:
		return &r.Audio
	case TypeDocument:
		return &r.Document
	case TypeSticker:
		return &r.Sticker
	}
	return nil
}

// TemplateOf is the Graph template of a template send: its body's parameters, named or in
// order, each on one line (FlatParam: Meta refuses a parameter with a line break, a tab or
// more than four spaces in a row, and a message's text wrapped in a cold template has them).
func TemplateOf(t domain.TemplateSend) *Template {
	out := &Template{Name: t.Name, Language: Language{Code: t.Language, Policy: "deterministic"}}
	if len(t.Params) > 0 {
		body := Component{Type: "body"}
		for i, p := range t.Params {
			par := Parameter{Type: "text", Text: FlatParam(p)}
			if i < len(t.Names) {
				par.ParameterName = t.Names[i]
			}
			body.Parameters = append(body.Parameters, par)
		}
		out.Components = []Component{body}
	}
	return out
}

// FlatParam is a template parameter as Meta takes it: every run of white space (line breaks,
// tabs, spaces) one space.
func FlatParam(p string) string {
	if !strings.ContainsAny(p, "\n\r\t") && !strings.Contains(p, "     ") {
		return p
	}
	return strings.Join(strings.Fields(p), " ")
}

func interactiveOf(m domain.Message) *Interactive {
	in := &Interactive{Body: &InteractiveText{Text: m.Text}}
	if m.Header != "" {
		in.Header = &InteractiveHead{Type: "text", Text: m.Header}
	}
	if m.Footer != "" {
		in.Footer = &InteractiveText{Text: m.Footer}
	}
	if m.Kind == domain.KindButtons {
		in.Type = InteractiveButton
		for _, b := range m.Buttons {
			in.Action.Buttons = append(in.Action.Buttons, ActionButton{Type: "reply", Reply: Choice{ID: b.ID, Title: b.Title}})
		}
		return in
	}
	in.Type, in.Action.Button = InteractiveList, m.ListButton
	for _, s := range m.Sections {
		sec := Section{Title: s.Title}
		for _, row := range s.Rows {
			sec.Rows = append(sec.Rows, Choice{ID: row.ID, Title: row.Title, Description: row.Description})
		}
		in.Action.Sections = append(in.Action.Sections, sec)
	}
	return in
}

// Message reads a Graph send request as the gateway's message (what a Cloud-API-shaped front
// accepts): its kind and content, ReplyTo from context, m.ID from biz_opaque_callback_data.
// A medium sent by link is m.MediaURL; one sent by an uploaded id is mediaID, for the caller
// to resolve.
func (r SendRequest) Message() (m domain.Message, mediaID string, err error) {
	m = domain.Message{To: strings.TrimPrefix(r.To, "+"), ID: r.BizOpaqueCallbackData}
	if r.Context != nil && r.Context.MessageID != "" {
		m.ReplyTo = &domain.MessageRef{ID: r.Context.MessageID}
	}
	switch r.Type {
	case TypeText, "":
		if r.Text == nil {
			return m, "", fmt.Errorf("%w: text.body is required", domain.ErrValidation)
		}
		m.Kind, m.Text = domain.KindText, r.Text.Body
	case TypeImage, TypeVideo, TypeAudio, TypeDocument, TypeSticker:
		med := *r.MediaOf()
		if med == nil || (med.ID == "" && med.Link == "") {
			return m, "", fmt.Errorf("%w: %s.id or %s.link is required", domain.ErrValidation, r.Type, r.Type)
		}
		m.Kind, m.MediaURL, m.Caption, m.FileName, m.PTT = domain.Kind(r.Type), med.Link, med.Caption, med.Filename, med.Voice
		mediaID = med.ID
	case TypeLocation:
		if r.Location == nil {
			return m, "", fmt.Errorf("%w: location is required", domain.ErrValidation)
		}
		l := r.Location
		m.Kind, m.Lat, m.Lng, m.LocationName, m.Address = domain.KindLocation, float64(l.Latitude), float64(l.Longitude), l.Name, l.Address
	case TypeContacts:
		if len(r.Contacts) == 0 {
			return m, "", fmt.Errorf("%w: contacts is required", domain.ErrValidation)
		}
		c := r.Contacts[0]
		m.Kind, m.ContactName = domain.KindContact, c.Name.FormattedName
		if len(c.Phones) > 0 {
			m.ContactPhone = strings.TrimPrefix(c.Phones[0].Phone, "+")
		}
	case TypeReaction:
		if r.Reaction == nil {
			return m, "", fmt.Errorf("%w: reaction is required", domain.ErrValidation)
		}
		m.Kind, m.Emoji, m.ReplyTo = domain.KindReaction, r.Reaction.Emoji, nil
		m.Target = &domain.MessageRef{ID: r.Reaction.MessageID}
	case TypeTemplate:
		if r.Template == nil {
			return m, "", fmt.Errorf("%w: template is required", domain.ErrValidation)
		}
		m.Kind, m.Template = domain.KindTemplate, SendOf(*r.Template)
	case TypeInteractive:
		if r.Interactive == nil {
			return m, "", fmt.Errorf("%w: interactive is required", domain.ErrValidation)
		}
		in := r.Interactive
		if in.Body != nil {
			m.Text = in.Body.Text
		}
		if in.Header != nil {
			m.Header = in.Header.Text
		}
		if in.Footer != nil {
			m.Footer = in.Footer.Text
		}
		switch in.Type {
		case InteractiveButton:
			m.Kind = domain.KindButtons
			for _, b := range in.Action.Buttons {
				m.Buttons = append(m.Buttons, domain.Button{ID: b.Reply.ID, Title: b.Reply.Title})
			}
		case InteractiveList:
			m.Kind, m.ListButton = domain.KindList, in.Action.Button
			for _, s := range in.Action.Sections {
				sec := domain.ListSection{Title: s.Title}
				for _, row := range s.Rows {
					sec.Rows = append(sec.Rows, domain.ListRow{ID: row.ID, Title: row.Title, Description: row.Description})
				}
				m.Sections = append(m.Sections, sec)
			}
		default:
			return m, "", fmt.Errorf("%w: interactive type %q", domain.ErrNotOnCloud, in.Type)
		}
	default:
		return m, "", fmt.Errorf("%w: type %q", domain.ErrValidation, r.Type)
	}
	return m, mediaID, nil
}

// SendOf reads a Graph template as a template send: its body's parameters, in order.
func SendOf(t Template) *domain.TemplateSend {
	out := &domain.TemplateSend{Name: t.Name, Language: t.Language.Code}
	for _, c := range t.Components {
		if !strings.EqualFold(c.Type, "body") {
			continue
		}
		for _, p := range c.Parameters {
			out.Params = append(out.Params, p.Text)
			if p.ParameterName != "" {
				out.Names = append(out.Names, p.ParameterName)
			}
		}
	}
	return out
}

// KindOther is the kind of an incoming message the gateway has no kind for.
const KindOther domain.Kind = "other"

// Message reads an incoming message's content (a reaction is not a message: Reaction). Its
// ReplyTo names the quoted message by Meta's id.
func (in InboundMessage) Message() domain.Message {
	m := domain.Message{ID: in.ID, To: ""}
	if in.Context != nil && in.Context.ID != "" {
		m.ReplyTo = &domain.MessageRef{ID: in.Context.ID}
	}
	media := func(k domain.Kind, med *InboundMedia) {
		m.Kind = k
		if med != nil {
			m.MimeType, m.Caption, m.FileName, m.PTT = med.MimeType, med.Caption, med.Filename, med.Voice
		}
	}
	switch in.Type {
	case TypeText:
		m.Kind = domain.KindText
		if in.Text != nil {
			m.Text = in.Text.Body
		}
	case TypeImage:
		media(domain.KindImage, in.Image)
	case TypeVideo:
		media(domain.KindVideo, in.Video)
	case TypeAudio:
		media(domain.KindAudio, in.Audio)
	case TypeDocument:
		media(domain.KindDocument, in.Document)
	case TypeSticker:
		media(domain.KindSticker, in.Sticker)
	case TypeLocation:
		m.Kind = domain.KindLocation
		if l := in.Location; l != nil {
			m.Lat, m.Lng, m.LocationName, m.Address = float64(l.Latitude), float64(l.Longitude), l.Name, l.Address
		}
	case TypeContacts:
		m.Kind = domain.KindContact
		if len(in.Contacts) > 0 {
			c := in.Contacts[0]
			m.ContactName = c.Name.FormattedName
			if len(c.Phones) > 0 {
				m.ContactPhone = strings.TrimPrefix(cmp.Or(c.Phones[0].WaID, c.Phones[0].Phone), "+")
			}
		}
	case TypeInteractive:
		m.Kind = domain.KindButtonReply
		if it := in.Interactive; it != nil {
			c := it.ButtonReply
			if c == nil {
				c = it.ListReply
			}
			if c != nil {
				m.Text, m.ButtonID = c.Title, c.ID
			}
		}
	case TypeButton:
		m.Kind = domain.KindButtonReply
		if in.Button != nil {
			m.Text, m.ButtonID = in.Button.Text, in.Button.Payload
		}
	default:
		m.Kind = KindOther
	}
	return m
}
