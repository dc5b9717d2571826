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
		put, err := st.PutOp(domain.Store{Shop: shop, UserID: "u-" + shop})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Commit(ctx, put); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Commit(ctx, st.DeleteOp("b.example")); err != nil {
		t.Fatal(err)
	}
	if all, err := st.All(); err != nil || len(all) != 1 || all[0].Shop != "a.example" {
		t.Fatalf("stores %+v %v", all, err)
	}

	n := OAuthNonce{UserID: "u1", Shop: "a.myshopify.com", ClientID: "cid", CreatedAt: time.Now().UTC()}
	if err := st.PutNonce(ctx, "n1", n); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Nonce("n1"); err != nil || got.UserID != "u1" || got.ClientID != "cid" {
		t.Fatalf("nonce %+v %v", got, err)
	}
	if err := st.DeleteNonce(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Nonce("n1"); !errors.Is(err, ErrNotFound) {
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
