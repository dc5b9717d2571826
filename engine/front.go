package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/gateway/gateway/domain"
)

// The Cloud-API-shaped front (DESIGN.md section 20): what the HTTP layer's /cloud/{version}/...
// routes need of the core besides sending (a send goes through Messages.Send like every other):
// the files uploaded to be sent by id, and the number's record. Every call names the API key's
// user; another user's session or upload is answered as not found.

// FrontMediaStore keeps the front's uploads (persist.FrontMedia).
type FrontMediaStore interface {
	PutFrontMedia(ctx context.Context, m domain.FrontMedia) error
	FrontMedia(id string) (domain.FrontMedia, error)
}

// Front is the front's facet.
type Front struct {
	e     *Engine
	store FrontMediaStore
}

func newFront(e *Engine) *Front { return &Front{e: e, store: e.cfg.Records.FrontMedia} }

// Number is the user's session sessionID (ErrSessionNotFound when it is not theirs).
func (f *Front) Number(uid, sessionID string) (SessionView, error) {
	s := f.e.Sessions
	ent := s.idx.get(sessionID)
	if ent == nil || ent.view.Load().AssignedTo != uid {
		return SessionView{}, fmt.Errorf("%w: %s is not a session of this account", domain.ErrSessionNotFound, sessionID)
	}
	return s.view(ent), nil
}

// Upload keeps data, uploaded for the user's session sessionID, to be sent by the id it
// answers. mimeType is the one sniffed from the bytes; fileName is the upload's.
func (f *Front) Upload(ctx context.Context, uid, sessionID, mimeType, fileName string, data []byte) (domain.FrontMedia, error) {
	if _, err := f.Number(uid, sessionID); err != nil {
		return domain.FrontMedia{}, err
	}
	if f.store == nil {
		return domain.FrontMedia{}, fmt.Errorf("%w: this gateway keeps no uploads", domain.ErrUnavailable)
	}
	if len(data) == 0 {
		return domain.FrontMedia{}, fmt.Errorf("%w: the file is empty", domain.ErrValidation)
	}
	sum := sha256.Sum256(data)
	m := domain.FrontMedia{ID: domain.FrontMediaPrefix + randomID(15), UserID: uid, SessionID: sessionID, MimeType: mimeType,
		FileName: fileName, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), CreatedAt: f.e.now().UTC(), Data: data}
	if err := f.store.PutFrontMedia(ctx, m); err != nil {
		return domain.FrontMedia{}, fmt.Errorf("%w: keep the upload: %w", domain.ErrUnavailable, err)
	}
	return m, nil
}

// Media is the user's upload id with its bytes (ErrMediaNotFound when there is none of
// theirs: expired, another user's, never made).
func (f *Front) Media(uid, id string) (domain.FrontMedia, error) {
	if f.store == nil || !strings.HasPrefix(id, domain.FrontMediaPrefix) {
		return domain.FrontMedia{}, fmt.Errorf("%w: %s", domain.ErrMediaNotFound, id)
	}
	m, err := f.store.FrontMedia(id)
	switch {
	case errors.Is(err, domain.ErrRecordNotFound):
		return m, fmt.Errorf("%w: %s (uploads are kept 30 days)", domain.ErrMediaNotFound, id)
	case err != nil:
		return m, fmt.Errorf("%w: read the upload: %w", domain.ErrUnavailable, err)
	case m.UserID != uid:
		return domain.FrontMedia{}, fmt.Errorf("%w: %s", domain.ErrMediaNotFound, id)
	}
	return m, nil
}

// phoneOf is a session's phone ("" when it has none, or there is no such session).
func (s *Sessions) phoneOf(sessionID string) string {
	if ent := s.idx.get(sessionID); ent != nil {
		return ent.view.Load().Phone
	}
	return ""
}
