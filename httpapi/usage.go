package httpapi

import (
	"github.com/gateway/gateway/domain"
	"github.com/valyala/fasthttp"
)

// usageJSON is the caller's month: messages sent against the plan's allowance (the dashboard's
// usage screen; the daily counts are per key, in /api/client/apikeys).
type usageJSON struct {
	Success      bool      `json:"success"`
	Plan         string    `json:"plan"`
	MessagesSent int64     `json:"messagesSent"`
	MonthlyLimit int64     `json:"monthlyLimit"`
	Remaining    *int64    `json:"remaining"`
	ResetsAt     timestamp `json:"resetsAt"`
}

// clientUsage is GET /api/client/usage.
func (s *Server) clientUsage(ctx *fasthttp.RequestCtx, u domain.User) error {
	acct, err := s.engine(ctx).Messages.Allowance(s.reqContext(ctx), u.ID)
	if err != nil {
		return err
	}
	// The plan named beside the allowance is the one whose allowance it is: the default plan
	// for a profile whose plan left the plan table (the profile itself still names its own).
	plan, _ := s.engine(ctx).Users.PlanInForce(u.ID)
	out := usageJSON{Success: true, Plan: plan, MessagesSent: acct.Sent, MonthlyLimit: acct.Limit, ResetsAt: timestamp(acct.Reset)}
	if acct.Limit > 0 {
		rem := acct.Remaining
		out.Remaining = &rem
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}
