// Package fakegraph is a test-only fake of Meta's Graph API for the WhatsApp Cloud API,
// speaking the requests, answers, errors and signed webhooks the gateway's cloud network
// (network/cloud) and any Cloud API client speak: phone numbers (GET /{version}/{id}),
// messages (POST /{version}/{id}/messages: every kind, read marks), media uploads (POST
// /{version}/{id}/media, multipart), a WABA's templates (GET
// /{version}/{waba}/message_templates, paged), and webhooks to an app's callback URL: the
// subscription check (GET with hub.mode, hub.verify_token, hub.challenge) and POSTs of
// statuses (sent, delivered, read, failed with errors, pricing) and incoming messages (text,
// replies by context, reactions, button replies), signed X-Hub-Signature-256 with the app
// secret, with non-ASCII written \uXXXX as Meta writes it, and retried until the receiver
// answers 200 (Meta retries an undelivered webhook for days).
//
// Its contacts play the other side: they write (opening the 24-hour service window), read,
// react and tap buttons. Like Meta it refuses a message that is not a template outside the
// contact's service window (a failed status with 131047), an unknown or unapproved template
// (132001) or one with the wrong number of parameters (132000), a wrong token (401, 190), and
// it answers errors a test injects (130429, 131056, 131026, 190, ...) on the send's answer or
// in a failed status.
//
// Shapes read in Meta's documentation (developers.facebook.com/documentation/
// business-messaging/whatsapp: webhooks/reference/messages, webhooks/reference/messages/status,
// templates/template-management, throughput, support/error-codes) and in the maintained client
// whatsapp-api-js (github.com/Secreto31126/whatsapp-api-js, src/types.ts: ClientMessageRequest,
// ServerSentMessageResponse, ServerErrorResponse, ServerStatusPayload, ServerMessage, PostData;
// src/index.ts: sendMessage, markAsRead, uploadMedia, verifyRequestSignature with
// escapeUnicode), through package cloudapi, which holds them.
//
// It imports cloudapi (the shapes) and the standard library; nothing of the gateway's core.
package fakegraph

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gateway/gateway/cloudapi"
)

// Number is a business phone number of the fake.
type Number struct {
	ID      string // the phone number id
	WABA    string // its WhatsApp Business Account id
	Display string // e.g. "+1 555-010-0999"
	Name    string // the verified name
	Token   string // the access token that may use it
	// Throughput is the level GET answers (default STANDARD).
	Throughput string
	// App is the app (callback URL, secret) its webhooks go to.
	App *App
}

// App is a Meta app: the callback URL and verify token of its webhooks, and its secret.
type App struct {
	Secret      string
	CallbackURL string
	VerifyToken string
}

// Sent is a message a number sent (a request the fake took).
type Sent struct {
	ID      string // the wamid
	Number  string // the phone number id
	To      string
	Request cloudapi.SendRequest
	// MediaBytes is the medium's size (uploaded, or fetched from its link); MediaType its type.
	MediaBytes int
	MediaType  string
	Status     string // sent, delivered, read, failed
	At         time.Time
}

// Failure is an error the fake answers to a send, on its answer (OnAnswer) or in a failed
// status after answering 200.
type Failure struct {
	Code     int
	OnAnswer bool
	Times    int // how many sends it fails (0: 1)
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	ts     *httptest.Server
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	numbers   map[string]*Number
	templates map[string][]cloudapi.MessageTemplate // by WABA
	media     map[string]upload
	sent      []Sent
	window    map[string]time.Time // number id + "|" + contact → the contact's last message
	failures  map[string][]Failure // contact → what its next sends answer
	reads     []string             // ids of incoming messages the business marked read
	typing    []string             // of those, the ones marked with a typing indicator
	queue     []delivery
	wake      chan struct{}
	delivered int // webhooks the receiver took
	seq       int

	templateReads int // template list pages served
	// AutoDeliver: a message taken is reported sent, then delivered (default true).
	autoDeliver bool
	// RetryEvery is the pause between tries of an undelivered webhook (default 100 ms).
	retryEvery time.Duration
	// latency: how long a message's answer takes after Meta took it (SetLatency).
	latency time.Duration
	// onDelivered: told each webhook the receiver answered 200, at once (OnDelivered).
	onDelivered func(body []byte)
}

type upload struct {
	data []byte
	mime string
}

type delivery struct {
	app  *App
	body []byte
	// url and secret: the app's, read when the delivery is tried.
	url, secret string
}

// New starts the fake on loopback.
func New() *Server {
	s := &Server{numbers: map[string]*Number{}, templates: map[string][]cloudapi.MessageTemplate{},
		media: map[string]upload{}, window: map[string]time.Time{}, failures: map[string][]Failure{},
		wake: make(chan struct{}, 1), autoDeliver: true, retryEvery: 100 * time.Millisecond,
		client: &http.Client{Timeout: 10 * time.Second}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
	go s.deliverLoop()
	return s
}

// URL is the fake's base URL (the gateway's --cloud-graph-url).
func (s *Server) URL() string { return s.ts.URL }

// Close stops the fake (webhooks still queued are dropped).
func (s *Server) Close() {
	s.cancel()
	s.ts.Close()
}

// AddNumber registers a number (and its app).
func (s *Server) AddNumber(n Number) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n.Throughput == "" {
		n.Throughput = "STANDARD"
	}
	s.numbers[n.ID] = &n
}

// SetToken changes the token a number takes (the old one is refused with 190 from then on).
func (s *Server) SetToken(number, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.numbers[number]; n != nil {
		n.Token = token
	}
}

// Subscribe sets the app's callback URL as Meta's app settings do: Meta checks it first with
// the verify token (GET hub.mode=subscribe) and keeps it only when the challenge comes back.
func (s *Server) Subscribe(app *App, callbackURL, verifyToken string) error {
	challenge := strconv.FormatInt(time.Now().UnixNano(), 10)
	q := url.Values{cloudapi.HubMode: {cloudapi.ModeSubscribe}, cloudapi.HubVerifyToken: {verifyToken}, cloudapi.HubChallenge: {challenge}}
	sep := "?"
	if strings.Contains(callbackURL, "?") {
		sep = "&"
	}
	resp, err := s.client.Get(callbackURL + sep + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != challenge {
		return fmt.Errorf("fakegraph: the callback answered %d %q to the verification, want 200 %q", resp.StatusCode, body, challenge)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	app.CallbackURL, app.VerifyToken = callbackURL, verifyToken
	return nil
}

// AddTemplate adds a template to a WABA.
func (s *Server) AddTemplate(waba string, t cloudapi.MessageTemplate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.ID == "" {
		s.seq++
		t.ID = strconv.Itoa(1000000 + s.seq)
	}
	s.templates[waba] = append(s.templates[waba], t)
}

// TemplateReads is how many template list pages were served.
func (s *Server) TemplateReads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.templateReads
}

// Fail makes the next sends to contact answer failure f.
func (s *Server) Fail(contact string, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times <= 0 {
		f.Times = 1
	}
	s.failures[contact] = append(s.failures[contact], f)
}

// SetLatency makes each message's answer come d after the message was taken (its statuses are
// queued at once): a sender that dies meanwhile never learns Meta took it. A message taken
// before SetLatency keeps the latency it was taken with.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// SetAutoDeliver turns the automatic "delivered" status after "sent" on or off.
func (s *Server) SetAutoDeliver(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.autoDeliver = on
}

// Sent lists the messages the numbers sent, oldest first (to: only those to that contact).
func (s *Server) Sent(to string) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, m := range s.sent {
		if to == "" || m.To == to {
			out = append(out, m)
		}
	}
	return out
}

// Reads lists the incoming messages the business marked read.
func (s *Server) Reads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reads)
}

// Typing lists the incoming messages the business showed "typing…" on (a read mark with a
// typing indicator).
func (s *Server) Typing() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.typing)
}

// Pending is how many webhooks wait to be delivered (retried until the receiver takes them).
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// CloseWindow ends a contact's service window with a number, as 24 hours of silence would.
func (s *Server) CloseWindow(number, contact string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.window, number+"|"+contact)
}

// wamid makes a message id as Meta's are made: "wamid." and the standard base64 of a small
// record naming the contact's number and a 20-digit hex id (the ids in Meta's webhook examples
// decode to 1c 18 <len> <number> 15 02 00 12 18 14 <hex id> 00). Being digits, hex and small
// bytes, it never holds a '/' or a '+' (a '=' at most), as Meta's do not: a client may put it in
// a path as it is.
func wamid(contact string) string {
	id := make([]byte, 10)
	_, _ = rand.Read(id)
	b := append([]byte{0x1c, 0x18, byte(len(contact))}, contact...)
	b = append(b, 0x15, 0x02, 0x00, 0x12, 0x18, 0x14)
	b = append(b, strings.ToUpper(hex.EncodeToString(id))...)
	return "wamid." + base64.StdEncoding.EncodeToString(append(b, 0x00))
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "v") {
		graphError(w, http.StatusBadRequest, 100, "Unknown path components: "+r.URL.Path)
		return
	}
	id := parts[1]
	switch {
	case len(parts) == 2 && r.Method == http.MethodGet:
		s.phoneNumber(w, r, id)
	case len(parts) == 3 && parts[2] == "messages" && r.Method == http.MethodPost:
		s.messages(w, r, id)
	case len(parts) == 3 && parts[2] == "media" && r.Method == http.MethodPost:
		s.upload(w, r, id)
	case len(parts) == 3 && parts[2] == "message_templates" && r.Method == http.MethodGet:
		s.listTemplates(w, r, id)
	default:
		graphError(w, http.StatusBadRequest, 100, "Unsupported request - method type: "+strings.ToLower(r.Method))
	}
}

// graphError answers the Graph API's error shape.
func graphError(w http.ResponseWriter, status, code int, msg string) {
	writeJSON(w, status, cloudapi.ErrorResponse{Error: cloudapi.Error{Message: msg, Type: "OAuthException", Code: code,
		ErrorData: &cloudapi.ErrorData{MessagingProduct: cloudapi.Product, Details: msg}, FBTraceID: "A" + strconv.Itoa(code)}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// authorized checks the bearer token against the number's (190 otherwise).
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, n *Number) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || n == nil || tok != n.Token {
		graphError(w, http.StatusUnauthorized, cloudapi.CodeAccessToken, "Error validating access token: Session has expired.")
		return false
	}
	return true
}

func (s *Server) number(id string) *Number {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.numbers[id]
}

// caller is the number a request names, when it exists and the request's token is its
// (else the error is answered and it is nil).
func (s *Server) caller(w http.ResponseWriter, r *http.Request, id string) *Number {
	n := s.number(id)
	if n == nil {
		graphError(w, http.StatusBadRequest, 100, "Unsupported request. Object with ID '"+id+"' does not exist")
		return nil
	}
	if !s.authorized(w, r, n) {
		return nil
	}
	return n
}

func (s *Server) phoneNumber(w http.ResponseWriter, r *http.Request, id string) {
	n := s.caller(w, r, id)
	if n == nil {
		return
	}
	writeJSON(w, http.StatusOK, cloudapi.PhoneNumber{ID: n.ID, DisplayPhoneNumber: n.Display, VerifiedName: n.Name,
		QualityRating: "GREEN", PlatformType: "CLOUD_API", CodeVerificationStatus: "VERIFIED", Throughput: &cloudapi.Throughput{Level: n.Throughput}})
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request, waba string) {
	s.mu.Lock()
	s.templateReads++
	var owner *Number
	for _, n := range s.numbers {
		if n.WABA == waba {
			owner = n
		}
	}
	all := slices.Clone(s.templates[waba])
	s.mu.Unlock()
	if owner == nil {
		graphError(w, http.StatusBadRequest, 100, "Unsupported get request. Object with ID '"+waba+"' does not exist")
		return
	}
	if !s.authorized(w, r, owner) {
		return
	}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 {
		limit = 25
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("after"))
	end := min(start+limit, len(all))
	start = min(start, end)
	page := cloudapi.TemplateList{Data: all[start:end]}
	if end < len(all) {
		next := *r.URL
		q := next.Query()
		q.Set("after", strconv.Itoa(end))
		next.RawQuery = q.Encode()
		page.Paging = &cloudapi.Paging{Cursors: &cloudapi.Cursors{Before: strconv.Itoa(start), After: strconv.Itoa(end)}, Next: s.ts.URL + next.String()}
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, id string) {
	if s.caller(w, r, id) == nil {
		return
	}
	if err := r.ParseMultipartForm(64 << 20); err != nil {
		graphError(w, http.StatusBadRequest, 100, "Invalid parameter: "+err.Error())
		return
	}
	if r.FormValue("messaging_product") != cloudapi.Product {
		graphError(w, http.StatusBadRequest, 100, "The parameter messaging_product is required.")
		return
	}
	f, hdr, err := r.FormFile("file")
	if err != nil {
		graphError(w, http.StatusBadRequest, 100, "The parameter file is required.")
		return
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	typ := hdr.Header.Get("Content-Type")
	if typ == "" {
		typ = r.FormValue("type")
	}
	mid := strconv.FormatInt(time.Now().UnixNano(), 10)
	s.mu.Lock()
	s.media[mid] = upload{data: data, mime: typ}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, cloudapi.MediaResponse{ID: mid})
}

// messages takes a message (or a read mark) from a number, as Meta does: checked, answered
// with its wamid, then reported by status webhooks.
func (s *Server) messages(w http.ResponseWriter, r *http.Request, id string) {
	n := s.caller(w, r, id)
	if n == nil {
		return
	}
	var req cloudapi.SendRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		graphError(w, http.StatusBadRequest, 100, "Invalid parameter: "+err.Error())
		return
	}
	if req.MessagingProduct != cloudapi.Product {
		graphError(w, http.StatusBadRequest, 100, "The parameter messaging_product is required.")
		return
	}
	if req.Status == cloudapi.StatusRead {
		s.mu.Lock()
		s.reads = append(s.reads, req.MessageID)
		if req.TypingIndicator != nil {
			s.typing = append(s.typing, req.MessageID)
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, cloudapi.SuccessResponse{Success: true})
		return
	}
	size, mtype, code, msg := s.check(r.Context(), n, req)
	if code != 0 {
		graphError(w, http.StatusBadRequest, code, msg)
		return
	}
	f, failing := s.nextFailure(req.To)
	if failing && f.OnAnswer {
		status := http.StatusBadRequest
		if f.Code == cloudapi.CodeAccessToken {
			status = http.StatusUnauthorized
		}
		graphError(w, status, f.Code, errorTitle(f.Code))
		return
	}
	m := Sent{ID: wamid(req.To), Number: n.ID, To: req.To, Request: req, MediaBytes: size, MediaType: mtype, Status: cloudapi.StatusSent, At: time.Now()}
	s.mu.Lock()
	s.sent = append(s.sent, m)
	open := !s.window[n.ID+"|"+req.To].IsZero() && time.Since(s.window[n.ID+"|"+req.To]) < 24*time.Hour
	auto, latency := s.autoDeliver, s.latency
	s.mu.Unlock()
	defer func() {
		// A sender gone meanwhile (killed) never gets the answer; the handler ends with it.
		wait := time.NewTimer(latency)
		defer wait.Stop()
		select {
		case <-wait.C:
		case <-r.Context().Done():
			return
		}
		writeJSON(w, http.StatusOK, cloudapi.SendResponse{MessagingProduct: cloudapi.Product,
			Contacts: []cloudapi.SentContact{{Input: req.To, WaID: req.To}}, Messages: []cloudapi.SentMessage{{ID: m.ID, MessageStatus: "accepted"}}})
	}()
	switch {
	case failing:
		s.status(n, m, req, cloudapi.StatusFailed, f.Code)
	case req.Type != cloudapi.TypeTemplate && !open:
		// Outside the contact's 24-hour window only a template may go (Meta reports it in a
		// failed status, not on the answer).
		s.status(n, m, req, cloudapi.StatusFailed, cloudapi.CodeOutsideWindow)
	default:
		s.status(n, m, req, cloudapi.StatusSent, 0)
		if auto {
			s.status(n, m, req, cloudapi.StatusDelivered, 0)
		}
	}
}

// check validates a message as Meta does: its type's object, its medium, its template. It
// answers the medium's size and type, or an error code and text.
func (s *Server) check(ctx context.Context, n *Number, req cloudapi.SendRequest) (int, string, int, string) {
	if req.To == "" {
		return 0, "", 100, "The parameter to is required."
	}
	switch req.Type {
	case cloudapi.TypeText:
		if req.Text == nil || req.Text.Body == "" {
			return 0, "", 100, "The parameter text['body'] is required."
		}
	case cloudapi.TypeImage, cloudapi.TypeVideo, cloudapi.TypeAudio, cloudapi.TypeDocument, cloudapi.TypeSticker:
		med := *req.MediaOf()
		if med == nil || (med.ID == "") == (med.Link == "") {
			return 0, "", 100, "Param " + req.Type + " must have exactly one of id or link"
		}
		if med.ID != "" {
			s.mu.Lock()
			up, ok := s.media[med.ID]
			s.mu.Unlock()
			if !ok {
				return 0, "", 131053, "Media upload error: unknown media id"
			}
			return len(up.data), up.mime, 0, ""
		}
		data, typ, err := fetch(ctx, s.client, med.Link)
		if err != nil {
			return 0, "", 131053, "Media upload error: " + err.Error()
		}
		return len(data), typ, 0, ""
	case cloudapi.TypeLocation:
		if req.Location == nil {
			return 0, "", 100, "The parameter location is required."
		}
	case cloudapi.TypeContacts:
		if len(req.Contacts) == 0 || req.Contacts[0].Name.FormattedName == "" {
			return 0, "", 100, "The parameter contacts['name']['formatted_name'] is required."
		}
	case cloudapi.TypeReaction:
		if req.Reaction == nil || req.Reaction.MessageID == "" {
			return 0, "", 100, "The parameter reaction['message_id'] is required."
		}
	case cloudapi.TypeInteractive:
		in := req.Interactive
		if in == nil || in.Body == nil || in.Body.Text == "" {
			return 0, "", 100, "The parameter interactive['body']['text'] is required."
		}
		switch in.Type {
		case cloudapi.InteractiveButton:
			if len(in.Action.Buttons) < 1 || len(in.Action.Buttons) > 3 {
				return 0, "", 100, "Param interactive['action']['buttons'] must have 1 to 3 buttons"
			}
			if msg := checkButtons(in); msg != "" {
				return 0, "", cloudapi.CodeParamValue, msg
			}
		case cloudapi.InteractiveList:
			if in.Action.Button == "" || len(in.Action.Sections) == 0 {
				return 0, "", 100, "Param interactive['action'] must have a button and sections"
			}
		default:
			return 0, "", 100, "Invalid interactive type"
		}
	case cloudapi.TypeTemplate:
		return s.checkTemplate(n, req.Template)
	default:
		return 0, "", cloudapi.CodeUnsupportedType, "Unsupported message type"
	}
	return 0, "", 0, ""
}

// checkButtons checks reply buttons as Meta does: a body of at most 1024 characters, titles
// of 1 to 20 characters and ids of 1 to 256, each unique. It answers the error's text, "" when
// they pass.
func checkButtons(in *cloudapi.Interactive) string {
	if utf8.RuneCountInString(in.Body.Text) > 1024 {
		return "Body text length invalid. Min length: 1, Max length: 1024"
	}
	titles, ids := map[string]bool{}, map[string]bool{}
	for _, b := range in.Action.Buttons {
		if n := utf8.RuneCountInString(b.Reply.Title); n < 1 || n > 20 {
			return "Button title length invalid. Min length: 1, Max length: 20"
		}
		if n := len(b.Reply.ID); n < 1 || n > 256 {
			return "Button id length invalid. Min length: 1, Max length: 256"
		}
		if titles[b.Reply.Title] || ids[b.Reply.ID] {
			return "Button title and id must be unique"
		}
		titles[b.Reply.Title], ids[b.Reply.ID] = true, true
	}
	return ""
}

func (s *Server) checkTemplate(n *Number, t *cloudapi.Template) (int, string, int, string) {
	if t == nil {
		return 0, "", 100, "The parameter template is required."
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, def := range s.templates[n.WABA] {
		if def.Name != t.Name || def.Language != t.Language.Code {
			continue
		}
		if def.Status != "APPROVED" {
			return 0, "", cloudapi.CodeTemplateMissing, "Template name does not exist in the translation (not approved)"
		}
		want := paramCount(def.BodyText())
		got := 0
		for _, c := range t.Components {
			if strings.EqualFold(c.Type, "body") {
				got += len(c.Parameters)
			}
		}
		for _, c := range t.Components {
			for _, p := range c.Parameters {
				if strings.ContainsAny(p.Text, "\n\t") || strings.Contains(p.Text, "     ") {
					return 0, "", cloudapi.CodeInvalidParameter, "Param text cannot have new-line/tab characters or more than 4 consecutive spaces"
				}
			}
		}
		if got != want {
			return 0, "", cloudapi.CodeTemplateParams, fmt.Sprintf("Number of parameters does not match the expected number of params (body: expected %d, received %d)", want, got)
		}
		return 0, "", 0, ""
	}
	return 0, "", cloudapi.CodeTemplateMissing, "Template name does not exist in the translation"
}

// paramCount counts a body's distinct parameters, {{1}} or {{name}}.
func paramCount(body string) int {
	seen := map[string]bool{}
	for rest := body; ; {
		i := strings.Index(rest, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			break
		}
		seen[strings.TrimSpace(rest[i+2:i+j])] = true
		rest = rest[i+j+2:]
	}
	return len(seen)
}

// fetch reads a medium's link as Meta does before it sends it.
func fetch(ctx context.Context, client *http.Client, link string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("the link answered %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 100<<20))
	typ, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return data, typ, err
}

func (s *Server) nextFailure(to string) (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.failures[to]
	if len(fs) == 0 {
		return Failure{}, false
	}
	f := fs[0]
	if fs[0].Times--; fs[0].Times <= 0 {
		s.failures[to] = fs[1:]
	}
	return f, true
}

// errorTitle is the title Meta gives an error code.
func errorTitle(code int) string {
	switch code {
	case cloudapi.CodeAccessToken:
		return "Error validating access token: Session has expired."
	case cloudapi.CodeThroughput:
		return "Rate limit hit"
	case cloudapi.CodePairRate:
		return "(#131056) (Business Account, Consumer Account) pair rate limit hit"
	case cloudapi.CodeUndeliverable:
		return "Message undeliverable"
	case cloudapi.CodeOutsideWindow:
		return "Re-engagement message"
	}
	return "Something went wrong"
}

// status reports a message's status to its number's app.
func (s *Server) status(n *Number, m Sent, req cloudapi.SendRequest, status string, code int) {
	st := cloudapi.Status{ID: m.ID, Status: status, Timestamp: cloudapi.Timestamp(time.Now()), RecipientID: m.To,
		BizOpaqueCallbackData: req.BizOpaqueCallbackData}
	if status == cloudapi.StatusFailed {
		st.Errors = []cloudapi.Error{{Code: code, Title: errorTitle(code), Message: errorTitle(code),
			ErrorData: &cloudapi.ErrorData{Details: errorTitle(code)}, Href: "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"}}
	} else {
		billable := true
		category, typ := "service", "free_customer_service"
		if req.Type == cloudapi.TypeTemplate {
			category, typ = s.category(n, req.Template), "regular"
		}
		st.Pricing = &cloudapi.Pricing{Billable: &billable, PricingModel: "PMP", Category: category, Type: typ}
	}
	s.mu.Lock()
	for i := range s.sent {
		if s.sent[i].ID == m.ID {
			s.sent[i].Status = status
		}
	}
	s.mu.Unlock()
	s.post(n, cloudapi.Value{Statuses: []cloudapi.Status{st}})
}

// category is a template's pricing category (its category, lower case).
func (s *Server) category(n *Number, t *cloudapi.Template) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, def := range s.templates[n.WABA] {
		if t != nil && def.Name == t.Name {
			return strings.ToLower(def.Category)
		}
	}
	return "utility"
}

// Read: the contact read a message the number sent (by wamid): a read status.
func (s *Server) Read(wamid string) error { return s.report(wamid, cloudapi.StatusRead) }

// Deliver: the contact's phone got a message (by wamid): a delivered status (when automatic
// delivery is off).
func (s *Server) Deliver(wamid string) error { return s.report(wamid, cloudapi.StatusDelivered) }

// report posts a status of a message the number sent (by wamid).
func (s *Server) report(wamid, status string) error {
	s.mu.Lock()
	i := slices.IndexFunc(s.sent, func(m Sent) bool { return m.ID == wamid })
	if i < 0 {
		s.mu.Unlock()
		return fmt.Errorf("fakegraph: no message %s", wamid)
	}
	sent, n := s.sent[i], s.numbers[s.sent[i].Number]
	s.mu.Unlock()
	s.status(n, sent, sent.Request, status, 0)
	return nil
}

// Inbound is a message a contact writes to a number; it opens the contact's service window.
// It returns the message's wamid.
type Inbound struct {
	From string // the contact's number (digits)
	Name string // their profile name
	Text string
	// ReplyTo quotes a message (a wamid) the number sent.
	ReplyTo string
	// React: a reaction (Emoji) to ReplyTo instead of a text.
	React bool
	Emoji string
	// Button: a tapped reply button (its id; Text is its title).
	Button string
}

// Write posts a contact's message to the number's app.
func (s *Server) Write(number string, in Inbound) (string, error) {
	s.mu.Lock()
	n := s.numbers[number]
	if n == nil {
		s.mu.Unlock()
		return "", fmt.Errorf("fakegraph: no number %s", number)
	}
	s.window[number+"|"+in.From] = time.Now()
	s.mu.Unlock()
	m := cloudapi.InboundMessage{From: in.From, ID: wamid(in.From), Timestamp: cloudapi.Timestamp(time.Now()), Type: cloudapi.TypeText}
	if in.ReplyTo != "" && !in.React {
		m.Context = &cloudapi.InboundContext{From: digits(n.Display), ID: in.ReplyTo}
	}
	switch {
	case in.React:
		m.Type, m.Reaction = cloudapi.TypeReaction, &cloudapi.Reaction{MessageID: in.ReplyTo, Emoji: in.Emoji}
	case in.Button != "":
		m.Type = cloudapi.TypeInteractive
		m.Interactive = &cloudapi.InboundInteractive{Type: cloudapi.InteractiveButtonReply, ButtonReply: &cloudapi.Choice{ID: in.Button, Title: in.Text}}
	default:
		m.Text = &cloudapi.Text{Body: in.Text}
	}
	v := cloudapi.Value{Contacts: []cloudapi.WebhookContact{{Profile: &cloudapi.Profile{Name: in.Name}, WaID: in.From}},
		Messages: []cloudapi.InboundMessage{m}}
	s.post(n, v)
	return m.ID, nil
}

func digits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Notify posts a raw notification to a number's app, signed (tests of the receiver).
func (s *Server) Notify(number string, v cloudapi.Value) error {
	n := s.number(number)
	if n == nil {
		return fmt.Errorf("fakegraph: no number %s", number)
	}
	s.post(n, v)
	return nil
}

// Body is the webhook body a value of a number makes, as Meta writes it (for tests that post
// it themselves, signed or not).
func (s *Server) Body(number string, v cloudapi.Value) []byte {
	n := s.number(number)
	if n == nil {
		return nil
	}
	return s.notification(n, v)
}

func (s *Server) notification(n *Number, v cloudapi.Value) []byte {
	v.MessagingProduct = cloudapi.Product
	v.Metadata = cloudapi.Metadata{DisplayPhoneNumber: digits(n.Display), PhoneNumberID: n.ID}
	note := cloudapi.Notification{Object: cloudapi.ObjectWABA, Entry: []cloudapi.Entry{{ID: n.WABA,
		Changes: []cloudapi.Change{{Field: cloudapi.FieldMessages, Value: v}}}}}
	body, _ := json.Marshal(note)
	return escapeUnicode(body)
}

// escapeUnicode writes non-ASCII as \uXXXX, as Meta's webhook bodies do (whatsapp-api-js
// escapes the raw body so before it checks the signature).
func escapeUnicode(b []byte) []byte {
	var out bytes.Buffer
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r < 0x80:
			out.WriteByte(b[0])
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&out, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
		b = b[size:]
	}
	return out.Bytes()
}

// post queues a notification for the number's app.
func (s *Server) post(n *Number, v cloudapi.Value) {
	body := s.notification(n, v)
	s.mu.Lock()
	s.queue = append(s.queue, delivery{app: n.App, body: body})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// deliverLoop posts queued webhooks in order, each until the receiver answers 200.
func (s *Server) deliverLoop() {
	for {
		s.mu.Lock()
		var d *delivery
		if len(s.queue) > 0 {
			d = &delivery{body: s.queue[0].body}
			if app := s.queue[0].app; app != nil {
				d.url, d.secret = app.CallbackURL, app.Secret
			}
		}
		wait := s.retryEvery
		s.mu.Unlock()
		if d == nil {
			select {
			case <-s.wake:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		if s.send(*d) {
			s.mu.Lock()
			s.queue = s.queue[1:]
			s.delivered++
			hook := s.onDelivered
			s.mu.Unlock()
			if hook != nil {
				hook(d.body)
			}
			continue
		}
		select {
		case <-time.After(wait):
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Server) send(d delivery) bool {
	if d.url == "" {
		return false
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, d.url, bytes.NewReader(d.body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(cloudapi.SignatureHeader, cloudapi.Sign(d.body, d.secret))
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// OnDelivered has fn told the body of each webhook the receiver answered 200, the moment the
// answer came (before the next webhook goes): a test kills the receiver there (nil: none).
func (s *Server) OnDelivered(fn func(body []byte)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDelivered = fn
}

// Delivered is how many webhooks the receiver took.
func (s *Server) Delivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered
}
