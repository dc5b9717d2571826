package persist

import (
	"context"
	"fmt"

	"github.com/gateway/gateway/domain"
)

// The media uploaded to the Cloud-API-shaped front (DESIGN.md section 20):
//
//	front_media/<mediaID>   domain.FrontMedia (1)   30 days   POST /cloud/{version}/{sessionId}/media
//
// A file over BlobMin, or whose record would be over the store's largest value, goes to the
// store's media objects (Blobs) when it keeps large values apart (JetStream), the record naming
// it (DataRef); on Badger the record holds it.
const frontMediaTable = "front_media"

// FrontMedia keeps the front's uploads.
type FrontMedia struct {
	t        *Table[domain.FrontMedia]
	blobs    Blobs
	maxValue int // the store's largest value (maxValueOf)
}

// NewFrontMedia returns the uploads' table on kv.
func NewFrontMedia(kv KV) FrontMedia {
	return FrontMedia{t: NewTable[domain.FrontMedia](kv, frontMediaTable, recordVersion1), blobs: blobsOf(kv), maxValue: maxValueOf(kv)}
}

// PutFrontMedia stores an upload (m.Data its bytes) for FrontMediaRetention.
func (f FrontMedia) PutFrontMedia(ctx context.Context, m domain.FrontMedia) error {
	apart := func() error {
		m.DataRef = "front-" + m.ID
		if err := f.blobs.PutBlob(ctx, m.DataRef, m.Data); err != nil {
			return fmt.Errorf("%s %q: media: %w", frontMediaTable, m.ID, err)
		}
		m.Data = nil
		return nil
	}
	if f.blobs != nil && len(m.Data) > BlobMin {
		if err := apart(); err != nil {
			return err
		}
	}
	op, err := f.t.PutTTLOp(m.ID, m, domain.FrontMediaRetention)
	if err == nil && f.blobs != nil && len(m.Data) > 0 && len(op.Value) > f.maxValue {
		// Under BlobMin, but its record over a NATS server's max_payload: apart too.
		if err = apart(); err == nil {
			op, err = f.t.PutTTLOp(m.ID, m, domain.FrontMediaRetention)
		}
	}
	if err != nil {
		return err
	}
	return f.t.KV().Commit(ctx, op)
}

// FrontMedia reads an upload with its bytes (domain.ErrRecordNotFound when there is none).
func (f FrontMedia) FrontMedia(id string) (domain.FrontMedia, error) {
	m, err := f.t.Get(id)
	if err != nil {
		return m, err
	}
	if m.DataRef != "" {
		if f.blobs == nil {
			return m, fmt.Errorf("%w: %s %q names media object %s, and this store keeps none", domain.ErrRecordInvalid, frontMediaTable, id, m.DataRef)
		}
		if m.Data, err = f.blobs.GetBlob(context.Background(), m.DataRef); err != nil {
			return m, fmt.Errorf("%s %q: media: %w", frontMediaTable, id, err)
		}
	}
	return m, nil
}
