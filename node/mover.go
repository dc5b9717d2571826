package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// mover moves sessions between partitions (engine.Mover): a partition's engine hands it a
// session assigned to a user of another partition.
type mover struct {
	n    *clusterNode
	p    int
	from *persist.Records
}

func (m *mover) Local(uid string) bool { return m.n.PartitionOf(uid) == m.p }

func (m *mover) User(_ context.Context, uid string) (domain.User, error) {
	u, found, err := m.n.User(uid)
	if err == nil && !found {
		err = fmt.Errorf("%w: %s", domain.ErrUserNotFound, uid)
	}
	return u, err
}

// Move copies the session's protection records and then the session itself into the new
// user's partition (each only where absent: a resumed move never overwrites), then has that
// partition's owner start it.
func (m *mover) Move(ctx context.Context, st domain.Session) error {
	q := m.n.PartitionOf(st.AssignedTo)
	to := persist.NewRecords(m.n.store.Partition(q, nil))
	if err := m.from.Protections.CopySession(ctx, to.Protections, st.ID, time.Now()); err != nil {
		return err
	}
	if err := to.Sessions.AdoptSession(ctx, st); err != nil {
		return err
	}
	for {
		if b, done, ok := m.n.Enter(q); ok {
			err := m.n.syncView(ctx, q)
			if err == nil {
				err = b.Engine.Sessions.Adopt(ctx, st.ID)
			}
			done()
			return err
		}
		resp, err := m.n.node.Forward(ctx, q, &cluster.Envelope{Route: adoptRoute, Method: "POST", Body: []byte(st.ID), Wait: 20 * time.Second})
		switch {
		case errors.Is(err, cluster.ErrLocal):
			continue
		case err != nil:
			return err
		case resp.Status != 200:
			return fmt.Errorf("%w: the new owner could not start the session: %s", domain.ErrNodeUnavailable, resp.Body)
		}
		return nil
	}
}
