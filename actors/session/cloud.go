package session

import (
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/domain"
)

// SetAccount gives a cloud session new credentials (connected again with a new token, say):
// its client is opened again with them and connects; its queue waits for Connected and is
// kept.
type SetAccount struct {
	Account domain.CloudAccount
	Number  domain.CloudNumber
	Reply   chan Reply
}

func (s *Session) setAccount(c *actor.Context, m *SetAccount) {
	acct, num := m.Account, m.Number
	s.deps.Account = &acct
	s.st.Kind, s.st.Cloud = domain.SessionCloud, &num
	client, err := s.open(c)
	if err != nil {
		m.Reply <- Reply{State: s.st, Err: err}
		return
	}
	s.client = client
	s.unlinking = nil
	s.st.Linked, s.st.QR = true, ""
	if acct.Phone != "" && acct.Phone != s.st.Phone {
		s.st.Phone = acct.Phone
		s.loadPhone(acct.Phone, s.deps.Clock.Now())
	}
	s.st.StatusReason, s.st.Until = "", time.Time{}
	err = s.save()
	s.publish()
	m.Reply <- Reply{State: s.st, Err: err}
	s.connect(c)
}
