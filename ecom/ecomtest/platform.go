// Package ecomtest is a fake store platform for tests: an httptest server that answers the
// Admin calls ecom.Client makes of a Shopify-type shop (OAuth code exchange, GraphQL shop name,
// webhook subscriptions, order query, and the write-backs tagsAdd, orderUpdate and orderCancel)
// and the REST calls it makes of a WooCommerce-type store (order notes, order status), for
// shops and stores registered on it. It records every request, and every write-back in the
// order it came, so a test reads what the store would hold (Order, WriteBacks). Point
// ecom.ClientOptions.APIBase at Platform.APIBase. It imports only the standard library.
package ecomtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
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

// Order is what the fake holds of one order after the write-backs: its tags, note and status.
type Order struct {
	Tags      []string
	Note      string
	Cancelled bool
	// CancelReason, Restock, NotifyCustomer, Refund and StaffNote are orderCancel's arguments.
	CancelReason   string
	Restock        bool
	NotifyCustomer bool
	Refund         bool
	StaffNote      string
	// Status is a WooCommerce order's status ("" until a write-back set it); Notes its notes.
	Status string
	Notes  []string
}

// WriteBack is one change a write-back made, in arrival order.
type WriteBack struct {
	Shop    string
	OrderID int64
	Op      string // tagsAdd, orderUpdate, orderCancel (Shopify type); note, status (WooCommerce type)
	Tags    []string
	Note    string
	Status  string
	At      time.Time
}

// wooStore is a WooCommerce-type store: the REST API keys it accepts.
type wooStore struct{ key, secret string }

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
	orders       map[string]*Order // by shop + "/" + order id
	writes       []WriteBack
	woo          map[string]wooStore
}

// knownTopics are the WebhookSubscriptionTopic values the fake accepts.
func knownTopic(t string) bool {
	switch t {
	case "ORDERS_CREATE", "ORDERS_PAID", "ORDERS_CANCELLED", "ORDERS_UPDATED",
		"FULFILLMENTS_CREATE", "REFUNDS_CREATE", "APP_UNINSTALLED", "CHECKOUTS_CREATE", "CHECKOUTS_UPDATE":
		return true
	}
	return false
}

// New starts a fake platform; Close it when done.
func New() *Platform {
	p := &Platform{shops: map[string]*shop{}, orders: map[string]*Order{}, woo: map[string]wooStore{}}
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

// AddWooStore registers a WooCommerce-type store by host with the REST API keys it accepts.
func (p *Platform) AddWooStore(host, key, secret string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.woo[host] = wooStore{key, secret}
}

// Order returns what the store holds of an order after the write-backs (false: none touched it).
func (p *Platform) Order(shop string, id int64) (Order, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.orders[shop+"/"+strconv.FormatInt(id, 10)]
	if !ok {
		return Order{}, false
	}
	c := *o
	c.Tags, c.Notes = append([]string(nil), o.Tags...), append([]string(nil), o.Notes...)
	return c, true
}

// WriteBacks returns every write-back change so far, in order.
func (p *Platform) WriteBacks() []WriteBack {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]WriteBack(nil), p.writes...)
}

func (p *Platform) order(shop string, id int64) *Order {
	k := shop + "/" + strconv.FormatInt(id, 10)
	o := p.orders[k]
	if o == nil {
		o = &Order{}
		p.orders[k] = o
	}
	return o
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
	if strings.HasPrefix(path, "/wp-json/wc/v3/") {
		p.wooREST(w, r, domain, path, body)
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
		p.graphQL(w, domain, s, body)
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

func (p *Platform) graphQL(w http.ResponseWriter, shopDomain string, s *shop, body []byte) {
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
	case strings.Contains(in.Query, "tagsAdd("), strings.Contains(in.Query, "orderUpdate("),
		strings.Contains(in.Query, "orderCancel("), strings.Contains(in.Query, "query orderNote"):
		p.writeBack(w, shopDomain, in.Query, in.Variables)
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

// orderNumber reads a gid://shopify/Order/<n>.
func orderNumber(gid string) (int64, bool) {
	num, ok := strings.CutPrefix(gid, "gid://shopify/Order/")
	id, err := strconv.ParseInt(num, 10, 64)
	return id, ok && err == nil && id > 0
}

// writeBack answers the Admin GraphQL operations a confirmation's write-back makes, as the
// Admin API does (their payload shapes: tagsAdd's node and userErrors, orderUpdate's order and
// userErrors, orderCancel's job and orderCancelUserErrors), and records them.
func (p *Platform) writeBack(w http.ResponseWriter, shop, query string, vars json.RawMessage) {
	data := func(v map[string]any) { writeJSON(w, http.StatusOK, map[string]any{"data": v}) }
	gqlError := func(msg string) {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{"message": msg}}})
	}
	now := time.Now()
	// target decodes the variables into v and finds the order named by the global id that gid
	// reads from them; a bad variable or id is answered with the Admin API's error (false).
	target := func(v any, gid func() string, badVars string) (*Order, int64, bool) {
		if json.Unmarshal(vars, v) != nil {
			gqlError(badVars)
			return nil, 0, false
		}
		id, ok := orderNumber(gid())
		if !ok {
			gqlError("Invalid global id '" + gid() + "'")
			return nil, 0, false
		}
		return p.order(shop, id), id, true
	}
	switch {
	case strings.Contains(query, "tagsAdd("):
		var v struct {
			ID   string   `json:"id"`
			Tags []string `json:"tags"`
		}
		o, id, ok := target(&v, func() string { return v.ID }, "Variable $tags of type [String!]! was provided invalid value")
		if !ok {
			return
		}
		for _, t := range v.Tags {
			for _, one := range strings.Split(t, ",") { // a tag list may come comma-separated
				if one = strings.TrimSpace(one); one != "" && !slices.Contains(o.Tags, one) {
					o.Tags = append(o.Tags, one)
				}
			}
		}
		p.writes = append(p.writes, WriteBack{Shop: shop, OrderID: id, Op: "tagsAdd", Tags: v.Tags, At: now})
		data(map[string]any{"tagsAdd": map[string]any{"node": map[string]any{"id": v.ID}, "userErrors": []any{}}})
	case strings.Contains(query, "query orderNote"):
		var v struct {
			ID string `json:"id"`
		}
		o, _, ok := target(&v, func() string { return v.ID }, "Variable $id of type ID! was provided invalid value")
		if !ok {
			return
		}
		var note, cancelledAt any
		if o.Note != "" {
			note = o.Note
		}
		if o.Cancelled {
			cancelledAt = now.UTC().Format(time.RFC3339)
		}
		data(map[string]any{"order": map[string]any{"id": v.ID, "note": note, "cancelledAt": cancelledAt}})
	case strings.Contains(query, "orderUpdate("):
		var v struct {
			Input struct {
				ID   string  `json:"id"`
				Note *string `json:"note"`
			} `json:"input"`
		}
		o, id, ok := target(&v, func() string { return v.Input.ID }, "Variable $input of type OrderInput! was provided invalid value")
		if !ok {
			return
		}
		if v.Input.Note != nil {
			o.Note = *v.Input.Note
		}
		p.writes = append(p.writes, WriteBack{Shop: shop, OrderID: id, Op: "orderUpdate", Note: o.Note, At: now})
		data(map[string]any{"orderUpdate": map[string]any{"order": map[string]any{"id": v.Input.ID, "note": o.Note}, "userErrors": []any{}}})
	case strings.Contains(query, "orderCancel("):
		var v struct {
			OrderID        string `json:"orderId"`
			NotifyCustomer bool   `json:"notifyCustomer"`
			Restock        *bool  `json:"restock"`
			Reason         string `json:"reason"`
			StaffNote      string `json:"staffNote"`
			RefundMethod   *struct {
				Original bool `json:"originalPaymentMethodsRefund"`
			} `json:"refundMethod"`
		}
		const badVars = "Variable $refundMethod of type OrderCancelRefundMethodInput! was provided invalid value"
		o, id, ok := target(&v, func() string { return v.OrderID }, badVars)
		if !ok {
			return
		}
		if v.Restock == nil || v.RefundMethod == nil || v.Reason == "" {
			gqlError(badVars)
			return
		}
		if o.Cancelled {
			data(map[string]any{"orderCancel": map[string]any{"job": nil, "orderCancelUserErrors": []any{
				map[string]any{"field": []string{"orderId"}, "message": "Order has already been cancelled", "code": "INVALID"}}}})
			return
		}
		o.Cancelled, o.CancelReason, o.Restock, o.NotifyCustomer = true, v.Reason, *v.Restock, v.NotifyCustomer
		o.Refund, o.StaffNote = v.RefundMethod.Original, v.StaffNote
		p.writes = append(p.writes, WriteBack{Shop: shop, OrderID: id, Op: "orderCancel", Note: v.StaffNote, At: now})
		data(map[string]any{"orderCancel": map[string]any{"job": map[string]any{"id": "gid://shopify/Job/" + strconv.Itoa(len(p.writes)), "done": false}, "orderCancelUserErrors": []any{}}})
	}
}

// wooREST answers the WooCommerce REST API v3 calls of a write-back: GET and POST
// /wp-json/wc/v3/orders/<id>/notes, PUT /wp-json/wc/v3/orders/<id> (HTTP Basic with the store's
// consumer key and secret), with WordPress's error shape.
func (p *Platform) wooREST(w http.ResponseWriter, r *http.Request, host, path string, body []byte) {
	wpErr := func(status int, code, msg string) {
		writeJSON(w, status, map[string]any{"code": code, "message": msg, "data": map[string]any{"status": status}})
	}
	st, known := p.woo[host]
	key, secret, ok := r.BasicAuth()
	if !known || !ok || key != st.key || secret != st.secret {
		wpErr(http.StatusUnauthorized, "woocommerce_rest_cannot_view", "Sorry, you cannot list resources.")
		return
	}
	rest, _ := strings.CutPrefix(path, "/wp-json/wc/v3/orders/")
	idText, sub, _ := strings.Cut(rest, "/")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id <= 0 {
		wpErr(http.StatusNotFound, "rest_no_route", "No route was found matching the URL and request method.")
		return
	}
	o := p.order(host, id)
	now := time.Now()
	switch {
	case sub == "notes" && r.Method == http.MethodGet:
		notes := make([]any, len(o.Notes))
		for i, n := range o.Notes {
			notes[i] = map[string]any{"id": i + 1, "author": "WooCommerce", "note": n, "customer_note": false}
		}
		writeJSON(w, http.StatusOK, notes)
	case sub == "notes" && r.Method == http.MethodPost:
		var in struct {
			Note string `json:"note"`
		}
		if json.Unmarshal(body, &in) != nil || in.Note == "" {
			wpErr(http.StatusBadRequest, "rest_missing_callback_param", "Missing parameter(s): note")
			return
		}
		o.Notes = append(o.Notes, in.Note)
		p.writes = append(p.writes, WriteBack{Shop: host, OrderID: id, Op: "note", Note: in.Note, At: now})
		writeJSON(w, http.StatusCreated, map[string]any{"id": len(o.Notes), "author": "WooCommerce", "note": in.Note, "customer_note": false})
	case sub == "" && r.Method == http.MethodPut:
		var in struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(body, &in) != nil {
			wpErr(http.StatusBadRequest, "rest_invalid_json", "Invalid JSON body passed.")
			return
		}
		switch in.Status {
		case "pending", "processing", "on-hold", "completed", "cancelled", "refunded", "failed":
		default:
			wpErr(http.StatusBadRequest, "rest_invalid_param", "Invalid parameter(s): status")
			return
		}
		o.Status = in.Status
		o.Cancelled = o.Cancelled || in.Status == "cancelled"
		p.writes = append(p.writes, WriteBack{Shop: host, OrderID: id, Op: "status", Status: in.Status, At: now})
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "status": in.Status})
	default:
		wpErr(http.StatusNotFound, "rest_no_route", "No route was found matching the URL and request method.")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
