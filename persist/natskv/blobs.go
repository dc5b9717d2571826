package natskv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// Large values (DESIGN.md section 19). A NATS message is at most the server's max_payload (1 MiB
// on a stock nats-server), and NATS advises keeping messages small; a media message's body can
// be 16 MiB. Such bodies live in a JetStream object store bucket, <prefix>_media, which cuts
// them in chunks of 128 KiB (nats.go's object store: a stream of chunk messages and a meta
// message per object), and the record that needs one holds its name (persist.Outbox: the
// outbox body holds a reference). Objects live BlobTTL (the bucket's max age), longer than the
// outbox bodies that name them; a body renewed for a message that stays queued puts its media
// again. An object whose record was never committed (the commit failed) just expires.

// BlobTTL is how long a media object lives after it was put: the outbox bodies' lifetime and a
// day more.
const BlobTTL = 15 * 24 * time.Hour

type blobs struct {
	os jetstream.ObjectStore
}

// blobStore opens (making it if missing) the prefix's object store bucket, once.
func (s *Store) blobStore(ctx context.Context) (*blobs, error) {
	s.blobsOnce.Do(func() {
		name := s.prefix + "_media"
		os, err := s.js.ObjectStore(ctx, name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			os, err = s.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
				Bucket: name, Description: "gateway media bodies over 512 KiB (persist/natskv)",
				TTL: BlobTTL, Storage: jetstream.FileStorage, Replicas: s.replicas,
			})
			if err != nil { // made by another node at once?
				var err2 error
				if os, err2 = s.js.ObjectStore(ctx, name); err2 == nil {
					err = nil
				}
			}
		}
		if err != nil {
			s.blobsErr = fmt.Errorf("natskv: media bucket %s: %w", name, unavailable(err))
			return
		}
		s.blobs = &blobs{os: os}
	})
	return s.blobs, s.blobsErr
}

// PutBlob stores data as the object name (persist.Blobs), replacing one of that name.
func (s *Store) PutBlob(ctx context.Context, name string, data []byte) error {
	if !s.enter() {
		return persist.ErrClosed
	}
	defer s.calls.Done()
	b, err := s.blobStore(ctx)
	if err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, s.hold+time.Duration(len(data)>>20)*time.Second)
	defer cancel()
	err = retryWhile(hctx, notSent, func() error {
		_, err := b.os.PutBytes(hctx, name, data)
		return err
	})
	if err != nil {
		return fmt.Errorf("natskv: put media %s: %w", name, unavailable(err))
	}
	return nil
}

// GetBlob reads the object name; domain.ErrRecordNotFound when there is none.
func (s *Store) GetBlob(ctx context.Context, name string) ([]byte, error) {
	if !s.enter() {
		return nil, persist.ErrClosed
	}
	defer s.calls.Done()
	b, err := s.blobStore(ctx)
	if err != nil {
		return nil, err
	}
	var data []byte
	hctx, cancel := context.WithTimeout(ctx, s.hold+time.Minute)
	defer cancel()
	err = retryWhile(hctx, notSent, func() (err error) {
		data, err = b.os.GetBytes(hctx, name)
		return err
	})
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: media %s", domain.ErrRecordNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("natskv: get media %s: %w", name, unavailable(err))
	}
	return data, nil
}

// DeleteBlob removes the object name (none: nothing to do).
func (s *Store) DeleteBlob(ctx context.Context, name string) error {
	if !s.enter() {
		return persist.ErrClosed
	}
	defer s.calls.Done()
	b, err := s.blobStore(ctx)
	if err != nil {
		return err
	}
	if err := b.os.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("natskv: delete media %s: %w", name, unavailable(err))
	}
	return nil
}

// PutBlob, GetBlob and DeleteBlob of a view are its store's: media objects belong to no
// partition (their names are message ids).
func (v *View) PutBlob(ctx context.Context, name string, data []byte) error {
	return v.s.PutBlob(ctx, name, data)
}

// GetBlob is the store's (see PutBlob).
func (v *View) GetBlob(ctx context.Context, name string) ([]byte, error) {
	return v.s.GetBlob(ctx, name)
}

// DeleteBlob is the store's (see PutBlob).
func (v *View) DeleteBlob(ctx context.Context, name string) error { return v.s.DeleteBlob(ctx, name) }
