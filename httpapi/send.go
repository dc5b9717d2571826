package httpapi

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/internal/jsonenc"
)

// maxText is the longest text body accepted (the messaging network's own limit is 65,536).
const maxText = 65536

type sendRequest struct {
	Phone   *string `json:"phone"`
	Message *string `json:"message"`
	Type    *string `json:"type"`
	sendOptions
}

type sentJSON struct {
	Success   bool      `json:"success"`
	MessageID string    `json:"message_id"`
	To        string    `json:"to"`
	Session   string    `json:"session"`
	Timestamp timestamp `json:"timestamp"`
	Status    string    `json:"status"`
}

func sentResponse(e domain.OutboxEntry) sentJSON {
	ts := e.CreatedAt.Time()
	if e.SentAt != 0 {
		ts = e.SentAt.Time()
	}
	return sentJSON{Success: true, MessageID: e.ID, To: e.Message.To, Session: e.SessionID, Timestamp: timestamp(ts), Status: e.Status}
}

// appendJSON appends the answer's JSON as writeJSON would write it, by hand: one per accepted
// message, where the reflecting encoder (and the timestamp's MarshalJSON through it) was 3 % of
// a send's CPU.
func (j sentJSON) appendJSON(b []byte) []byte {
	b = strconv.AppendBool(append(b, `{"success":`...), j.Success)
	b = jsonenc.AppendString(append(b, `,"message_id":`...), j.MessageID)
	b = jsonenc.AppendString(append(b, `,"to":`...), j.To)
	b = jsonenc.AppendString(append(b, `,"session":`...), j.Session)
	b = time.Time(j.Timestamp).UTC().AppendFormat(append(b, `,"timestamp":"`...), tsLayout)
	b = jsonenc.AppendString(append(b, `","status":`...), j.Status)
	return append(b, "}\n"...)
}

// writeSent answers 200 with a message as sent (or queued).
func writeSent(ctx *fasthttp.RequestCtx, e domain.OutboxEntry) {
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.SetStatusCode(fasthttp.StatusOK)
	var buf [256]byte
	_, _ = ctx.Write(sentResponse(e).appendJSON(buf[:0]))
}

// replayMessage answers a retried v1 send from the message its Idempotency-Key made, as it
// stands now.
func (s *Server) replayMessage(ctx *fasthttp.RequestCtx, uid string, rec domain.IdemRecord) error {
	e, err := s.engine(ctx).Messages.Replay(uid, rec.MessageID)
	if err != nil {
		return err
	}
	writeSent(ctx, e)
	return nil
}

// v1Send is POST /api/v1/messages/send (scope send_text).
func (s *Server) v1Send(ctx *fasthttp.RequestCtx) error {
	return s.v1Post(ctx, engine.ScopeText, func(key domain.Grant, idem *engine.Idem) error {
		var req sendRequest
		if err := bind(ctx, &req); err != nil {
			return err
		}
		if req.Type != nil && *req.Type != "" && *req.Type != "text" {
			return badInput("validation_failed", "type must be text (send images with /api/v1/messages/send-image)")
		}
		phone, err := requirePhone("phone", req.Phone)
		if err != nil {
			return err
		}
		text, err := requireText("message", req.Message)
		if err != nil {
			return err
		}
		r := engine.SendRequest{UserID: key.Key.UserID, Origin: "api", Message: domain.Message{To: phone, Kind: domain.KindText, Text: text}}
		if err := req.apply(&r); err != nil {
			return err
		}
		return s.send(ctx, r, idem, true)
	}, func(uid string, rec domain.IdemRecord) error { return s.replayMessage(ctx, uid, rec) })
}

type sendImageRequest struct {
	To        *string `json:"to"`
	Image     *string `json:"image"`
	Caption   string  `json:"caption"`
	FileName  string  `json:"fileName"`
	SessionID string  `json:"session_id"`
	sendOptions
}

// v1SendImage is POST /api/v1/messages/send-image (scope send_media).
func (s *Server) v1SendImage(ctx *fasthttp.RequestCtx) error {
	return s.v1Post(ctx, engine.ScopeMedia, func(key domain.Grant, idem *engine.Idem) error {
		var req sendImageRequest
		if err := bind(ctx, &req); err != nil {
			return err
		}
		to, err := requirePhone("to", req.To)
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
		return s.send(ctx, r, idem, true)
	}, func(uid string, rec domain.IdemRecord) error { return s.replayMessage(ctx, uid, rec) })
}

type clientSendRequest struct {
	Phone        *string  `json:"phone"`
	Type         string   `json:"type"`
	Text         *string  `json:"text"`
	FileURL      *string  `json:"fileUrl"`
	FileName     string   `json:"fileName"`
	Caption      string   `json:"caption"`
	Lat          *float64 `json:"lat"`
	Lng          *float64 `json:"lng"`
	Address      string   `json:"address"`
	ContactName  *string  `json:"contactName"`
	ContactPhone *string  `json:"contactPhone"`
	sendOptions
}

// clientSend is POST /api/client/send: every message kind from the dashboard.
func (s *Server) clientSend(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req clientSendRequest
	if err := bind(ctx, &req); err != nil {
		return err
	}
	msg, err := s.clientMessage(ctx, req)
	if err != nil {
		return err
	}
	r := engine.SendRequest{UserID: u.ID, Origin: "dashboard", Message: msg}
	if err := req.apply(&r); err != nil {
		return err
	}
	return s.send(ctx, r, nil, false)
}

// clientMessage validates a dashboard send and builds the message, loading media.
func (s *Server) clientMessage(ctx *fasthttp.RequestCtx, req clientSendRequest) (domain.Message, error) {
	phone, err := requirePhone("phone", req.Phone)
	if err != nil {
		return domain.Message{}, err
	}
	kind := domain.Kind(req.Type)
	if kind == "" {
		kind = domain.KindText
	}
	msg := domain.Message{To: phone, Kind: kind}
	switch kind {
	case domain.KindText:
		if msg.Text, err = requireText("text", req.Text); err != nil {
			return msg, err
		}
	case domain.KindImage, domain.KindVideo, domain.KindAudio, domain.KindDocument:
		if req.FileURL == nil || strings.TrimSpace(*req.FileURL) == "" {
			return msg, badInput("validation_failed", "fileUrl is required for type %s", kind)
		}
		m, err := s.media.Load(s.reqContext(ctx), strings.TrimSpace(*req.FileURL))
		if err != nil {
			return msg, err
		}
		if kind != domain.KindDocument && mediaKind(m.MimeType) != string(kind) {
			return msg, fmt.Errorf("%w: %s is not %s", domain.ErrMediaType, m.MimeType, kindArticle(kind))
		}
		if kind == domain.KindImage {
			if err := checkImage(m); err != nil {
				return msg, err
			}
		}
		if kind == domain.KindAudio && m.MimeType == "application/ogg" {
			m.MimeType = "audio/ogg" // an Ogg container sent as audio is a voice note
		}
		if kind == domain.KindAudio && s.cfg.AudioCheck != nil {
			if err := s.cfg.AudioCheck(m.Data, m.MimeType); err != nil {
				return msg, fmt.Errorf("%w: %w", domain.ErrMediaType, err)
			}
		}
		msg.Data, msg.MimeType, msg.FileName = m.Data, m.MimeType, req.FileName
		if msg.FileName == "" {
			msg.FileName = m.FileName
		}
		if kind != domain.KindAudio {
			msg.Caption = req.Caption
		}
	case domain.KindLocation:
		if req.Lat == nil {
			return msg, badInput("validation_failed", "lat is required for type location")
		}
		if req.Lng == nil {
			return msg, badInput("validation_failed", "lng is required for type location")
		}
		if *req.Lat < -90 || *req.Lat > 90 || *req.Lng < -180 || *req.Lng > 180 {
			return msg, badInput("validation_failed", "lat must be -90 to 90 and lng -180 to 180")
		}
		msg.Lat, msg.Lng, msg.Address = *req.Lat, *req.Lng, req.Address
	case domain.KindContact:
		if req.ContactName == nil || strings.TrimSpace(*req.ContactName) == "" {
			return msg, badInput("validation_failed", "contactName is required for type contact")
		}
		cp, err := requirePhone("contactPhone", req.ContactPhone)
		if err != nil {
			return msg, err
		}
		msg.ContactName, msg.ContactPhone = strings.TrimSpace(*req.ContactName), cp
	default:
		return msg, badInput("validation_failed", "type must be one of text, image, video, audio, document, location, contact")
	}
	return msg, nil
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
	return s.send(ctx, engine.SendRequest{UserID: u.ID, Origin: "dashboard", Message: domain.Message{To: phone, Kind: domain.KindText, Text: text}}, nil, false)
}

// dashboardWait is how long a dashboard send waits for the network's outcome by default: a
// person is watching (DESIGN.md section 9). v1 sends answer once queued unless asked to wait.
const dashboardWait = 15 * time.Second

// send asks the engine to accept (and, if asked, wait for) a message and writes the response,
// the message's id and status (a dashboard follows it on the Messages screen). v1 answers once
// queued by default; the dashboard (v1 false) waits dashboardWait.
func (s *Server) send(ctx *fasthttp.RequestCtx, r engine.SendRequest, idem *engine.Idem, v1 bool) error {
	def := time.Duration(0)
	if !v1 {
		def = dashboardWait
	}
	wait, err := waitOf(ctx, def)
	if err != nil {
		return err
	}
	r.Wait = wait
	if idem != nil {
		r.Message.ID = idem.Derived()
		r.IdemID = idem.ID()
		r.Idem = domain.IdemRecord{BodyHash: idem.BodyHash}
	}
	entry, err := s.engine(ctx).Messages.Send(s.reqContext(ctx), r)
	if err != nil {
		s.metrics.send(r.Origin, err)
		return err
	}
	s.metrics.send(r.Origin, nil)
	writeSent(ctx, entry)
	return nil
}

type messageJSON struct {
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
	m, err := s.engine(ctx).Messages.Get(key.Key.UserID, id)
	if err != nil {
		return err
	}
	hist := make([]historyJSON, len(m.History))
	for i, h := range m.History {
		hist[i] = historyJSON{Status: h.Status, At: timestamp(h.At.Time())}
	}
	writeJSON(ctx, fasthttp.StatusOK, messageJSON{
		Success: true, ID: m.ID, MessageID: m.ID, Status: m.Status, To: m.Message.To, Session: m.SessionID,
		Type: string(m.Message.Kind), CreatedAt: timestamp(m.CreatedAt.Time()), SentAt: sentAt(m.SentAt),
		Code: m.Code, Error: m.Error, Attempts: m.Attempts, History: hist, SendAt: sentAt(m.SendAt),
	})
	return nil
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
