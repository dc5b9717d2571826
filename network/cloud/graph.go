package cloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/domain"
)

// graph is the Graph API's HTTP client: one base URL ({graph}/{version}) and a token per call.
type graph struct {
	base   string
	client *http.Client
}

// maxAnswer bounds an answer read from the Graph API.
const maxAnswer = 4 << 20

// errNotSent: the request never reached Meta (the connection could not be made): nothing was
// sent, so a message may go again at once.
var errNotSent = errors.New("the Graph API could not be reached")

// call makes one Graph request and decodes its answer into out (nil: ignored). A Graph error
// answer is a *cloudapi.Error; a request that could not be made wraps errNotSent; anything
// else (no answer, a garbled one) is an error of its own: the outcome is unknown.
func (g *graph) call(ctx context.Context, token, method, path string, query url.Values, body io.Reader, contentType string, out any) error {
	u := g.base + "/" + strings.TrimPrefix(path, "/")
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("graph api: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return fmt.Errorf("%w: %v", errNotSent, err)
		}
		return fmt.Errorf("graph api %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("graph api %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		var er cloudapi.ErrorResponse
		if json.Unmarshal(data, &er) != nil || er.Error.Code == 0 {
			return fmt.Errorf("graph api %s %s: status %d: %.200s", method, path, resp.StatusCode, data)
		}
		er.Error.HTTPStatus = resp.StatusCode
		return &er.Error
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("graph api %s %s: answer: %w", method, path, err)
	}
	return nil
}

// postJSON posts v as JSON.
func (g *graph) postJSON(ctx context.Context, token, path string, v, out any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("graph api: %w", err)
	}
	return g.call(ctx, token, http.MethodPost, path, nil, bytes.NewReader(body), "application/json", out)
}

// upload posts a medium to /{phone-number-id}/media (multipart, as whatsapp-api-js's
// uploadMedia does) and returns its id.
func (g *graph) upload(ctx context.Context, acct domain.CloudAccount, data []byte, mime, name string) (string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("messaging_product", cloudapi.Product)
	_ = w.WriteField("type", mime)
	if name == "" {
		name = "file"
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
	h.Set("Content-Type", mime)
	part, err := w.CreatePart(h)
	if err != nil {
		return "", err
	}
	if _, err := part.Write(data); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	var out cloudapi.MediaResponse
	if err := g.call(ctx, acct.AccessToken, http.MethodPost, acct.PhoneNumberID+"/media", nil, &buf, w.FormDataContentType(), &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", fmt.Errorf("graph api: the upload answered no media id")
	}
	return out.ID, nil
}
