package httpapi

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/internal/jsonenc"
)

// maxText is the longest text body accepted (the messaging network's own limit).
const maxText = domain.MaxTextBytes

type sentJSON struct {
	Success   bool      `json:"success"`
	MessageID string    `json:"message_id"`
	To        string    `json:"to"`
	Session   string    `json:"session"`
	Timestamp timestamp `json:"timestamp"`
	Status    string    `json:"status"`
	// Phone and LID name the recipient (its LID where the network gave one); Group instead of
	// Phone for a message to a group.
	Phone string `json:"phone,omitempty"`
	LID   string `json:"lid,omitempty"`
	Group string `json:"group,omitempty"`
	// Type and Target: an edit, a revoke or a cancellation (DELETE) says what it did to which
	// message.
	Type   string `json:"type,omitempty"`
	Target string `json:"target,omitempty"`
	// Via and ViaReason: the way the account's routing sent it (DESIGN.md section 17); Code
	// waiting_for_contact while it waits for its contact.
	Via       string `json:"via,omitempty"`
	ViaReason string `json:"viaReason,omitempty"`
	Code      string `json:"code,omitempty"`
}

func sentResponse(e *domain.OutboxEntry) sentJSON {
	ts := e.CreatedAt.Time()
	if e.SentAt != 0 {
		ts = e.SentAt.Time()
	}
	j := sentJSON{Success: true, MessageID: e.ID, To: e.Message.To, Session: e.SessionID, Timestamp: timestamp(ts), Status: e.Status, LID: e.LID}
	if domain.IsGroup(e.Message.To) {
		j.Group = e.Message.To
	} else {
		j.Phone = e.Message.To
	}
	if k := e.Message.Kind; (k == domain.KindEdit || k == domain.KindRevoke) && e.Message.Target != nil {
		j.Type, j.Target = string(k), e.Message.Target.ID
	}
	j.Via, j.ViaReason, j.Code = e.Via, e.ViaReason, waitingCode(*e)
	return j
}

// appendJSON appends the answer's JSON as writeJSON would write it, by hand: one per accepted
// message, where the reflecting encoder (and the timestamp's MarshalJSON through it) was 3 % of
// a send's CPU.
func (j *sentJSON) appendJSON(b []byte) []byte {
	b = strconv.AppendBool(append(b, `{"success":`...), j.Success)
	b = jsonenc.AppendString(append(b, `,"message_id":`...), j.MessageID)
	b = jsonenc.AppendString(append(b, `,"to":`...), j.To)
	b = jsonenc.AppendString(append(b, `,"session":`...), j.Session)
	b = appendTS(append(b, `,"timestamp":"`...), time.Time(j.Timestamp))
	b = jsonenc.AppendString(append(b, `","status":`...), j.Status)
	b = jsonenc.AppendField(b, `,"phone":`, j.Phone)
	b = jsonenc.AppendField(b, `,"lid":`, j.LID)
	b = jsonenc.AppendField(b, `,"group":`, j.Group)
	b = jsonenc.AppendField(b, `,"type":`, j.Type)
	b = jsonenc.AppendField(b, `,"target":`, j.Target)
	b = jsonenc.AppendField(b, `,"via":`, j.Via)
	b = jsonenc.AppendField(b, `,"viaReason":`, j.ViaReason)
	b = jsonenc.AppendField(b, `,"code":`, j.Code)
	return append(b, "}\n"...)
}

// writeSent answers 200 with a message as sent (or queued). The entry by pointer, as send and
// accept take their request: a send's request (672 bytes) and its entry (752) were each copied
// from call to call, about 0.6 µs of a send in the send path's profile (bench/README.md,
// seventeenth pass).
func writeSent(ctx *fasthttp.RequestCtx, e *domain.OutboxEntry) {
	j := sentResponse(e)
	writeSentJSON(ctx, &j)
}

// writeSentJSON answers 200 with j. By pointer, as appendJSON reads it: the answer's fields are
// 16 words of strings, copied twice a send when they were passed by value.
func writeSentJSON(ctx *fasthttp.RequestCtx, j *sentJSON) {
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.SetStatusCode(fasthttp.StatusOK)
	var buf [320]byte
	_, _ = ctx.Write(j.appendJSON(buf[:0]))
}

// replayMessage answers a retried v1 send from the message its Idempotency-Key made, as it
// stands now.
func (s *Server) replayMessage(ctx *fasthttp.RequestCtx, uid string, rec domain.IdemRecord) error {
	e, err := s.engine(ctx).Messages.Replay(uid, rec.MessageID)
	if err != nil {
		return err
	}
	writeSent(ctx, &e)
	return nil
}

// v1Send is POST /api/v1/messages/send: every kind (DESIGN.md section 16), scope send_text
// (send_media for media). The body is read before the key is checked (the kind names the
// scope); a body that does not parse is answered once the key is.
func (s *Server) v1Send(ctx *fasthttp.RequestCtx) error {
	req := messageRequests.Get().(*messageRequest)
	defer putMessageRequest(req)
	defer s.slowSends.observe(ctx, &req.times) // after the answer, before the request goes back
	perr := decodeMessage(ctx, req)
	scope := engine.ScopeText
	if perr == nil && domain.Kind(req.Type).Media() {
		scope = engine.ScopeMedia
	}
	return s.v1Post(ctx, scope, func(key domain.Grant, idem *engine.Idem) error {
		req.times.keyed = keyedAt(ctx)
		if perr != nil {
			return perr
		}
		msg, err := s.messageOf(ctx, req, "message", "media")
		if err != nil {
			return err
		}
		r := engine.SendRequest{UserID: key.Key.UserID, SessionID: req.SessionID, Origin: "api", Message: msg, Trace: &req.times.trace}
		if err := req.apply(&r); err != nil {
			return err
		}
		return s.send(ctx, &r, idem, true)
	}, func(uid string, rec domain.IdemRecord) error { return s.replayMessage(ctx, uid, rec) })
}

// keyedAt is when a v1 send's key was checked, for the slow-send report: fasthttp's reading as
// it called the handler moved on by the monotonic clock, which is half of time.Now's reading
// (a wall and a monotonic clock; a clock read is 0.1-0.2 µs of a send under load, the
// seventeenth pass). A RequestCtx not served by fasthttp's server has no reading: time.Now.
func keyedAt(ctx *fasthttp.RequestCtx) time.Time {
	start := ctx.Time()
	if start.IsZero() {
		return time.Now()
	}
	return start.Add(time.Since(start))
}

// messageRequests are v1 sends' requests, reused: a request's optional fields point into its
// own vals, so it lived on the heap, a 600-byte allocation per send. Nothing keeps a request
// past its handler (the message is built from copies of its strings), and it goes back
// zeroed (decodeMessage reads into a zero request).
var messageRequests = sync.Pool{New: func() any { return new(messageRequest) }}

func putMessageRequest(r *messageRequest) {
	*r = messageRequest{}
	messageRequests.Put(r)
}

type sendImageRequest struct {
	To                *string `json:"to"`
	Image             *string `json:"image"`
	Caption           string  `json:"caption"`
	FileName          string  `json:"fileName"`
	SessionID         string  `json:"session_id"`
	to, image, sendAt string  // what To, Image and SendAt point to, when the fast decoder read them
	sendOptions
}

// v1SendImage is POST /api/v1/messages/send-image (scope send_media).
func (s *Server) v1SendImage(ctx *fasthttp.RequestCtx) error {
	return s.v1Post(ctx, engine.ScopeMedia, func(key domain.Grant, idem *engine.Idem) error {
		var req sendImageRequest
		if err := decodeSendImage(ctx, &req); err != nil {
			return err
		}
		to, err := requireRecipient("to", req.To)
		if err != nil {
			return err
		}
		if req.Image == nil || strings.TrimSpace(*req.Image) == "" {
			return missing("image")
		}
		m, err := s.media.Load(s.reqContext(ctx), strings.TrimSpace(*req.Image))
		if err == nil {
			err = checkImage(m)
		}
		if err != nil {
			return err
		}
		name := req.FileName
		if name == "" {
			name = "image.png"
		}
		msg := domain.Message{To: to, Kind: domain.KindImage, Caption: req.Caption, FileName: name, MimeType: m.MimeType, Data: m.Data}
		r := engine.SendRequest{UserID: key.Key.UserID, SessionID: req.SessionID, Origin: "api", Message: msg}
		if err := req.apply(&r); err != nil {
			return err
		}
		return s.send(ctx, &r, idem, true)
	}, func(uid string, rec domain.IdemRecord) error { return s.replayMessage(ctx, uid, rec) })
}

// messageRequest is a send of any kind: POST /api/v1/messages/send and the dashboard's POST
// /api/client/send. The text is `message` (v1) or `text` (the dashboard), the media `media` (v1)
// or `fileUrl` (the dashboard): each route takes either name.
type messageRequest struct {
	Phone   *string `json:"phone"`
	Type    string  `json:"type"`
	Message *string `json:"message"`
	Text    *string `json:"text"`
	// Media kinds.
	Media    *string `json:"media"`
	FileURL  *string `json:"fileUrl"`
	FileName string  `json:"fileName"`
	Caption  string  `json:"caption"`
	PTT      bool    `json:"ptt"`
	// Location.
	Lat     *float64 `json:"lat"`
	Lng     *float64 `json:"lng"`
	Name    string   `json:"name"`
	Address string   `json:"address"`
	// Contact card.
	ContactName  *string `json:"contactName"`
	ContactPhone *string `json:"contactPhone"`
	// Poll.
	Question *string  `json:"question"`
	Options  []string `json:"options"`
	Multiple bool     `json:"multiple"`
	// Reaction.
	MessageID *string `json:"messageId"`
	Emoji     *string `json:"emoji"`
	// The Cloud API's kinds (cloudsend.go): a template; buttons and lists (the text is the
	// body).
	Template *templateRequest     `json:"template"`
	Buttons  []domain.Button      `json:"buttons"`
	Button   string               `json:"button"`
	Sections []domain.ListSection `json:"sections"`
	Header   string               `json:"header"`
	Footer   string               `json:"footer"`
	// Every kind.
	ReplyTo   string `json:"replyTo"`
	Typing    bool   `json:"typing"`
	SessionID string `json:"session_id"`
	// Send later, and to a phone that opted out (DESIGN.md section 18).
	sendOptions
	// vals: what the optional fields point to when the fast decoder read them (fastjson.go).
	vals messageVals
	// uploaded: the media, uploaded to the Cloud-API-shaped front and sent by its id (front.go).
	uploaded *Media
	// times: when a v1 send's steps began (slowsend.go).
	times sendTimes
}

// Limits of a poll and a reaction's emoji.
const (
	pollTextMax = 255
	emojiMax    = 32 // bytes: one emoji with its modifiers and joiners
)

// clientSend is POST /api/client/send: every message kind from the dashboard.
func (s *Server) clientSend(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req messageRequest
	if err := decodeMessage(ctx, &req); err != nil {
		return err
	}
	msg, err := s.messageOf(ctx, &req, "text", "fileUrl")
	if err != nil {
		return err
	}
	r := engine.SendRequest{UserID: u.ID, SessionID: req.SessionID, Origin: "dashboard", Message: msg}
	if err := req.apply(&r); err != nil {
		return err
	}
	return s.send(ctx, &r, nil, false)
}

// messageOf validates a send of any kind and builds its message, loading media. textField and
// mediaField name the route's own names of the text and the media, in errors. It reads req (by
// pointer: a request is about 700 bytes, copied on every v1 send when it was passed by value).
func (s *Server) messageOf(ctx *fasthttp.RequestCtx, req *messageRequest, textField, mediaField string) (domain.Message, error) {
	kind := domain.Kind(req.Type)
	if kind == "" {
		kind = domain.KindText
	}
	if !slices.Contains(domain.SendKinds, kind) {
		return domain.Message{}, badInput("validation_failed", "type must be one of text, image, video, audio, document, sticker, location, contact, poll, reaction, template, buttons, list")
	}
	msg := domain.Message{Kind: kind, Typing: req.Typing}
	if kind != domain.KindReaction || (req.Phone != nil && strings.TrimSpace(*req.Phone) != "") {
		to, err := requireRecipient("phone", req.Phone)
		if err != nil {
			return msg, err
		}
		msg.To = to
	}
	if req.ReplyTo != "" {
		if kind == domain.KindReaction {
			return msg, badInput("validation_failed", "a reaction cannot reply; messageId names the message it is about")
		}
		msg.ReplyTo = &domain.MessageRef{ID: req.ReplyTo}
	}
	if req.PTT && kind != domain.KindAudio {
		return msg, badInput("validation_failed", "ptt is for type audio (a voice note)")
	}
	var err error
	switch kind {
	case domain.KindText:
		text := req.Message
		if text == nil {
			text = req.Text
		}
		msg.Text, err = requireText(textField, text)
	case domain.KindImage, domain.KindVideo, domain.KindAudio, domain.KindDocument, domain.KindSticker:
		err = s.mediaOf(ctx, &msg, req, mediaField)
	case domain.KindLocation:
		switch {
		case req.Lat == nil:
			err = badInput("validation_failed", "lat is required for type location")
		case req.Lng == nil:
			err = badInput("validation_failed", "lng is required for type location")
		case *req.Lat < -90 || *req.Lat > 90 || *req.Lng < -180 || *req.Lng > 180:
			err = badInput("validation_failed", "lat must be -90 to 90 and lng -180 to 180")
		}
		msg.Lat, msg.Lng, msg.LocationName, msg.Address = derefF(req.Lat), derefF(req.Lng), strings.TrimSpace(req.Name), strings.TrimSpace(req.Address)
	case domain.KindContact:
		if req.ContactName == nil || strings.TrimSpace(*req.ContactName) == "" {
			return msg, badInput("validation_failed", "contactName is required for type contact")
		}
		msg.ContactName = strings.TrimSpace(*req.ContactName)
		msg.ContactPhone, err = requirePhone("contactPhone", req.ContactPhone)
	case domain.KindPoll:
		err = pollOf(&msg, req)
	case domain.KindReaction:
		if req.MessageID == nil || strings.TrimSpace(*req.MessageID) == "" {
			return msg, badInput("validation_failed", "messageId is required for type reaction: the message reacted to")
		}
		if req.Emoji == nil {
			return msg, badInput("validation_failed", `emoji is required for type reaction ("" takes the reaction back)`)
		}
		if e := strings.TrimSpace(*req.Emoji); e != "" && (len(e) > emojiMax || !domain.IsOneEmoji(e)) {
			return msg, badInput("validation_failed", "emoji must be one emoji")
		}
		msg.Target, msg.Emoji = &domain.MessageRef{ID: strings.TrimSpace(*req.MessageID)}, strings.TrimSpace(*req.Emoji)
	case domain.KindTemplate, domain.KindButtons, domain.KindList:
		err = cloudKindOf(&msg, req, textField)
	}
	return msg, err
}

func derefF(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

// pollOf reads a poll: a question and 2 to 12 distinct options.
func pollOf(msg *domain.Message, req *messageRequest) error {
	if req.Question == nil || strings.TrimSpace(*req.Question) == "" {
		return badInput("validation_failed", "question is required for type poll")
	}
	q := strings.TrimSpace(*req.Question)
	if utf8.RuneCountInString(q) > pollTextMax || !utf8.ValidString(q) {
		return badInput("validation_failed", "question must be valid UTF-8 of at most %d characters", pollTextMax)
	}
	if len(req.Options) < domain.PollMinOptions || len(req.Options) > domain.PollMaxOptions {
		return badInput("validation_failed", "options must hold %d to %d answers", domain.PollMinOptions, domain.PollMaxOptions)
	}
	opts := make([]string, 0, len(req.Options))
	for _, o := range req.Options {
		o = strings.TrimSpace(o)
		if o == "" || utf8.RuneCountInString(o) > 100 || !utf8.ValidString(o) {
			return badInput("validation_failed", "each option must be 1 to 100 characters")
		}
		if slices.Contains(opts, o) {
			return badInput("validation_failed", "options must be distinct (%q twice)", o)
		}
		opts = append(opts, o)
	}
	msg.Question, msg.Options, msg.Multiple = q, opts, req.Multiple
	return nil
}

// mediaOf loads a media kind's file (a URL or a data URI) and checks it is of that kind: an
// image for image (JPEG, PNG, GIF, WebP), WebP for a sticker, a video or audio file for those.
func (s *Server) mediaOf(ctx *fasthttp.RequestCtx, msg *domain.Message, req *messageRequest, field string) error {
	src := req.Media
	if src == nil {
		src = req.FileURL
	}
	kind := msg.Kind
	var m Media
	if req.uploaded != nil { // an upload to the Cloud-API-shaped front, sent by its id
		m, src = *req.uploaded, new(string)
	} else {
		if src == nil || strings.TrimSpace(*src) == "" {
			return badInput("validation_failed", "%s is required for type %s", field, kind)
		}
		var err error
		if m, err = s.media.Load(s.reqContext(ctx), strings.TrimSpace(*src)); err != nil {
			return err
		}
	}
	switch kind {
	case domain.KindDocument:
	case domain.KindSticker:
		if m.MimeType != "image/webp" {
			return fmt.Errorf("%w: a sticker must be WebP, not %s", domain.ErrMediaType, m.MimeType)
		}
	default:
		if mediaKind(m.MimeType) != string(kind) {
			return fmt.Errorf("%w: %s is not %s", domain.ErrMediaType, m.MimeType, kindArticle(kind))
		}
	}
	if kind == domain.KindImage {
		if err := checkImage(m); err != nil {
			return err
		}
	}
	if kind == domain.KindAudio && m.MimeType == "application/ogg" {
		m.MimeType = "audio/ogg" // an Ogg container sent as audio is a voice note
	}
	if kind == domain.KindAudio && s.cfg.AudioCheck != nil {
		if err := s.cfg.AudioCheck(m.Data, m.MimeType, req.PTT); err != nil {
			return fmt.Errorf("%w: %w", domain.ErrMediaType, err)
		}
	}
	msg.Data, msg.MimeType, msg.FileName, msg.PTT = m.Data, m.MimeType, req.FileName, req.PTT
	if u := strings.TrimSpace(*src); strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		msg.MediaURL = u // a network that sends media by link (the Cloud API) sends this
	}
	if msg.FileName == "" {
		msg.FileName = m.FileName
	}
	if kind != domain.KindAudio && kind != domain.KindSticker {
		msg.Caption = req.Caption
	}
	return nil
}

func kindArticle(k domain.Kind) string {
	if k == domain.KindAudio || k == domain.KindImage {
		return "an " + string(k)
	}
	return "a " + string(k)
}

type templateTestRequest struct {
	Phone *string `json:"phone"`
	Text  *string `json:"text"`
}

// templateTest is POST /api/client/templates/test: sends a text to a phone from the dashboard.
func (s *Server) templateTest(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req templateTestRequest
	if err := bind(ctx, &req); err != nil {
		return err
	}
	phone, err := requirePhone("phone", req.Phone)
	if err != nil {
		return err
	}
	text, err := requireText("text", req.Text)
	if err != nil {
		return err
	}
	return s.send(ctx, &engine.SendRequest{UserID: u.ID, Origin: "dashboard", Message: domain.Message{To: phone, Kind: domain.KindText, Text: text}}, nil, false)
}

// dashboardWait is how long a dashboard send waits for the network's outcome by default: a
// person is watching (DESIGN.md section 9). v1 sends answer once queued unless asked to wait.
const dashboardWait = 15 * time.Second

// send asks the engine to accept (and, if asked, wait for) a message and writes the response,
// the message's id and status (a dashboard follows it on the Messages screen). v1 answers once
// queued by default; the dashboard (v1 false) waits dashboardWait.
func (s *Server) send(ctx *fasthttp.RequestCtx, r *engine.SendRequest, idem *engine.Idem, v1 bool) error {
	entry, err := s.accept(ctx, r, idem, v1)
	if err != nil {
		return err
	}
	writeSent(ctx, &entry)
	return nil
}

// accept is send without the answer: the message as accepted (or its outcome, when asked to
// wait). The Cloud-API-shaped front answers it in Meta's shape (front.go). It sets r's wait and
// idempotency fields.
func (s *Server) accept(ctx *fasthttp.RequestCtx, r *engine.SendRequest, idem *engine.Idem, v1 bool) (domain.OutboxEntry, error) {
	def := time.Duration(0)
	if !v1 {
		def = dashboardWait
	}
	wait, err := waitOf(ctx, def)
	if err != nil {
		return domain.OutboxEntry{}, err
	}
	r.Wait = wait
	if idem != nil {
		r.Message.ID = idem.Derived()
		r.IdemID = idem.ID()
		r.Idem = domain.IdemRecord{BodyHash: idem.BodyHash}
	}
	entry, err := s.engine(ctx).Messages.Send(s.reqContext(ctx), *r)
	s.metrics.send(r.Origin, err)
	return entry, err
}

type messageJSON struct {
	routeJSON
	Success   bool          `json:"success"`
	ID        string        `json:"id"`
	MessageID string        `json:"message_id"`
	Status    string        `json:"status"`
	To        string        `json:"to"`
	Session   string        `json:"session"`
	Type      string        `json:"type"`
	CreatedAt timestamp     `json:"created_at"`
	SentAt    *timestamp    `json:"sent_at"`
	Code      string        `json:"code,omitempty"`
	Error     string        `json:"error,omitempty"`
	Attempts  int           `json:"attempts"`
	History   []historyJSON `json:"history"`
	// SendAt: a message accepted for later goes then (scheduled until then).
	SendAt *timestamp `json:"sendAt,omitempty"`
	contentJSON
}

type historyJSON struct {
	Status string    `json:"status"`
	At     timestamp `json:"at"`
}

// v1Message is GET /api/v1/messages/{id}: one of the key owner's messages.
func (s *Server) v1Message(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, "")
	if err != nil {
		return err
	}
	id, _ := ctx.UserValue("id").(string)
	msgs := s.engine(ctx).Messages
	m, err := msgs.Get(key.Key.UserID, id)
	if err != nil {
		return err
	}
	n, err := msgs.Notes(key.Key.UserID, id)
	if err != nil {
		return err
	}
	if m.LID == "" {
		m.LID = msgs.LID(m.Message.To)
	}
	hist := make([]historyJSON, len(m.History))
	for i, h := range m.History {
		hist[i] = historyJSON{Status: h.Status, At: timestamp(h.At.Time())}
	}
	writeJSON(ctx, fasthttp.StatusOK, messageJSON{
		Success: true, ID: m.ID, MessageID: m.ID, Status: m.Status, To: m.Message.To, Session: m.SessionID,
		Type: string(m.Message.Kind), CreatedAt: timestamp(m.CreatedAt.Time()), SentAt: sentAt(m.SentAt),
		Code: cmp.Or(m.Code, waitingCode(m)), Error: m.Error, Attempts: m.Attempts, History: hist, SendAt: sentAt(m.SendAt),
		contentJSON: contentOf(m.Message, m.Message.To, m.LID, n), routeJSON: routeOf(m),
	})
	return nil
}

// requireRecipient reads a send's recipient: a phone number or a group id (…@g.us).
func requireRecipient(field string, v *string) (string, error) {
	if v == nil || strings.TrimSpace(*v) == "" {
		return "", missing(field)
	}
	p, err := engine.NormalizeRecipient(*v)
	if err != nil {
		return "", fmt.Errorf("%w (%s)", err, field)
	}
	return p, nil
}

func requirePhone(field string, v *string) (string, error) {
	if v == nil || strings.TrimSpace(*v) == "" {
		return "", missing(field)
	}
	p, err := engine.NormalizePhone(*v)
	if err != nil {
		return "", fmt.Errorf("%w (%s)", err, field)
	}
	return p, nil
}

func requireText(field string, v *string) (string, error) {
	if v == nil || strings.TrimSpace(*v) == "" {
		return "", missing(field)
	}
	if len(*v) > maxText || !utf8.ValidString(*v) {
		return "", badInput("validation_failed", "%s must be valid UTF-8 of at most %d bytes", field, maxText)
	}
	return *v, nil
}

// mediaBodyLimit is the body cap for a route that carries media of up to maxBytes inline: base64
// (4/3), line breaks and escaped slashes (5 %), and room for the other fields.
func mediaBodyLimit(maxBytes int64) int {
	return int(maxBytes/3*4*105/100) + 64<<10
}

func sentAt(m domain.Millis) *timestamp {
	if m == 0 {
		return nil
	}
	t := timestamp(m.Time())
	return &t
}
