package natskv

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natstest"
)

// resolve answers every commit it settles: one found applied nil, and one it sends again and
// the server applies nil too. sendPiped returns resolve's answers as its own, and runGroup sends
// again every commit of a piped group left unanswered when another of the group was refused on
// an overtaken condition: a commit whose lost answer resolve had settled by sending it again
// was sent twice (its IfAbsent then failing on its own write: the caller told the record exists
// of a commit that was applied).
func TestResolveAnswersTheCommitsItSendsAgain(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	s, err := Open(ctx, Options{URL: srv.URL, Prefix: "rsv"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A commit whose publish timed out before the server stored it: resolve finds it not
	// applied and sends it again.
	r, rs, err := s.prepare("", []persist.Op{{Key: []byte("t/k"), IfAbsent: true}, {Key: []byte("t/k"), Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	r.ctx = ctx
	answers, err := rs.resolve([]*commitReq{r}, nil, nats.ErrTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := answers[r]; !ok || e != nil {
		t.Fatalf("the commit sent again and applied: answered %v (%v), want nil", ok, e)
	}
	if v, err := s.Get([]byte("t/k")); err != nil || string(v) != "v" {
		t.Fatalf("the record: %q, %v", v, err)
	}
}

// A commit resolve sends again and the server refuses again, on a condition another writer
// overtook between resolve's read and the publish, is answered the store's own error for it
// (here: the record exists, as the commit's first refusal on that condition is decided), not
// the internal wrong-sequence error, which no caller knows.
func TestResolveAnswersARefusedResendWithTheStoresError(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	s, err := Open(ctx, Options{URL: srv.URL, Prefix: "rsv2"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, rs, err := s.prepare("", []persist.Op{{Key: []byte("t/k"), IfAbsent: true}, {Key: []byte("t/k"), Value: []byte("mine")}})
	if err != nil {
		t.Fatal(err)
	}
	r.ctx = ctx
	// Another writer creates the key after resolve read it absent, before its publish.
	AfterRead(func() {
		if err := s.Commit(ctx, persist.Op{Key: []byte("t/k"), Value: []byte("theirs")}); err != nil {
			t.Error(err)
		}
	})
	answers, err := rs.resolve([]*commitReq{r}, nil, nats.ErrTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if e := answers[r]; !errors.Is(e, domain.ErrRecordExists) {
		t.Fatalf("the resend refused on its overtaken condition: answered %v, want %v", e, domain.ErrRecordExists)
	}
	if v, err := s.Get([]byte("t/k")); err != nil || string(v) != "theirs" {
		t.Fatalf("the record: %q, %v", v, err)
	}
}
