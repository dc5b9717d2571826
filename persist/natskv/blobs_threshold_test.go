package natskv_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
)

// On a server whose max_payload is 256 KiB, media under BlobMin whose record is over the
// store's largest value goes to the object store as media over BlobMin does: a 200 KiB and a
// 600 KiB image, and a 200 KiB upload to the Cloud-API front, are accepted and read back with
// their exact bytes (Get, Pending, FrontMedia); a 100 KiB image's record (136 KiB of base64)
// fits, and keeps its media. Before, the inline threshold was BlobMin alone: the 200 KiB
// image's record (273 KiB) was refused, over the server's max_payload.
func TestMediaApartUnderSmallMaxPayload(t *testing.T) {
	url := startSmallPayload(t, 256<<10)
	kv, err := natskv.Open(context.Background(), natskv.Options{URL: url, Prefix: "blobmin", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	o := persist.NewOutbox(kv)
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 2))
	media := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	sizes := []int{100 << 10, 200 << 10, 600 << 10}
	sent := map[string][]byte{}
	for _, n := range sizes {
		e := domain.OutboxEntry{SessionID: "s1", UserID: "u1", CreatedAt: domain.MillisOf(at),
			Message: domain.Message{To: "491511234567", Kind: domain.KindImage, MimeType: "image/jpeg", Caption: "c", Data: media(n)}}
		e.SetStatus(domain.MsgQueued, at)
		if err := o.Accept(ctx, &e, ""); err != nil {
			t.Fatalf("accept a %d KiB image: %v", n>>10, err)
		}
		sent[e.ID] = e.Message.Data
		got, err := o.Get(e.ID)
		if err != nil || !bytes.Equal(got.Message.Data, e.Message.Data) {
			t.Fatalf("Get a %d KiB image: %d bytes, %v", n>>10, len(got.Message.Data), err)
		}
		_, inline := kv.GetBlob(ctx, "media-"+e.ID)
		if apart := inline == nil; apart != (n > 100<<10) {
			t.Fatalf("a %d KiB image kept apart: %v (object: %v)", n>>10, apart, inline)
		}
	}
	// The boot reads them back whole.
	o2 := persist.NewOutbox(kv)
	pending, err := o2.Pending()
	if err != nil || len(pending) != len(sizes) {
		t.Fatalf("Pending: %d, %v", len(pending), err)
	}
	for _, e := range pending {
		if !bytes.Equal(e.Message.Data, sent[e.ID]) {
			t.Fatalf("pending %s: %d bytes of media, want %d, the same", e.ID, len(e.Message.Data), len(sent[e.ID]))
		}
	}

	// An upload to the front, of 200 KiB.
	f := persist.NewFrontMedia(kv)
	up := domain.FrontMedia{ID: "up1", UserID: "u1", MimeType: "image/jpeg", Data: media(200 << 10)}
	if err := f.PutFrontMedia(ctx, up); err != nil {
		t.Fatalf("a 200 KiB upload: %v", err)
	}
	got, err := f.FrontMedia("up1")
	if err != nil || !bytes.Equal(got.Data, up.Data) {
		t.Fatalf("the upload read back: %d bytes, %v", len(got.Data), err)
	}
}
