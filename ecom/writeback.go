package ecom

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/gateway/gateway/domain"
)

// Writing a confirmation's answer back to the order (DESIGN.md section 18): the Shopify type
// through the Admin GraphQL API (tagsAdd, the order's note through orderUpdate, orderCancel), the
// WooCommerce type through its REST API (an order note, the order's status). Each write is safe
// to run again after a partial failure: a tag or a status set twice is the same, and a note
// already on the order is not added twice.

// ErrRejected: the platform refused the change itself (a userError, an order it will not
// cancel). Trying again will not help.
var ErrRejected = errors.New("ecom: the store platform refused the change")

// Credentials are what a write-back needs of a store: its shop (domain or host) and its API
// credentials (the Shopify type's Admin API token, the WooCommerce type's REST API consumer key
// and secret).
type Credentials struct {
	Shop        string
	Token       string
	Key, Secret string
}

// Answer is a confirmation's answer as it is written back to one order.
type Answer struct {
	OrderID int64
	Yes     bool
	// Tag is added to the order (Shopify type; "" = none).
	Tag string
	// Note is a line added to the order's note (Shopify) or an order note (WooCommerce).
	Note string
	// Cancel cancels the order (an answer no with cancelOnNo).
	Cancel bool
}

// OrderWriter is implemented by platforms whose orders take a confirmation's answer back.
type OrderWriter interface {
	// CanWrite reports whether the store's credentials allow a write-back at all.
	CanWrite(c Credentials) bool
	// WriteAnswer writes a to the order. Errors match ErrRejected, ErrNotFound or
	// domain.ErrStoreTokenRejected when trying again will not help, domain.ErrStorePlatform
	// when it may.
	WriteAnswer(ctx context.Context, client *Client, c Credentials, a Answer) error
}

// Permanent tells whether a write-back error will not go away by trying again.
func Permanent(err error) bool {
	return errors.Is(err, ErrRejected) || errors.Is(err, ErrNotFound) || errors.Is(err, domain.ErrStoreTokenRejected)
}

// ---- Shopify type: Admin GraphQL ----

const tagsAddMutation = `mutation tagsAdd($id: ID!, $tags: [String!]!) {
  tagsAdd(id: $id, tags: $tags) {
    node { id }
    userErrors { field message }
  }
}`

const orderNoteQuery = `query orderNote($id: ID!) {
  order(id: $id) { id note cancelledAt }
}`

const orderUpdateMutation = `mutation orderUpdate($input: OrderInput!) {
  orderUpdate(input: $input) {
    order { id note }
    userErrors { field message }
  }
}`

const orderCancelMutation = `mutation orderCancel($orderId: ID!, $notifyCustomer: Boolean, $refundMethod: OrderCancelRefundMethodInput!, $restock: Boolean!, $reason: OrderCancelReason!, $staffNote: String) {
  orderCancel(orderId: $orderId, notifyCustomer: $notifyCustomer, refundMethod: $refundMethod, restock: $restock, reason: $reason, staffNote: $staffNote) {
    job { id done }
    orderCancelUserErrors { field message code }
  }
}`

type userError struct {
	Field   []string `json:"field"`
	Message string   `json:"message"`
	Code    string   `json:"code"`
}

func userErrorsOf(what string, errs []userError) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Message)
	}
	return &detailError{kind: ErrRejected, detail: what + ": " + clip(strings.Join(msgs, "; "), nil)}
}

func orderGID(id int64) string { return "gid://shopify/Order/" + strconv.FormatInt(id, 10) }

// ShopifyTagsAdd adds tags to an order (tagsAdd; tags it has already stay as they are).
func (c *Client) ShopifyTagsAdd(ctx context.Context, shop, token string, orderID int64, tags []string) error {
	var out struct {
		TagsAdd *struct {
			Node       *struct{ ID string } `json:"node"`
			UserErrors []userError          `json:"userErrors"`
		} `json:"tagsAdd"`
	}
	if err := c.graphQL(ctx, shop, token, tagsAddMutation, map[string]any{"id": orderGID(orderID), "tags": tags}, &out); err != nil {
		return err
	}
	if out.TagsAdd == nil {
		return &detailError{kind: domain.ErrStorePlatform, detail: "empty tagsAdd answer"}
	}
	if err := userErrorsOf("tagsAdd", out.TagsAdd.UserErrors); err != nil {
		return err
	}
	if out.TagsAdd.Node == nil {
		return &detailError{kind: ErrNotFound, detail: "order " + strconv.FormatInt(orderID, 10)}
	}
	return nil
}

// ShopifyOrderNote reads an order's note and whether it is cancelled.
func (c *Client) ShopifyOrderNote(ctx context.Context, shop, token string, orderID int64) (note string, cancelled bool, err error) {
	var out struct {
		Order *struct {
			Note        *string `json:"note"`
			CancelledAt *string `json:"cancelledAt"`
		} `json:"order"`
	}
	if err := c.graphQL(ctx, shop, token, orderNoteQuery, map[string]any{"id": orderGID(orderID)}, &out); err != nil {
		return "", false, err
	}
	if out.Order == nil {
		return "", false, &detailError{kind: ErrNotFound, detail: "order " + strconv.FormatInt(orderID, 10)}
	}
	if out.Order.Note != nil {
		note = *out.Order.Note
	}
	return note, out.Order.CancelledAt != nil && *out.Order.CancelledAt != "", nil
}

// ShopifySetNote replaces an order's note (orderUpdate; the note field overwrites).
func (c *Client) ShopifySetNote(ctx context.Context, shop, token string, orderID int64, note string) error {
	var out struct {
		OrderUpdate *struct {
			UserErrors []userError `json:"userErrors"`
		} `json:"orderUpdate"`
	}
	vars := map[string]any{"input": map[string]any{"id": orderGID(orderID), "note": note}}
	if err := c.graphQL(ctx, shop, token, orderUpdateMutation, vars, &out); err != nil {
		return err
	}
	if out.OrderUpdate == nil {
		return &detailError{kind: domain.ErrStorePlatform, detail: "empty orderUpdate answer"}
	}
	return userErrorsOf("orderUpdate", out.OrderUpdate.UserErrors)
}

// ShopifyCancel cancels an order as the customer asked (orderCancel: reason CUSTOMER, restocked,
// anything paid refunded to the original payment method, the customer not notified by the
// platform: the conversation is the notice). An order cancelled already is not an error.
func (c *Client) ShopifyCancel(ctx context.Context, shop, token string, orderID int64, staffNote string) error {
	var out struct {
		OrderCancel *struct {
			Job        *struct{ ID string } `json:"job"`
			UserErrors []userError          `json:"orderCancelUserErrors"`
		} `json:"orderCancel"`
	}
	vars := map[string]any{
		"orderId": orderGID(orderID), "notifyCustomer": false, "restock": true, "reason": "CUSTOMER",
		"refundMethod": map[string]any{"originalPaymentMethodsRefund": true}, "staffNote": staffNote,
	}
	if err := c.graphQL(ctx, shop, token, orderCancelMutation, vars, &out); err != nil {
		return err
	}
	if out.OrderCancel == nil {
		return &detailError{kind: domain.ErrStorePlatform, detail: "empty orderCancel answer"}
	}
	return userErrorsOf("orderCancel", out.OrderCancel.UserErrors)
}

// WriteAnswer implements OrderWriter for the Shopify type: the answer's tag (tagsAdd), a line
// added to the order's note (orderUpdate, unless the note holds it already), then orderCancel
// when asked (unless the order is cancelled already).
func (shopify) WriteAnswer(ctx context.Context, client *Client, c Credentials, a Answer) error {
	if c.Token == "" {
		return &detailError{kind: domain.ErrStoreTokenRejected, detail: "the store was connected without an access token"}
	}
	if a.Tag != "" {
		if err := client.ShopifyTagsAdd(ctx, c.Shop, c.Token, a.OrderID, []string{a.Tag}); err != nil {
			return err
		}
	}
	note, cancelled, err := client.ShopifyOrderNote(ctx, c.Shop, c.Token, a.OrderID)
	if err != nil {
		return err
	}
	if a.Note != "" && !strings.Contains(note, a.Note) {
		next := a.Note
		if strings.TrimSpace(note) != "" {
			next = strings.TrimRight(note, "\n") + "\n" + a.Note
		}
		if err := client.ShopifySetNote(ctx, c.Shop, c.Token, a.OrderID, next); err != nil {
			return err
		}
	}
	if a.Cancel && !cancelled {
		return client.ShopifyCancel(ctx, c.Shop, c.Token, a.OrderID, a.Note)
	}
	return nil
}

// CanWrite implements OrderWriter: an Admin API token (OAuth, manual or store/connect).
func (shopify) CanWrite(c Credentials) bool { return c.Token != "" }

// ---- WooCommerce type: REST API v3 ----

// wooOrderPath is the REST API's path of an order (WooCommerce's wc/v3 namespace).
func wooOrderPath(id int64) string { return "/wp-json/wc/v3/orders/" + strconv.FormatInt(id, 10) }

// WooNotes lists an order's notes (GET /wp-json/wc/v3/orders/<id>/notes).
func (c *Client) WooNotes(ctx context.Context, cr Credentials, orderID int64) ([]string, error) {
	var out []struct {
		Note string `json:"note"`
	}
	if err := c.wooREST(ctx, cr, http.MethodGet, wooOrderPath(orderID)+"/notes", nil, &out); err != nil {
		return nil, err
	}
	notes := make([]string, len(out))
	for i, n := range out {
		notes[i] = n.Note
	}
	return notes, nil
}

// WooAddNote adds a private order note (POST /wp-json/wc/v3/orders/<id>/notes).
func (c *Client) WooAddNote(ctx context.Context, cr Credentials, orderID int64, note string) error {
	var out struct {
		ID int64 `json:"id"`
	}
	return c.wooREST(ctx, cr, http.MethodPost, wooOrderPath(orderID)+"/notes", map[string]any{"note": note, "customer_note": false}, &out)
}

// WooSetStatus sets an order's status (PUT /wp-json/wc/v3/orders/<id>).
func (c *Client) WooSetStatus(ctx context.Context, cr Credentials, orderID int64, status string) error {
	var out struct {
		ID     int64  `json:"id"`
		Status string `json:"status"`
	}
	return c.wooREST(ctx, cr, http.MethodPut, wooOrderPath(orderID), map[string]any{"status": status}, &out)
}

// WriteAnswer implements OrderWriter for the WooCommerce type: an order note (unless it is there
// already), then the order's status: processing for yes, cancelled for no with cancelOnNo.
func (wooCommerce) WriteAnswer(ctx context.Context, client *Client, c Credentials, a Answer) error {
	if c.Key == "" || c.Secret == "" {
		return &detailError{kind: domain.ErrStoreTokenRejected, detail: "the store was connected without REST API keys"}
	}
	if a.Note != "" {
		notes, err := client.WooNotes(ctx, c, a.OrderID)
		if err != nil {
			return err
		}
		have := false
		for _, n := range notes {
			have = have || strings.Contains(n, a.Note)
		}
		if !have {
			if err := client.WooAddNote(ctx, c, a.OrderID, a.Note); err != nil {
				return err
			}
		}
	}
	switch {
	case a.Yes:
		return client.WooSetStatus(ctx, c, a.OrderID, "processing")
	case a.Cancel:
		return client.WooSetStatus(ctx, c, a.OrderID, "cancelled")
	}
	return nil
}

// CanWrite implements OrderWriter: REST API keys given at connect.
func (wooCommerce) CanWrite(c Credentials) bool { return c.Key != "" && c.Secret != "" }

// wooREST sends one REST API request with HTTP Basic authentication (the consumer key and
// secret; WooCommerce takes it over HTTPS) and decodes the JSON answer. 401 and 403 are
// ErrStoreTokenRejected, 404 ErrNotFound, 400 ErrRejected, other failures ErrStorePlatform.
func (c *Client) wooREST(ctx context.Context, cr Credentials, method, path string, in, out any) error {
	host, ok := NormalizeHost(cr.Shop)
	if !ok {
		return &detailError{kind: domain.ErrInvalidShop, detail: strconv.Quote(clip(cr.Shop, nil))}
	}
	endpoint := strings.ReplaceAll(c.base, "{shop}", host) + path
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return &detailError{kind: domain.ErrStorePlatform, detail: "encode request", cause: err}
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, endpoint, body)
	if err != nil {
		return &detailError{kind: domain.ErrStorePlatform, detail: "build request", cause: err}
	}
	req.SetBasicAuth(cr.Key, cr.Secret)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.exchange(req, out, []string{cr.Key, cr.Secret}, wooErrorKind, wooMessage)
}

// wooErrorKind is what a WooCommerce REST status means: 401 and 403 a refused key, 404 an
// unknown order, 400 a change the store refuses; anything else may pass.
func wooErrorKind(status int) error {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return domain.ErrStoreTokenRejected
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusBadRequest:
		return ErrRejected
	}
	return domain.ErrStorePlatform
}

// wooMessage is a WordPress REST error's message ({"code": ..., "message": ...}).
func wooMessage(data []byte) string {
	var e struct {
		Code    flexString `json:"code"`
		Message flexString `json:"message"`
	}
	if json.Unmarshal(data, &e) != nil {
		return ""
	}
	if e.Code != "" {
		return string(e.Code) + ": " + string(e.Message)
	}
	return string(e.Message)
}

// Interface guards.
var (
	_ OrderWriter = shopify{}
	_ OrderWriter = wooCommerce{}
	_ FormTopics  = wooCommerce{}
)
