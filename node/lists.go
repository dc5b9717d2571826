package node

import (
	"fmt"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/persist"
)

// clusterRecords are the admin lists on a cluster node, read from every partition's records,
// in the order a single node's engine gives them (engine.SortUsers, SortKeys, SortSessions).
type clusterRecords struct{ n *clusterNode }

func (r clusterRecords) all() *persist.Records { return persist.NewRecords(r.n.store) }

func (r clusterRecords) Users() ([]domain.User, error) {
	us, err := r.all().Store.ListUsers()
	if err != nil {
		return nil, fmt.Errorf("%w: list users: %w", domain.ErrUnavailable, err)
	}
	engine.SortUsers(us)
	return us, nil
}

func (r clusterRecords) names() (map[string]domain.User, error) {
	us, err := r.Users()
	if err != nil {
		return nil, err
	}
	out := make(map[string]domain.User, len(us))
	for _, u := range us {
		out[u.ID] = u
	}
	return out, nil
}

func (r clusterRecords) Keys() ([]engine.KeyView, error) {
	keys, err := r.all().Store.ListKeys()
	if err != nil {
		return nil, fmt.Errorf("%w: list keys: %w", domain.ErrUnavailable, err)
	}
	users, err := r.names()
	if err != nil {
		return nil, err
	}
	c := r.n.sh.c
	out := make([]engine.KeyView, 0, len(keys))
	for _, k := range keys {
		u, known := users[k.UserID]
		// The plan in force, as the key's own engine resolves it (Users.PlanInForce): a plan
		// no longer in this node's table is the default plan, never the zero plan's "no cap".
		plan, p := r.n.sh.plans.Resolve(u.Plan, c.DefaultPlan)
		v := engine.KeyView{Grant: domain.Grant{Key: k, Plan: plan, Limit: p.RateLimit}}
		if known {
			v.ClientName = engine.ClientName(u)
		}
		if usage, err := persist.NewStore(r.n.store.Partition(r.n.PartitionOf(k.UserID), nil)).GetKeyUsage(k.ID); err == nil {
			v.APICalls = usage.CallsMark
		}
		out = append(out, v)
	}
	engine.SortKeys(out)
	return out, nil
}

func (r clusterRecords) Sessions() ([]engine.SessionView, error) {
	sts, err := r.all().Sessions.ListSessions()
	if err != nil {
		return nil, fmt.Errorf("%w: list sessions: %w", domain.ErrUnavailable, err)
	}
	users, err := r.names()
	if err != nil {
		return nil, err
	}
	out := make([]engine.SessionView, 0, len(sts))
	for _, st := range sts {
		v := engine.SessionView{Session: st}
		if u, ok := users[st.AssignedTo]; ok {
			v.ClientName = engine.ClientName(u)
		}
		out = append(out, v)
	}
	engine.SortSessions(out)
	return out, nil
}
