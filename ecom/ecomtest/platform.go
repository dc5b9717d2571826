// Package ecomtest is a fake Shopify-type store platform for tests: an httptest server that
// answers the Admin calls ecom.Client makes (OAuth code exchange, GraphQL shop name, webhook
// subscriptions, order query) for shops registered on it, and records every request. Point
// ecom.ClientOptions.APIBase at Platform.APIBase. It imports only the standard library.
package ecomtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
)

// Request is one request the fake received.
type Request struct {
	Method string
	Path   string // without the leading /{shop}
	Shop   string
	Token  string // X-Shopify-Access-Token
	Body   []byte
}

// Subscription is one webhook subscription a shop holds.
type Subscription struct {
	ID    string
	Topic string // the GraphQL enum, e.g. ORDERS_CREATE
	URI   string
}

type grant struct{ token, scope string }

type shop struct {
	name   string
	tokens map[string]bool // access tokens the shop accepts
	codes  map[string]grant
	subs   []Subscription
	orders map[int64]json.RawMessage
}

// Platform is the fake. Its methods are safe for concurrent use.
type Platform struct {
	srv *httptest.Server

	mu           sync.Mutex
	shops        map[string]*shop
	clientID     string
	clientSecret string
	requests     []Request
	failStatus   int
	failLeft     int
}

// knownTopics are the WebhookSubscriptionTopic values the fake accepts.
func knownTopic(t string) bool {
	switch t {
	case "ORDERS_CREATE", "ORDERS_PAID", "ORDERS_CANCELLED", "ORDERS_UPDATED",
		"FULFILLMENTS_CREATE", "REFUNDS_CREATE", "APP_UNINSTALLED":
		return true
	}
	return false
}

// New starts a fake platform; Close it when done.
func New() *Platform {
	p := &Platform{shops: map[string]*shop{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// Close stops the server.
func (p *Platform) Close() { p.srv.Close() }

// APIBase is the value for ecom.ClientOptions.APIBase: the server's URL with a /{shop} path
// prefix, so one fake serves many shops.
func (p *Platform) APIBase() string { return p.srv.URL + "/{shop}" }

// AddShop registers a shop domain with its display name and the access token it accepts.
func (p *Platform) AddShop(domain, name, token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &shop{name: name, tokens: map[string]bool{}, codes: map[string]grant{}, orders: map[int64]json.RawMessage{}}
	if token != "" {
		s.tokens[token] = true
	}
	p.shops[domain] = s
}

// SetApp sets the app credentials the OAuth code exchange accepts.
func (p *Platform) SetApp(clientID, clientSecret string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clientID, p.clientSecret = clientID, clientSecret
}

// AddCode makes code exchangeable (once) for token and scope on domain; once exchanged, the
// shop accepts token too.
func (p *Platform) AddCode(domain, code, token, scope string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.shops[domain]; s != nil {
		s.codes[code] = grant{token, scope}
	}
}

// AddOrder stores an order as the GraphQL `order` query returns it (the object under
// data.order: name, customer {firstName defaultPhoneNumber {phoneNumber}}, ...).
func (p *Platform) AddOrder(domain string, id int64, graphQLOrder string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.shops[domain]; s != nil {
		s.orders[id] = json.RawMessage(graphQLOrder)
	}
}

// FailNext makes the next n requests answer status with an error body.
func (p *Platform) FailNext(n, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failLeft, p.failStatus = n, status
}

// Subscriptions returns the webhook subscriptions domain holds.
func (p *Platform) Subscriptions(domain string) []Subscription {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.shops[domain]; s != nil {
		return append([]Subscription(nil), s.subs...)
	}
	return nil
}

// Requests returns every request received so far, in order.
func (p *Platform) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

func (p *Platform) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	domain, path, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	path = "/" + path

	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, Request{r.Method, path, domain, r.Header.Get("X-Shopify-Access-Token"), body})
	if p.failLeft > 0 {
		p.failLeft--
		writeJSON(w, p.failStatus, map[string]any{"errors": "injected failure"})
		return
	}
	s := p.shops[domain]
	if s == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"errors": "Not Found"})
		return
	}
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"errors": "method not allowed"})
		return
	}
	switch {
	case path == "/admin/oauth/access_token":
		p.exchange(w, s, body)
	case strings.HasPrefix(path, "/admin/api/") && strings.HasSuffix(path, "/graphql.json"):
		if !s.tokens[r.Header.Get("X-Shopify-Access-Token")] {
			writeJSON(w, http.StatusUnauthorized, map[string]any{
				"errors": "[API] Invalid API key or access token (unrecognized login or wrong password)"})
			return
		}
		p.graphQL(w, s, body)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"errors": "Not Found"})
	}
}

func (p *Platform) exchange(w http.ResponseWriter, s *shop, body []byte) {
	var in struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		Code         string `json:"code"`
	}
	if json.Unmarshal(body, &in) != nil || in.ClientID != p.clientID || in.ClientSecret != p.clientSecret {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_client", "error_description": "Client credentials are invalid"})
		return
	}
	g, ok := s.codes[in.Code]
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request", "error_description": "The authorization code was not found or was already used"})
		return
	}
	delete(s.codes, in.Code)
	s.tokens[g.token] = true
	writeJSON(w, http.StatusOK, map[string]any{"access_token": g.token, "scope": g.scope})
}

func (p *Platform) graphQL(w http.ResponseWriter, s *shop, body []byte) {
	var in struct {
		Query     string          `json:"query"`
		Variables json.RawMessage `json:"variables"`
	}
	if json.Unmarshal(body, &in) != nil || in.Query == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": "Invalid JSON or missing query"})
		return
	}
	gqlError := func(msg string) {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{"message": msg}}})
	}
	switch {
	case strings.Contains(in.Query, "webhookSubscriptionCreate"):
		var v struct {
			Topic string `json:"topic"`
			Sub   struct {
				URI string `json:"uri"`
			} `json:"webhookSubscription"`
		}
		if json.Unmarshal(in.Variables, &v) != nil || !knownTopic(v.Topic) {
			gqlError("Variable $topic of type WebhookSubscriptionTopic! was provided invalid value")
			return
		}
		if v.Sub.URI == "" {
			gqlError("Variable $webhookSubscription of type WebhookSubscriptionInput! was provided invalid value for uri")
			return
		}
		for _, sub := range s.subs {
			if sub.Topic == v.Topic && sub.URI == v.Sub.URI {
				writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"webhookSubscriptionCreate": map[string]any{
					"webhookSubscription": nil,
					"userErrors": []any{map[string]any{
						"field": []string{"webhookSubscription", "callbackUrl"}, "message": "Address for this topic has already been taken"}},
				}}})
				return
			}
		}
		sub := Subscription{ID: "gid://shopify/WebhookSubscription/" + strconv.Itoa(len(s.subs)+1), Topic: v.Topic, URI: v.Sub.URI}
		s.subs = append(s.subs, sub)
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"webhookSubscriptionCreate": map[string]any{
			"webhookSubscription": map[string]any{"id": sub.ID, "topic": sub.Topic, "uri": sub.URI},
			"userErrors":          []any{},
		}}})
	case strings.Contains(in.Query, "order("):
		var v struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(in.Variables, &v)
		num, ok := strings.CutPrefix(v.ID, "gid://shopify/Order/")
		id, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			gqlError("Invalid global id '" + v.ID + "'")
			return
		}
		order, found := s.orders[id]
		if !found {
			order = json.RawMessage("null")
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"order": order}})
	case strings.Contains(in.Query, "shop"):
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"shop": map[string]any{"name": s.name}}})
	default:
		gqlError("the fake platform does not know this operation")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
