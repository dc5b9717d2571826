package ecom

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gateway/gateway/domain"
	json "github.com/goccy/go-json"
)

const (
	defaultAPIBase     = "https://{shop}"
	defaultAPIVersion  = "2026-10"
	defaultTimeout     = 15 * time.Second
	maxResponseBytes   = 8 << 20
	maxErrorDetail     = 200
	shopDomainSuffix   = ".myshopify.com"
	maxShopLabelLength = 63 // one DNS label
)

// ClientOptions configures a Client. Zero values take the defaults.
type ClientOptions struct {
	// APIBase is the platform's address with {shop} standing for the shop domain
	// (default "https://{shop}"; tests point it at a fake, e.g. "http://127.0.0.1:1234/{shop}").
	APIBase string
	// APIVersion is the Admin API version in request paths (default "2026-10").
	APIVersion string
	// HTTP is the client used for requests (default: a new http.Client). Redirects are never
	// followed: the access token travels in a custom header that Go would carry to any host.
	HTTP *http.Client
	// Timeout bounds each platform request (default 15 s), on top of the caller's context.
	Timeout time.Duration
}

// Client talks to a Shopify-type store platform's Admin API on behalf of many shops. It keeps no
// per-shop state and is safe for concurrent use.
type Client struct {
	base    string
	version string
	http    *http.Client
	timeout time.Duration
}

// NewClient returns a Client for opts.
func NewClient(opts ClientOptions) *Client {
	c := &Client{
		base:    strings.TrimRight(opts.APIBase, "/"),
		version: opts.APIVersion,
		timeout: opts.Timeout,
	}
	if c.base == "" {
		c.base = defaultAPIBase
	}
	if c.version == "" {
		c.version = defaultAPIVersion
	}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	hc := http.Client{}
	if opts.HTTP != nil {
		hc = *opts.HTTP // a copy, so the caller's client keeps its own redirect policy
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &hc
	return c
}

// ValidShopDomain reports whether shop, lower-cased, is a `<name>.myshopify.com` domain
// (`^[a-z0-9][a-z0-9-]*\.myshopify\.com$`, name at most 63 characters). Check it before any
// outbound call; the Client refuses other domains too.
func ValidShopDomain(shop string) bool {
	_, ok := canonicalShop(shop)
	return ok
}

// NormalizeShopDomain turns what a user typed ("https://My-Store.myshopify.com/admin") into
// the shop domain ("my-store.myshopify.com"), or reports false when it is not one.
func NormalizeShopDomain(input string) (string, bool) {
	return canonicalShop(hostPart(input))
}

// NormalizeHost reads a host name from a domain or URL ("https://Shop.example.com/" →
// "shop.example.com"), as a WooCommerce-type store is named: letters, digits, '-', '.' and a
// port; a dot in it, or localhost.
func NormalizeHost(input string) (string, bool) {
	s := strings.TrimSuffix(hostPart(input), ".")
	if s == "" || len(s) > 253 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == ':') {
			return "", false
		}
	}
	if s[0] == '.' || s[0] == '-' || s[0] == ':' || !strings.Contains(s, ".") && !strings.HasPrefix(s, "localhost") {
		return "", false
	}
	return s, true
}

// hostPart is what a user typed as a store's address, lower-cased, without the http(s) scheme
// and without any path, query or fragment.
func hostPart(input string) string {
	s := strings.ToLower(strings.TrimSpace(input))
	s = strings.TrimPrefix(s, "https://")
	s = strings.TrimPrefix(s, "http://")
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	return s
}

// AccessTokenPrefixes are the prefixes of the Shopify-type platform's Admin API tokens (a fresh
// slice each call).
func AccessTokenPrefixes() []string { return []string{"shpat_", "shpca_", "shppa_"} }

// ValidAccessToken reports whether token has the shape of an Admin API token (one of
// AccessTokenPrefixes), so a pasted API key or secret is refused before any outbound call.
func ValidAccessToken(token string) bool {
	for _, p := range AccessTokenPrefixes() {
		if strings.HasPrefix(token, p) {
			return true
		}
	}
	return false
}

func canonicalShop(shop string) (string, bool) {
	s := strings.ToLower(shop)
	name, ok := strings.CutSuffix(s, shopDomainSuffix)
	if !ok || name == "" || len(name) > maxShopLabelLength {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0:
		default:
			return "", false
		}
	}
	return s, true
}

// AuthorizeURL is where to send the store owner to install the app:
// {APIBase}/admin/oauth/authorize with client_id, scope (comma-separated), redirect_uri and
// state. It returns "" for an invalid shop.
func (c *Client) AuthorizeURL(shop, clientID, scopes, redirectURI, state string) string {
	base, err := c.shopBase(shop)
	if err != nil {
		return ""
	}
	q := url.Values{}
	q.Set("client_id", clientID)
	q.Set("scope", scopes)
	q.Set("redirect_uri", redirectURI)
	q.Set("state", state)
	return base + "/admin/oauth/authorize?" + q.Encode()
}

// ExchangeCode trades the OAuth callback's code for a permanent (offline) access token and the
// granted scopes: POST {APIBase}/admin/oauth/access_token. A rejected code or wrong app
// credentials (400/401/403) is ErrUnauthorized.
func (c *Client) ExchangeCode(ctx context.Context, shop, clientID, clientSecret, code string) (token, scope string, err error) {
	base, err := c.shopBase(shop)
	if err != nil {
		return "", "", err
	}
	if clientID == "" || clientSecret == "" || code == "" {
		return "", "", &detailError{kind: domain.ErrStoreTokenRejected, detail: "missing client id, client secret or code"}
	}
	body, _ := json.Marshal(map[string]string{"client_id": clientID, "client_secret": clientSecret, "code": code})
	var out struct {
		AccessToken string `json:"access_token"`
		Scope       string `json:"scope"`
	}
	err = c.do(ctx, base+"/admin/oauth/access_token", "", body, &out, []string{clientSecret, code}, http.StatusBadRequest)
	if err != nil {
		return "", "", err
	}
	if out.AccessToken == "" {
		return "", "", &detailError{kind: domain.ErrStorePlatform, detail: "token exchange answered without an access token"}
	}
	return out.AccessToken, out.Scope, nil
}

// VerifyToken checks an access token with the GraphQL query `{ shop { name } }` and returns the
// shop's name. A rejected token is ErrUnauthorized.
func (c *Client) VerifyToken(ctx context.Context, shop, token string) (shopName string, err error) {
	var out struct {
		Shop *struct {
			Name string `json:"name"`
		} `json:"shop"`
	}
	if err := c.graphQL(ctx, shop, token, "{ shop { name } }", nil, &out); err != nil {
		return "", err
	}
	if out.Shop == nil {
		return "", &detailError{kind: domain.ErrStorePlatform, detail: "shop query answered without a shop"}
	}
	return out.Shop.Name, nil
}

const webhookSubscriptionCreate = `mutation webhookSubscriptionCreate($topic: WebhookSubscriptionTopic!, $webhookSubscription: WebhookSubscriptionInput!) {
  webhookSubscriptionCreate(topic: $topic, webhookSubscription: $webhookSubscription) {
    webhookSubscription { id topic uri }
    userErrors { field message }
  }
}`

// TopicEnum is the Admin GraphQL WebhookSubscriptionTopic of a SPEC topic ("orders/create" →
// "ORDERS_CREATE").
func TopicEnum(topic string) string {
	return strings.ToUpper(strings.ReplaceAll(topic, "/", "_"))
}

// RegisterWebhooks subscribes callbackURL to the five topics with webhookSubscriptionCreate
// (one mutation per topic, input field `uri`), then to checkouts/create and checkouts/update
// (best effort, not counted). A subscription the shop already has ("address
// ... has already been taken") counts as registered. It tries every topic and returns how many
// are in place with the failures joined (each matches ErrUpstream), except that a rejected
// token (ErrUnauthorized) stops at once.
func (c *Client) RegisterWebhooks(ctx context.Context, shop, token, callbackURL string) (registered int, err error) {
	if _, err := c.shopBase(shop); err != nil {
		return 0, err
	}
	if u, perr := url.Parse(callbackURL); perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return 0, errors.New("ecom: webhook callback URL must be an absolute http(s) URL")
	}
	var errs []error
	for _, topic := range Topics() {
		var out struct {
			Create *struct {
				Subscription *struct {
					ID string `json:"id"`
				} `json:"webhookSubscription"`
				UserErrors []struct {
					Field   []string `json:"field"`
					Message string   `json:"message"`
				} `json:"userErrors"`
			} `json:"webhookSubscriptionCreate"`
		}
		vars := map[string]any{
			"topic":               TopicEnum(topic),
			"webhookSubscription": map[string]any{"uri": callbackURL},
		}
		if err := c.graphQL(ctx, shop, token, webhookSubscriptionCreate, vars, &out); err != nil {
			if errors.Is(err, domain.ErrStoreTokenRejected) || ctx.Err() != nil {
				return registered, err
			}
			errs = append(errs, err)
			continue
		}
		switch {
		case out.Create == nil:
			errs = append(errs, &detailError{kind: domain.ErrStorePlatform, detail: topic + ": empty webhookSubscriptionCreate answer"})
		case len(out.Create.UserErrors) > 0:
			msgs := make([]string, 0, len(out.Create.UserErrors))
			exists := false
			for _, ue := range out.Create.UserErrors {
				m := strings.ToLower(ue.Message)
				exists = exists || strings.Contains(m, "already exists") || strings.Contains(m, "taken")
				msgs = append(msgs, ue.Message)
			}
			if exists {
				registered++
			} else {
				errs = append(errs, &detailError{kind: domain.ErrStorePlatform, detail: topic + ": " + clip(strings.Join(msgs, "; "), nil)})
			}
		case out.Create.Subscription == nil:
			errs = append(errs, &detailError{kind: domain.ErrStorePlatform, detail: topic + ": no subscription created"})
		default:
			registered++
		}
	}
	// The checkout topics (abandoned checkouts, DESIGN.md section 18) are best effort: a token
	// that cannot subscribe to them still connects the store.
	for _, topic := range []string{TopicCheckoutCreated, TopicCheckoutUpdated} {
		c.registerExtra(ctx, shop, token, callbackURL, topic)
	}
	return registered, errors.Join(errs...)
}

// registerExtra subscribes to one more topic, ignoring a failure (registered already, or not
// allowed to the token).
func (c *Client) registerExtra(ctx context.Context, shop, token, callbackURL, topic string) {
	var out json.RawMessage
	vars := map[string]any{"topic": TopicEnum(topic), "webhookSubscription": map[string]any{"uri": callbackURL}}
	_ = c.graphQL(ctx, shop, token, webhookSubscriptionCreate, vars, &out)
}

const orderQuery = `query order($id: ID!) {
  order(id: $id) {
    legacyResourceId
    name
    phone
    statusPageUrl
    paymentGatewayNames
    totalPriceSet { shopMoney { amount currencyCode } }
    customer { firstName defaultPhoneNumber { phoneNumber } }
    shippingAddress { firstName address1 city phone countryCodeV2 }
    billingAddress { firstName address1 city phone countryCodeV2 }
    lineItems(first: 100) { nodes { title quantity } }
    fulfillments(first: 1) { trackingInfo(first: 1) { number url company } }
  }
}`

// FetchOrder reads an order through the Admin GraphQL API (query `order(id:)`; REST is legacy
// for Shopify) and returns it as a REST-shaped order object, the shape webhooks deliver, for
// MergeOrder: id, name, phone, order_status_url, payment_gateway_names, total_price, currency,
// customer {first_name, phone}, shipping_address and billing_address {first_name, address1,
// city, phone, country_code}, line_items [{title, quantity}] (first 100) and fulfillments
// [{tracking_number, tracking_url, tracking_company}]. An unknown order is ErrNotFound.
// The token needs read_orders, and the customer fields the platform's protected customer data
// access.
func (c *Client) FetchOrder(ctx context.Context, shop, token string, orderID int64) (json.RawMessage, error) {
	if orderID <= 0 {
		return nil, &detailError{kind: ErrNotFound, detail: "order id must be positive"}
	}
	type address struct {
		FirstName   string `json:"firstName"`
		Address1    string `json:"address1"`
		City        string `json:"city"`
		Phone       string `json:"phone"`
		CountryCode string `json:"countryCodeV2"`
	}
	var out struct {
		Order *struct {
			Name                string   `json:"name"`
			Phone               string   `json:"phone"`
			StatusPageURL       string   `json:"statusPageUrl"`
			PaymentGatewayNames []string `json:"paymentGatewayNames"`
			TotalPriceSet       struct {
				ShopMoney struct {
					Amount       string `json:"amount"`
					CurrencyCode string `json:"currencyCode"`
				} `json:"shopMoney"`
			} `json:"totalPriceSet"`
			Customer *struct {
				FirstName          string `json:"firstName"`
				DefaultPhoneNumber *struct {
					PhoneNumber string `json:"phoneNumber"`
				} `json:"defaultPhoneNumber"`
			} `json:"customer"`
			ShippingAddress *address `json:"shippingAddress"`
			BillingAddress  *address `json:"billingAddress"`
			LineItems       struct {
				Nodes []struct {
					Title    string `json:"title"`
					Quantity int    `json:"quantity"`
				} `json:"nodes"`
			} `json:"lineItems"`
			Fulfillments []struct {
				TrackingInfo []struct {
					Number  string `json:"number"`
					URL     string `json:"url"`
					Company string `json:"company"`
				} `json:"trackingInfo"`
			} `json:"fulfillments"`
		} `json:"order"`
	}
	vars := map[string]any{"id": "gid://shopify/Order/" + strconv.FormatInt(orderID, 10)}
	if err := c.graphQL(ctx, shop, token, orderQuery, vars, &out); err != nil {
		return nil, err
	}
	g := out.Order
	if g == nil {
		return nil, &detailError{kind: ErrNotFound, detail: "order " + strconv.FormatInt(orderID, 10)}
	}

	type restAddress struct {
		FirstName   string `json:"first_name,omitempty"`
		Address1    string `json:"address1,omitempty"`
		City        string `json:"city,omitempty"`
		Phone       string `json:"phone,omitempty"`
		CountryCode string `json:"country_code,omitempty"`
	}
	type restLine struct {
		Title    string `json:"title"`
		Quantity int    `json:"quantity"`
	}
	type restFulfillment struct {
		TrackingNumber  string `json:"tracking_number,omitempty"`
		TrackingURL     string `json:"tracking_url,omitempty"`
		TrackingCompany string `json:"tracking_company,omitempty"`
	}
	type restCustomer struct {
		FirstName string `json:"first_name,omitempty"`
		Phone     string `json:"phone,omitempty"`
	}
	rest := struct {
		ID                  int64             `json:"id"`
		Name                string            `json:"name,omitempty"`
		Phone               string            `json:"phone,omitempty"`
		OrderStatusURL      string            `json:"order_status_url,omitempty"`
		PaymentGatewayNames []string          `json:"payment_gateway_names,omitempty"`
		TotalPrice          string            `json:"total_price,omitempty"`
		Currency            string            `json:"currency,omitempty"`
		Customer            *restCustomer     `json:"customer,omitempty"`
		ShippingAddress     *restAddress      `json:"shipping_address,omitempty"`
		BillingAddress      *restAddress      `json:"billing_address,omitempty"`
		LineItems           []restLine        `json:"line_items"`
		Fulfillments        []restFulfillment `json:"fulfillments"`
	}{
		ID:                  orderID,
		Name:                g.Name,
		Phone:               g.Phone,
		OrderStatusURL:      g.StatusPageURL,
		PaymentGatewayNames: g.PaymentGatewayNames,
		TotalPrice:          g.TotalPriceSet.ShopMoney.Amount,
		Currency:            g.TotalPriceSet.ShopMoney.CurrencyCode,
		LineItems:           []restLine{},
		Fulfillments:        []restFulfillment{},
	}
	if cu := g.Customer; cu != nil {
		rest.Customer = &restCustomer{FirstName: cu.FirstName}
		if cu.DefaultPhoneNumber != nil {
			rest.Customer.Phone = cu.DefaultPhoneNumber.PhoneNumber
		}
	}
	toRest := func(a *address) *restAddress {
		if a == nil {
			return nil
		}
		return &restAddress{a.FirstName, a.Address1, a.City, a.Phone, a.CountryCode}
	}
	rest.ShippingAddress, rest.BillingAddress = toRest(g.ShippingAddress), toRest(g.BillingAddress)
	for _, l := range g.LineItems.Nodes {
		rest.LineItems = append(rest.LineItems, restLine{l.Title, l.Quantity})
	}
	for _, f := range g.Fulfillments {
		var rf restFulfillment
		if len(f.TrackingInfo) > 0 {
			t := f.TrackingInfo[0]
			rf = restFulfillment{t.Number, t.URL, t.Company}
		}
		rest.Fulfillments = append(rest.Fulfillments, rf)
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return nil, &detailError{kind: domain.ErrStorePlatform, detail: "encode order", cause: err}
	}
	return b, nil
}

// shopBase is APIBase for a valid shop, or ErrInvalidShop.
func (c *Client) shopBase(shop string) (string, error) {
	s, ok := canonicalShop(shop)
	if !ok {
		return "", &detailError{kind: domain.ErrInvalidShop, detail: strconv.Quote(clip(shop, nil))}
	}
	return strings.ReplaceAll(c.base, "{shop}", s), nil
}

// graphQL runs one Admin GraphQL operation for shop and decodes its data into out. Top-level
// GraphQL errors fail the call: ACCESS_DENIED as ErrUnauthorized, anything else (THROTTLED
// included) as ErrUpstream.
func (c *Client) graphQL(ctx context.Context, shop, token, query string, vars map[string]any, out any) error {
	base, err := c.shopBase(shop)
	if err != nil {
		return err
	}
	if strings.TrimSpace(token) == "" {
		return &detailError{kind: domain.ErrStoreTokenRejected, detail: "empty access token"}
	}
	req := map[string]any{"query": query}
	if vars != nil {
		req["variables"] = vars
	}
	body, err := json.Marshal(req)
	if err != nil {
		return &detailError{kind: domain.ErrStorePlatform, detail: "encode GraphQL request", cause: err}
	}
	var resp struct {
		Data   json.RawMessage `json:"data"`
		Errors json.RawMessage `json:"errors"`
	}
	if err := c.do(ctx, base+"/admin/api/"+c.version+"/graphql.json", token, body, &resp, []string{token}); err != nil {
		return err
	}
	if e := bytes.TrimSpace(resp.Errors); len(e) > 0 && string(e) != "null" && string(e) != "[]" {
		msg, kind := graphQLErrorKind(e)
		return &detailError{kind: kind, detail: "GraphQL: " + clip(msg, []string{token})}
	}
	if d := bytes.TrimSpace(resp.Data); len(d) == 0 || string(d) == "null" {
		return &detailError{kind: domain.ErrStorePlatform, detail: "GraphQL answered without data"}
	}
	if err := json.Unmarshal(resp.Data, out); err != nil {
		return &detailError{kind: domain.ErrStorePlatform, detail: "unexpected GraphQL data", cause: err}
	}
	return nil
}

func graphQLErrorKind(raw json.RawMessage) (msg string, kind error) {
	var list []struct {
		Message    string `json:"message"`
		Extensions struct {
			Code string `json:"code"`
		} `json:"extensions"`
	}
	if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return platformMessage(raw), domain.ErrStorePlatform
	}
	kind = domain.ErrStorePlatform
	msgs := make([]string, 0, len(list))
	for _, e := range list {
		if e.Extensions.Code == "ACCESS_DENIED" {
			kind = domain.ErrStoreTokenRejected
		}
		m := e.Message
		if e.Extensions.Code != "" {
			m = e.Extensions.Code + ": " + m
		}
		msgs = append(msgs, m)
	}
	return strings.Join(msgs, "; "), kind
}

// do POSTs a JSON body and decodes a JSON answer into out. 401 and 403, and any status listed
// in alsoUnauthorized, are ErrUnauthorized; other non-2xx answers, transport failures and bad
// JSON are ErrUpstream. secrets are scrubbed from any detail taken from the answer.
func (c *Client) do(ctx context.Context, endpoint, token string, body []byte, out any, secrets []string, alsoUnauthorized ...int) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return &detailError{kind: domain.ErrStorePlatform, detail: "build request", cause: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("X-Shopify-Access-Token", token)
	}
	kindOf := func(status int) error {
		if status == http.StatusUnauthorized || status == http.StatusForbidden || slices.Contains(alsoUnauthorized, status) {
			return domain.ErrStoreTokenRejected
		}
		return domain.ErrStorePlatform
	}
	return c.exchange(req, out, secrets, kindOf, platformMessage)
}

// exchange sends req and decodes its JSON answer into out: a transport failure, a body over 8
// MiB or one that is not the JSON expected is ErrStorePlatform; a non-2xx status is kindOf's
// error, its detail the status and message's text of the answer, with secrets scrubbed.
func (c *Client) exchange(req *http.Request, out any, secrets []string, kindOf func(status int) error, message func([]byte) string) error {
	resp, err := c.http.Do(req)
	if err != nil {
		// *url.Error names the URL (shop and path, never a credential, which is a header).
		return &detailError{kind: domain.ErrStorePlatform, detail: "request", cause: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return &detailError{kind: domain.ErrStorePlatform, detail: "read answer", cause: err}
	}
	if len(data) > maxResponseBytes {
		return &detailError{kind: domain.ErrStorePlatform, detail: "answer larger than 8 MiB"}
	}
	if status := resp.StatusCode; status < 200 || status > 299 {
		detail := "HTTP " + strconv.Itoa(status)
		if m := message(data); m != "" {
			detail += ": " + clip(m, secrets)
		}
		return &detailError{kind: kindOf(status), detail: detail}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &detailError{kind: domain.ErrStorePlatform, detail: "answer is not the expected JSON", cause: err}
	}
	return nil
}

// platformMessage pulls a human message out of an error answer: {"errors": "..."},
// {"errors": [{"message": ...}]}, {"error_description": ...} or {"error": ...}.
func platformMessage(data []byte) string {
	var e struct {
		Errors      json.RawMessage `json:"errors"`
		Error       flexString      `json:"error"`
		Description flexString      `json:"error_description"`
	}
	if json.Unmarshal(data, &e) != nil {
		return ""
	}
	if d := pick(string(e.Description), string(e.Error)); d != "" {
		return d
	}
	var s string
	if json.Unmarshal(e.Errors, &s) == nil {
		return s
	}
	var list []struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(e.Errors, &list) == nil && len(list) > 0 {
		return list[0].Message
	}
	if len(bytes.TrimSpace(e.Errors)) > 0 {
		return string(bytes.TrimSpace(e.Errors))
	}
	return ""
}

// clip shortens platform text for an error message and removes any secret it echoes.
func clip(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	if len(s) > maxErrorDetail {
		n := maxErrorDetail
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}
