package persist

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

func TestStoresRecordsNoncesTemplates(t *testing.T) {
	kv := NewMemory()
	defer kv.Close()
	st, ctx := NewStores(kv), context.Background()

	for _, shop := range []string{"b.example", "a.example"} {
		if _, err := st.Replace(ctx, &domain.Store{Shop: shop, UserID: "u-" + shop}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A shop's pending inbox entries go with it: Replace removes the record and drops its data
	// in one commit.
	in := NewInbox(kv)
	if err := in.Accept(ctx, domain.InboxEntry{Seq: "0001", Shop: "b.example", UserID: "u-b.example", Body: []byte(`{}`)}, "d1"); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Replace(ctx, nil, []string{"b.example"}, []string{"b.example"}); err != nil || n != 1 {
		t.Fatalf("Replace dropped %d pending entries, %v; want 1", n, err)
	}
	if all, err := st.All(); err != nil || len(all) != 1 || all[0].Shop != "a.example" {
		t.Fatalf("stores %+v %v", all, err)
	}
	if seqs, err := in.PendingInbox("b.example"); err != nil || len(seqs) != 0 {
		t.Fatalf("inbox of the removed shop: %v %v", seqs, err)
	}

	n := domain.OAuthNonce{UserID: "u1", Shop: "a.myshopify.com", ClientID: "cid", CreatedAt: time.Now().UTC()}
	if err := st.PutNonce(ctx, "n1", n); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Nonce("n1"); err != nil || got.UserID != "u1" || got.ClientID != "cid" {
		t.Fatalf("nonce %+v %v", got, err)
	}
	if err := st.DeleteNonce(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Nonce("n1"); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("consumed nonce: %v", err)
	}

	if m, err := st.Templates("u1"); m != nil || err != nil {
		t.Fatalf("templates of a user who wrote none: %v %v", m, err)
	}
	want := map[string]domain.Template{"orders/create": {Text: "hi", Enabled: false}}
	if err := st.PutTemplates(ctx, "u1", want); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Templates("u1"); err != nil || m["orders/create"] != want["orders/create"] {
		t.Fatalf("templates %v %v", m, err)
	}
}
