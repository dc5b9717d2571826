package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/media"
)

// The Cloud-API-shaped front (DESIGN.md section 20): Meta's Graph API paths, bodies, answers and
// error shape, served for every session, linked or cloud, so that tools written for Meta's API
// (Chatwoot's WhatsApp Cloud channel, n8n, the npm client libraries) work against the gateway
// with its base URL. The API key is the access token (`Authorization: Bearer`, or Graph's
// `?access_token=`), the session id is the phone number id. A send is read into the same
// messageRequest /api/v1/messages/send reads and goes through the same path (messageOf, the
// engine's Messages.Send: scopes, daily caps, Idempotency-Key, opt-outs, routing); only the
// answer is Meta's. Every error under /cloud/ is Meta's {error: {...}} (writeError, frontError).

// frontPrefix starts every route of the front.
const frontPrefix = "/cloud/"

// isFront tells whether the request is one of the front's.
func isFront(ctx *fasthttp.RequestCtx) bool { return bytes.HasPrefix(ctx.Path(), []byte(frontPrefix)) }

// frontRoutes are the front's routes (routes.go calls it). Every id is the same path parameter,
// as the router needs: a session id before /messages, /media and /message_templates; a session
// or an upload (media_...) alone; an upload before /download.
func (s *Server) frontRoutes() {
	const GET, POST = fasthttp.MethodGet, fasthttp.MethodPost
	s.route(POST, "/cloud/{version}/{id}/messages", mediaBodyLimit(s.cfg.Media.MaxBytes), byKey, s.frontMessages)
	s.route(POST, "/cloud/{version}/{id}/media", int(s.cfg.Media.MaxBytes)+64<<10, byKey, s.frontUpload)
	s.route(GET, "/cloud/{version}/{id}", 0, byKey, s.frontObject)
	s.route(GET, "/cloud/{version}/{id}/download", 0, byKey, s.frontDownload)
	s.route(GET, "/cloud/{version}/{id}/message_templates", 0, byKey, s.frontTemplates)
}

// frontIDs reads the path's version and id: a version is v and a number (v27.0).
func frontIDs(ctx *fasthttp.RequestCtx) (version, id string, err error) {
	version, _ = ctx.UserValue("version").(string)
	id, _ = ctx.UserValue("id").(string)
	if len(version) < 2 || version[0] != 'v' || strings.Trim(version[1:], "0123456789.") != "" {
		return "", "", badInput("validation_failed", "unknown Graph API version %q: the path is /cloud/v27.0/...", version)
	}
	return version, id, nil
}

// frontCall authorizes a front call for scope ("" = none) and reads its path: the key's user,
// the version and the id.
func (s *Server) frontCall(ctx *fasthttp.RequestCtx, scope string) (uid, version, id string, err error) {
	key, err := s.apiKey(ctx, scope)
	if err != nil {
		return "", "", "", err
	}
	version, id, err = frontIDs(ctx)
	return key.Key.UserID, version, id, err
}

// frontMessages is POST /cloud/{version}/{sessionId}/messages: a message in the Cloud API's
// body (or a read mark), sent through the session. Scope send_text, send_media for media.
func (s *Server) frontMessages(ctx *fasthttp.RequestCtx) error {
	var req cloudapi.SendRequest
	perr := json.Unmarshal(ctx.PostBody(), &req)
	scope := engine.ScopeText
	if perr == nil && domain.Kind(req.Type).Media() {
		scope = engine.ScopeMedia
	}
	return s.v1Post(ctx, scope, func(key domain.Grant, idem *engine.Idem) error {
		_, sessionID, err := frontIDs(ctx)
		if err != nil {
			return err
		}
		// A number that is not the caller's is "no such object" (100/33), as GET /{id} answers.
		if _, err := s.engine(ctx).Front.Number(key.Key.UserID, sessionID); err != nil {
			return err
		}
		if perr != nil {
			return badInput("invalid_json", "the body is not a Cloud API message: %v", perr)
		}
		if req.MessagingProduct != cloudapi.Product {
			return badInput("validation_failed", `messaging_product must be "whatsapp"`)
		}
		if req.Status != "" {
			return s.frontRead(ctx, key, req)
		}
		mr, err := s.frontRequest(ctx, key.Key.UserID, req)
		if err != nil {
			return err
		}
		msg, err := s.messageOf(ctx, &mr, "text.body", req.Type+".link")
		if err != nil {
			return err
		}
		r := engine.SendRequest{UserID: key.Key.UserID, SessionID: sessionID, Origin: "api", Message: msg}
		entry, err := s.accept(ctx, &r, idem, true)
		if err != nil {
			return err
		}
		writeFrontSent(ctx, req.To, entry)
		return nil
	}, func(uid string, rec domain.IdemRecord) error {
		e, err := s.engine(ctx).Messages.Replay(uid, rec.MessageID)
		if err != nil {
			return err
		}
		writeFrontSent(ctx, req.To, e)
		return nil
	})
}

// frontRead is a read mark: {status: "read", message_id}, answered {success: true}.
func (s *Server) frontRead(ctx *fasthttp.RequestCtx, key domain.Grant, req cloudapi.SendRequest) error {
	if req.Status != cloudapi.StatusRead || strings.TrimSpace(req.MessageID) == "" {
		return badInput("validation_failed", `a status update is {status: "read", message_id}`)
	}
	if _, err := s.engine(ctx).Messages.MarkRead(s.reqContext(ctx), key.Key.UserID, strings.TrimSpace(req.MessageID)); err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, cloudapi.SuccessResponse{Success: true})
	return nil
}

// frontRequest reads a Cloud API send into the request /api/v1/messages/send takes; a medium
// sent by an uploaded id comes with its bytes.
func (s *Server) frontRequest(ctx *fasthttp.RequestCtx, uid string, req cloudapi.SendRequest) (messageRequest, error) {
	m, mediaID, err := req.Message()
	if err != nil {
		return messageRequest{}, err
	}
	to := m.To
	mr := messageRequest{Type: string(m.Kind), FileName: m.FileName, Caption: m.Caption, PTT: m.PTT, Name: m.LocationName,
		Address: m.Address, Buttons: m.Buttons, Button: m.ListButton, Sections: m.Sections, Header: m.Header, Footer: m.Footer}
	if to != "" {
		mr.Phone = &to
	}
	if m.ReplyTo != nil {
		mr.ReplyTo = m.ReplyTo.ID
	}
	switch m.Kind {
	case domain.KindText, domain.KindButtons, domain.KindList:
		mr.Message = &m.Text
	case domain.KindImage, domain.KindVideo, domain.KindAudio, domain.KindDocument, domain.KindSticker:
		if mediaID == "" {
			mr.Media = &m.MediaURL
			break
		}
		up, err := s.engine(ctx).Front.Media(uid, mediaID)
		if err != nil {
			return mr, fmt.Errorf("%w (%s.id)", err, req.Type)
		}
		mr.uploaded = &Media{Data: up.Data, MimeType: up.MimeType, FileName: up.FileName}
	case domain.KindLocation:
		mr.Lat, mr.Lng = &m.Lat, &m.Lng
	case domain.KindContact:
		mr.ContactName, mr.ContactPhone = &m.ContactName, &m.ContactPhone
	case domain.KindReaction:
		mr.MessageID, mr.Emoji = &m.Target.ID, &m.Emoji
	case domain.KindTemplate:
		mr.Template = &templateRequest{Name: m.Template.Name, Language: m.Template.Language, Parameters: m.Template.Params}
	}
	return mr, nil
}

// writeFrontSent answers a send as Meta does: the recipient as given and its WhatsApp id, and
// the message's id (the gateway's: the one statuses, replies and reactions name).
func writeFrontSent(ctx *fasthttp.RequestCtx, input string, e domain.OutboxEntry) {
	if input == "" {
		input = e.Message.To
	}
	writeJSON(ctx, fasthttp.StatusOK, cloudapi.SendResponse{MessagingProduct: cloudapi.Product,
		Contacts: []cloudapi.SentContact{{Input: input, WaID: e.Message.To}},
		Messages: []cloudapi.SentMessage{{ID: e.ID, MessageStatus: "accepted"}}})
}

// frontUpload is POST /cloud/{version}/{sessionId}/media: a multipart upload (messaging_product,
// file, type) kept 30 days for the session's sends; answers {id}. Scope send_media. The type is
// sniffed from the bytes (the form's type only names a file nothing recognises).
func (s *Server) frontUpload(ctx *fasthttp.RequestCtx) error {
	uid, _, sessionID, err := s.frontCall(ctx, engine.ScopeMedia)
	if err != nil {
		return err
	}
	form, err := ctx.MultipartForm()
	if err != nil {
		return badInput("validation_failed", "the upload is multipart/form-data with messaging_product, file and type: %v", err)
	}
	if v := form.Value["messaging_product"]; len(v) == 0 || v[0] != cloudapi.Product {
		return badInput("validation_failed", `messaging_product must be "whatsapp"`)
	}
	files := form.File["file"]
	if len(files) == 0 {
		return missing("file")
	}
	fh := files[0]
	if fh.Size > s.cfg.Media.MaxBytes {
		return fmt.Errorf("%w: the file is %d bytes, the limit %d", domain.ErrMediaTooLarge, fh.Size, s.cfg.Media.MaxBytes)
	}
	f, err := fh.Open()
	if err != nil {
		return badInput("validation_failed", "file: %v", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, s.cfg.Media.MaxBytes+1))
	_ = f.Close()
	if err != nil {
		return badInput("validation_failed", "file: %v", err)
	}
	mime := media.Sniff(data)
	if t := form.Value["type"]; mime == "application/octet-stream" && len(t) > 0 && strings.Contains(t[0], "/") {
		mime = strings.TrimSpace(t[0])
	}
	up, err := s.engine(ctx).Front.Upload(s.reqContext(ctx), uid, sessionID, mime, fh.Filename, data)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, cloudapi.MediaResponse{ID: up.ID})
	return nil
}

// frontMediaJSON is GET /{version}/{media-id}: Meta's media record; url is where the same key
// downloads it.
type frontMediaJSON struct {
	MessagingProduct string `json:"messaging_product"`
	URL              string `json:"url"`
	MimeType         string `json:"mime_type"`
	SHA256           string `json:"sha256"`
	FileSize         int64  `json:"file_size"`
	ID               string `json:"id"`
}

// frontObject is GET /cloud/{version}/{id}: an upload's record (media_...) or a session's, as
// Meta's phone number record.
func (s *Server) frontObject(ctx *fasthttp.RequestCtx) error {
	uid, version, id, err := s.frontCall(ctx, "")
	if err != nil {
		return err
	}
	eng := s.engine(ctx)
	if strings.HasPrefix(id, domain.FrontMediaPrefix) {
		m, err := eng.Front.Media(uid, id)
		if err != nil {
			return err
		}
		writeJSON(ctx, fasthttp.StatusOK, frontMediaJSON{MessagingProduct: cloudapi.Product, MimeType: m.MimeType, SHA256: m.SHA256,
			FileSize: m.Size, ID: m.ID, URL: frontBase(ctx) + frontPrefix + version + "/" + m.ID + "/download"})
		return nil
	}
	v, err := eng.Front.Number(uid, id)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, frontNumber(v))
	return nil
}

// frontNumberJSON is Meta's phone number record, with the session's status.
type frontNumberJSON struct {
	cloudapi.PhoneNumber
	Status string `json:"status"`
}

// frontNumber is a session as Meta's phone number record: a linked session's platform is
// NOT_APPLICABLE (it is not on the Cloud API), its verified name the session's name.
func frontNumber(v engine.SessionView) frontNumberJSON {
	n := cloudapi.PhoneNumber{ID: v.ID, DisplayPhoneNumber: v.Phone, VerifiedName: v.Name, QualityRating: "UNKNOWN",
		PlatformType: "NOT_APPLICABLE", CodeVerificationStatus: "NOT_VERIFIED", Throughput: &cloudapi.Throughput{Level: "NOT_APPLICABLE"}}
	if v.Status == domain.StatusConnected {
		n.CodeVerificationStatus = "VERIFIED"
	}
	if c := v.Cloud; c != nil {
		n.PlatformType, n.VerifiedName, n.QualityRating = "CLOUD_API", c.VerifiedName, c.Quality
		n.DisplayPhoneNumber = c.DisplayPhone
		n.Throughput.Level = "STANDARD"
		if c.Throughput >= 1000 {
			n.Throughput.Level = "HIGH"
		}
	}
	return frontNumberJSON{PhoneNumber: n, Status: v.ClientStatus()}
}

// frontDownload is GET /cloud/{version}/{mediaId}/download: the upload's bytes.
func (s *Server) frontDownload(ctx *fasthttp.RequestCtx) error {
	uid, _, id, err := s.frontCall(ctx, "")
	if err != nil {
		return err
	}
	m, err := s.engine(ctx).Front.Media(uid, id)
	if err != nil {
		return err
	}
	ctx.SetContentType(m.MimeType)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(m.Data)
	return nil
}

// frontTemplates is GET /cloud/{version}/{id}/message_templates: the templates a cloud
// session synced from its WABA; none for a linked session (its messages need none). The id is
// the session's (what an integration asks for its "business account id"): Chatwoot checks its
// settings with this call. A sync less than a minute old answers it (engine.TemplatesFresh):
// the dashboard's template screen syncs at once.
func (s *Server) frontTemplates(ctx *fasthttp.RequestCtx) error {
	uid, _, id, err := s.frontCall(ctx, "")
	if err != nil {
		return err
	}
	eng := s.engine(ctx)
	v, err := eng.Front.Number(uid, id)
	if err != nil {
		return err
	}
	out := cloudapi.TemplateList{Data: []cloudapi.MessageTemplate{}}
	if v.IsCloud() {
		set, err := eng.Cloud.RecentTemplates(s.reqContext(ctx), uid)
		if err != nil {
			return err
		}
		for _, t := range set.Templates {
			mt := cloudapi.MessageTemplate{Name: t.Name, Language: t.Language, Status: t.Status, Category: t.Category, ParameterFormat: t.ParameterFormat}
			if len(t.Components) > 0 {
				_ = json.Unmarshal(t.Components, &mt.Components)
			}
			out.Data = append(out.Data, mt)
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// frontBase is the scheme and host the request came to (behind a proxy: its Host and
// X-Forwarded-Proto), the base of the download URLs the front answers.
func frontBase(ctx *fasthttp.RequestCtx) string {
	scheme := "http"
	if ctx.IsTLS() || strings.EqualFold(string(ctx.Request.Header.Peek("X-Forwarded-Proto")), "https") {
		scheme = "https"
	}
	return scheme + "://" + string(ctx.Host())
}
